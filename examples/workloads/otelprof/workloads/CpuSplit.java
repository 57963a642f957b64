package otelprof.workloads;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Random;

/**
 * CPU work with a known split: in every round, {@code sixty} runs 6 chunks, {@code thirty} 3
 * and {@code ten} 1, each chunk the same loop ({@link #spin}) for the same number of
 * iterations. The true CPU shares of the three methods are therefore 60/30/10. The order of
 * the chunks inside a round is shuffled so that a periodic sampler cannot alias with the
 * round's rhythm.
 *
 * <p>Each thread works until it has used {@code cpuSeconds} of CPU time (not wall time), so
 * a busy machine makes the run longer, not the sample smaller. At the end every thread prints
 * the CPU time it used, to compare with what a profiler measured.
 *
 * <p>Usage: {@code CpuSplit <threads> <cpuSeconds> [chunkIterations]}
 */
public final class CpuSplit {
    static volatile long sink;

    /** A counted int loop: with -XX:-UseCountedLoopSafepoints it has no safepoint poll. */
    static long spin(int n) {
        long x = 0;
        for (int i = 0; i < n; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    static void sixty(int n) {
        sink += spin(n);
    }

    static void thirty(int n) {
        sink += spin(n);
    }

    static void ten(int n) {
        sink += spin(n);
    }

    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    static void work(long cpuBudgetNanos, int chunk, long seed) {
        Random random = new Random(seed);
        int[] round = {0, 0, 0, 0, 0, 0, 1, 1, 1, 2};
        long rounds = 0;
        long start = THREADS.getCurrentThreadCpuTime();
        while (THREADS.getCurrentThreadCpuTime() - start < cpuBudgetNanos) {
            for (int i = round.length - 1; i > 0; i--) {
                int j = random.nextInt(i + 1);
                int t = round[i];
                round[i] = round[j];
                round[j] = t;
            }
            for (int which : round) {
                switch (which) {
                    case 0 -> sixty(chunk);
                    case 1 -> thirty(chunk);
                    default -> ten(chunk);
                }
            }
            rounds++;
        }
        sink += rounds;
        long used = THREADS.getCurrentThreadCpuTime() - start;
        System.out.printf("cpu_ms %s %d%n", Thread.currentThread().getName(), used / 1_000_000);
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        double cpuSeconds = args.length > 1 ? Double.parseDouble(args[1]) : 10;
        int chunk = args.length > 2 ? Integer.parseInt(args[2]) : 100_000;
        long budget = (long) (cpuSeconds * 1e9);
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            long seed = 42 + t;
            workers[t] = new Thread(() -> work(budget, chunk, seed), "worker-" + t);
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        System.out.println("done " + sink);
    }
}
