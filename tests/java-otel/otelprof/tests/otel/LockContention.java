package otelprof.tests.otel;

import java.util.concurrent.locks.ReentrantLock;
import otelprof.ThreadContext;

/**
 * Lock truth: two threads take turns on one lock, each holding it for a while (alternately
 * 3 ms and 15 ms, so waits fall both below and above a 10 ms threshold), and measure with
 * System.nanoTime how long each entry waited. The lock is an {@code Account}'s monitor
 * ({@code synchronized}) or, with {@code reentrant}, a {@code ReentrantLock} (which parks).
 * Each thread works inside a span (otelprof direct API).
 *
 * <p>Prints {@code waited <thread> <nanos> <entries>} per thread, then
 * {@code span <thread> <traceIdHex> <spanIdHex> <endpoint>}, and {@code done}.
 *
 * <p>Usage: {@code LockContention <seconds> [monitor|reentrant]}.
 */
public final class LockContention {
    static final class Account {
        long balance;
    }

    static final Account ACCOUNT = new Account();
    static final ReentrantLock LOCK = new ReentrantLock();
    static boolean reentrant;

    static final class Teller extends Thread {
        final long endAt;
        long waited, entries;

        Teller(String name, long endAt) {
            super(name);
            this.endAt = endAt;
        }

        /** The method whose lock entry waits. */
        void transfer(long holdMs) throws InterruptedException {
            long t0 = System.nanoTime();
            if (reentrant) {
                LOCK.lock();
                try {
                    waited += System.nanoTime() - t0;
                    entries++;
                    ACCOUNT.balance++;
                    Thread.sleep(holdMs);
                } finally {
                    LOCK.unlock();
                }
                return;
            }
            synchronized (ACCOUNT) {
                waited += System.nanoTime() - t0;
                entries++;
                ACCOUNT.balance++;
                Thread.sleep(holdMs);
            }
        }

        @Override
        public void run() {
            long hi = 0x0af7651916cd43ddL, lo = getId(), span = 0x00f067aa0ba90000L | getId();
            String endpoint = "lock /" + getName();
            ThreadContext.set(hi, lo, span, span, true);
            ThreadContext.setEndpoint(span, endpoint);
            try {
                long i = 0;
                while (System.nanoTime() < endAt) {
                    transfer(i++ % 2 == 0 ? 3 : 15);
                    // Outside the monitor for a moment, so the other teller gets its turn.
                    Thread.sleep(1);
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            } finally {
                ThreadContext.clear();
            }
            synchronized (LockContention.class) {
                System.out.printf("span %s %016x%016x %016x %s%n", getName(), hi, lo, span,
                        endpoint.replace(' ', '_'));
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        long endAt = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        reentrant = args.length > 1 && args[1].equals("reentrant");
        Teller a = new Teller("teller-a", endAt), b = new Teller("teller-b", endAt);
        a.start();
        b.start();
        a.join();
        b.join();
        for (Teller t : new Teller[] {a, b}) {
            System.out.printf("waited %s %d %d%n", t.getName(), t.waited, t.entries);
        }
        System.out.println("done " + ACCOUNT.balance);
    }
}
