package otelprof.tests;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * A burst of CPU work over a great many distinct stacks (the random walks of {@link
 * ManyStacks}), then steady work on one small stack: with a one-second period the burst's
 * profiles are large and the later ones small, so a receiver's size limit can refuse the
 * first without refusing the rest. Each of the two burst threads works until it has used
 * {@code burstCpuMillis} of CPU time (not wall time), so a busy machine makes the burst
 * longer, not its profiles smaller. Prints when the burst ended ({@code burst_end_ms}, since
 * the start) and {@code done}.
 *
 * <p>Usage: {@code BurstThenSteady <burstCpuMillis> <steadySeconds>}
 */
public final class BurstThenSteady {
    static volatile long sink;

    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    static long steady(int n) {
        long x = 0;
        for (int i = 0; i < n; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        long burstCpuNanos = Long.parseLong(args[0]) * 1_000_000L;
        long steadyNanos = Long.parseLong(args[1]) * 1_000_000_000L;
        long start = System.nanoTime();
        Thread[] walkers = new Thread[2];
        for (int t = 0; t < walkers.length; t++) {
            long seed = 0x9E3779B97F4A7C15L * (t + 1);
            walkers[t] = new Thread(() -> {
                long r = seed;
                long cpu0 = THREADS.getCurrentThreadCpuTime();
                // The CPU clock is a system call: read it every 256 walks.
                while (THREADS.getCurrentThreadCpuTime() - cpu0 < burstCpuNanos) {
                    for (int i = 0; i < 256; i++) {
                        r = ManyStacks.next(r);
                        sink += ManyStacks.step(12 + (int) ((r >>> 8) & 15), r);
                    }
                }
            }, "walker-" + t);
            walkers[t].start();
        }
        for (Thread w : walkers) {
            w.join();
        }
        long burstEnd = System.nanoTime();
        System.out.println("burst_end_ms " + (burstEnd - start) / 1_000_000);
        while (System.nanoTime() - burstEnd < steadyNanos) {
            sink += steady(100_000);
        }
        System.out.println("done " + sink);
    }
}
