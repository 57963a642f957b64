package otelprof.tests;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Starts {@code total} short-lived threads, {@code concurrency} at a time, each burning a
 * little CPU, then reports how many POSIX timers the process still has ({@code
 * /proc/self/timers}) next to how many threads the process has ({@code /proc/self/task}, the
 * JVM's own threads included, which are profiled too): a profiler that leaks a timer per
 * thread shows up as thousands of timers for a few dozen threads.
 *
 * <p>Usage: {@code ManyThreads <total> <concurrency>}
 */
public final class ManyThreads {
    static volatile long sink;

    static long burn(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 31 + i;
            }
        }
        return x;
    }

    static long timers() throws Exception {
        return Files.readAllLines(Path.of("/proc/self/timers")).stream()
                .filter(l -> l.startsWith("ID:"))
                .count();
    }

    public static void main(String[] args) throws Exception {
        int total = Integer.parseInt(args[0]);
        int concurrency = Integer.parseInt(args[1]);
        long peakTimers = 0;
        int started = 0;
        while (started < total) {
            List<Thread> batch = new ArrayList<>();
            for (int i = 0; i < concurrency && started < total; i++, started++) {
                // Every 10th thread runs long enough to be sampled a few times.
                long nanos = (started % 10 == 0) ? 5_000_000 : 100_000;
                Thread t = new Thread(() -> sink += burn(nanos), "short-" + started);
                t.start();
                batch.add(t);
            }
            peakTimers = Math.max(peakTimers, timers());
            for (Thread t : batch) {
                t.join();
            }
        }
        // ThreadEnd runs on the ending thread just before it dies; give the last ones a moment.
        Thread.sleep(300);
        // Every thread of the process, the JVM's own included: each may have a CPU timer.
        long live;
        try (var tasks = Files.list(Path.of("/proc/self/task"))) {
            live = tasks.count();
        }
        System.out.println("started=" + started + " peak_timers=" + peakTimers
                + " timers_after=" + timers() + " live_threads=" + live);
    }
}
