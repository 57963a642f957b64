package otelprof.tests.otel;

import otelprof.ThreadContext;

/**
 * Requests that busy-wait: each request thread hands a job to a helper thread and waits for
 * its answer (about 10 ms later) by spinning on a volatile flag, calling {@code Thread.yield()}
 * ({@code yield}) or {@code Thread.onSpinWait()} ({@code spin}) in the loop, inside a span
 * ("GET /quote"), then computes 5 ms of its own.
 *
 * <p>Usage: {@code SpinWait <yield|spin> <requesters> <seconds>}.
 */
public final class SpinWait {
    static volatile long sink;

    static void compute(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        sink += x;
    }

    /** One request's answer, set by the helper. */
    static final class Answer {
        volatile boolean ready;
    }

    static final class QuoteClient {
        static void awaitAnswer(Answer a, boolean yield) {
            while (!a.ready) {
                if (yield) {
                    Thread.yield();
                } else {
                    Thread.onSpinWait();
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        boolean yield = args[0].equals("yield");
        int requesters = Integer.parseInt(args[1]);
        double seconds = Double.parseDouble(args[2]);
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        long endAt = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] threads = new Thread[requesters];
        for (int t = 0; t < requesters; t++) {
            threads[t] = new Thread(() -> {
                long n = 0;
                while (System.nanoTime() < endAt) {
                    long hi = 0x3000 + n, lo = Thread.currentThread().getId();
                    long span = (n << 20) | lo | 1;
                    ThreadContext.set(hi, lo, span, span, true);
                    ThreadContext.setEndpoint(span, "GET /quote");
                    Answer a = new Answer();
                    Thread helper = new Thread(() -> {
                        try {
                            Thread.sleep(10);
                        } catch (InterruptedException e) {
                            return;
                        }
                        a.ready = true;
                    });
                    helper.start();
                    QuoteClient.awaitAnswer(a, yield);
                    compute(5_000_000L);
                    ThreadContext.clear();
                    n++;
                }
            }, "request-" + t);
            threads[t].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("done");
    }
}
