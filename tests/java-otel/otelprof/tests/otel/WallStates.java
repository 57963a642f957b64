package otelprof.tests.otel;

import java.util.concurrent.Semaphore;
import otelprof.ThreadContext;

/**
 * Wall-clock truth: worker threads cycle through four phases, each in a method of its own
 * and in a known Java thread state, and measure with System.nanoTime how long each phase
 * really took:
 *
 * <ul>
 *   <li>{@code computePhase}: spins for 37 ms (RUNNABLE);
 *   <li>{@code sleepPhase}: {@code Thread.sleep(29)} (TIMED_WAITING);
 *   <li>{@code blockedPhase}: enters a monitor that a helper thread holds for 19 ms (BLOCKED);
 *   <li>{@code waitPhase}: {@code Object.wait()} until a helper notifies it 11 ms later (WAITING).
 * </ul>
 *
 * Half of the workers ("spanned-N") run every cycle inside a span set with otelprof's direct
 * API; the others ("plain-N") have no span, so the agent treats their waiting phases as idle.
 * At the end each worker prints {@code phase <thread> <method> <nanos>} for every phase plus
 * {@code phase <thread> total <nanos>} (its whole run), and each span it used:
 * {@code span <thread> <traceIdHex> <spanIdHex> <endpoint>}.
 *
 * <p>"idle-N" threads stay idle long enough for the agent to thin their samples: they compute
 * for 200 ms ({@code idleCompute}) and then sleep for 800 ms ({@code idleSleep}), and print
 * their phases the same way.
 *
 * <p>Usage: {@code WallStates <workers> <idlers> <seconds>}.
 */
public final class WallStates {
    static volatile long sink;

    static final long COMPUTE_NS = 37_000_000L;
    static final long SLEEP_MS = 29;
    static final long BLOCKED_MS = 19;
    static final long WAIT_MS = 11;

    /** A monitor plus a helper thread that holds it for BLOCKED_MS on request. */
    static final class Holder implements Runnable {
        final Object monitor = new Object();
        final Semaphore request = new Semaphore(0);
        final Semaphore holding = new Semaphore(0);
        volatile boolean done;

        @Override
        public void run() {
            while (!done) {
                try {
                    request.acquire();
                } catch (InterruptedException e) {
                    return;
                }
                if (done) {
                    return;
                }
                synchronized (monitor) {
                    holding.release();
                    long end = System.nanoTime() + BLOCKED_MS * 1_000_000L;
                    while (System.nanoTime() < end) {
                        try {
                            Thread.sleep(1);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /** A monitor to wait on plus a helper thread that notifies it WAIT_MS after a request. */
    static final class Notifier implements Runnable {
        final Object monitor = new Object();
        final Semaphore request = new Semaphore(0);
        volatile boolean done;

        @Override
        public void run() {
            while (!done) {
                try {
                    request.acquire();
                    if (done) {
                        return;
                    }
                    Thread.sleep(WAIT_MS);
                } catch (InterruptedException e) {
                    return;
                }
                synchronized (monitor) {
                    monitor.notifyAll();
                }
            }
        }
    }

    static final class Worker extends Thread {
        final boolean spanned;
        final long endAt;
        final Holder holder = new Holder();
        final Notifier notifier = new Notifier();
        long compute, sleep, blocked, waited, total;
        final StringBuilder spans = new StringBuilder();

        Worker(String name, boolean spanned, long endAt) {
            super(name);
            this.spanned = spanned;
            this.endAt = endAt;
        }

        void computePhase() {
            long end = System.nanoTime() + COMPUTE_NS;
            long x = 0;
            while (System.nanoTime() < end) {
                for (int i = 0; i < 1000; i++) {
                    x = x * 31 + i;
                }
            }
            sink += x;
        }

        void sleepPhase() throws InterruptedException {
            Thread.sleep(SLEEP_MS);
        }

        void blockedPhase() throws InterruptedException {
            synchronized (holder.monitor) {
                sink++;
            }
        }

        void waitPhase() throws InterruptedException {
            synchronized (notifier.monitor) {
                notifier.request.release();
                // The notifier cannot notify before we wait: it needs this monitor.
                notifier.monitor.wait();
            }
        }

        @Override
        public void run() {
            long start = System.nanoTime();
            Thread h = new Thread(holder, getName() + "-holder");
            Thread n = new Thread(notifier, getName() + "-notifier");
            h.setDaemon(true);
            n.setDaemon(true);
            h.start();
            n.start();
            long cycle = 0;
            try {
                while (System.nanoTime() < endAt) {
                    if (spanned) {
                        long hi = 0x1000 + cycle, lo = Thread.currentThread().getId();
                        long span = (cycle << 20) | lo | 1;
                        String endpoint = "wall /" + getName();
                        ThreadContext.set(hi, lo, span, span, true);
                        ThreadContext.setEndpoint(span, endpoint);
                        if (cycle < 3) {
                            spans.append(String.format("span %s %016x%016x %016x %s%n", getName(), hi, lo,
                                    span, endpoint.replace(' ', '_')));
                        }
                    }
                    long t0 = System.nanoTime();
                    computePhase();
                    long t1 = System.nanoTime();
                    sleepPhase();
                    long t2 = System.nanoTime();
                    holder.request.release();
                    holder.holding.acquire();
                    long t3 = System.nanoTime();
                    blockedPhase();
                    long t4 = System.nanoTime();
                    waitPhase();
                    long t5 = System.nanoTime();
                    if (spanned) {
                        ThreadContext.clear();
                    }
                    compute += t1 - t0;
                    sleep += t2 - t1;
                    blocked += t4 - t3;
                    waited += t5 - t4;
                    cycle++;
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            } finally {
                holder.done = true;
                notifier.done = true;
                holder.request.release();
                notifier.request.release();
                total = System.nanoTime() - start;
            }
        }
    }

    static final class Idler extends Thread {
        final long endAt;
        long compute, sleep, total;

        Idler(String name, long endAt) {
            super(name);
            this.endAt = endAt;
        }

        void idleCompute() {
            long end = System.nanoTime() + 200_000_000L;
            long x = 0;
            while (System.nanoTime() < end) {
                for (int i = 0; i < 1000; i++) {
                    x = x * 31 + i;
                }
            }
            sink += x;
        }

        void idleSleep() throws InterruptedException {
            Thread.sleep(800);
        }

        @Override
        public void run() {
            long start = System.nanoTime();
            try {
                while (System.nanoTime() < endAt) {
                    long t0 = System.nanoTime();
                    idleCompute();
                    long t1 = System.nanoTime();
                    idleSleep();
                    long t2 = System.nanoTime();
                    compute += t1 - t0;
                    sleep += t2 - t1;
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            total = System.nanoTime() - start;
        }
    }

    public static void main(String[] args) throws Exception {
        int workers = Integer.parseInt(args[0]);
        int idlers = Integer.parseInt(args[1]);
        double seconds = Double.parseDouble(args[2]);
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        long endAt = System.nanoTime() + (long) (seconds * 1e9);
        Worker[] all = new Worker[workers];
        for (int i = 0; i < workers; i++) {
            boolean spanned = i % 2 == 0;
            all[i] = new Worker((spanned ? "spanned-" : "plain-") + i, spanned, endAt);
            all[i].start();
        }
        Idler[] idle = new Idler[idlers];
        for (int i = 0; i < idlers; i++) {
            idle[i] = new Idler("idle-" + i, endAt);
            idle[i].start();
        }
        for (Idler w : idle) {
            w.join();
            System.out.printf("phase %s idleCompute %d%n", w.getName(), w.compute);
            System.out.printf("phase %s idleSleep %d%n", w.getName(), w.sleep);
            System.out.printf("phase %s total %d%n", w.getName(), w.total);
        }
        for (Worker w : all) {
            w.join();
            System.out.printf("phase %s computePhase %d%n", w.getName(), w.compute);
            System.out.printf("phase %s sleepPhase %d%n", w.getName(), w.sleep);
            System.out.printf("phase %s blockedPhase %d%n", w.getName(), w.blocked);
            System.out.printf("phase %s waitPhase %d%n", w.getName(), w.waited);
            System.out.printf("phase %s total %d%n", w.getName(), w.total);
            System.out.print(w.spans);
        }
        System.out.println("done " + sink);
    }
}
