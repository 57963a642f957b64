package otelprof.tests;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A JVM to attach to: it works until a file appears, then exits normally. One thread burns
 * CPU and allocates, two contend for a lock, and a short-lived thread starts every 50 ms, so
 * that every profile type has something to record and threads start and end around each
 * start and stop of the agent. Prints {@code ready} once all of that runs.
 *
 * <p>Usage: {@code RunUntil <stopFile>}
 */
public final class RunUntil {
    static volatile long sink;
    static volatile boolean done;
    static final ReentrantLock LOCK = new ReentrantLock();
    static final Object MONITOR = new Object();

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

    public static void main(String[] args) throws Exception {
        Path stop = Path.of(args[0]);
        List<Thread> threads = new ArrayList<>();
        threads.add(new Thread(() -> {
            List<byte[]> keep = new ArrayList<>();
            while (!done) {
                sink += burn(2_000_000);
                keep.add(new byte[16 * 1024]);
                if (keep.size() > 256) {
                    keep.clear();
                }
            }
        }, "burner"));
        for (int i = 0; i < 2; i++) {
            threads.add(new Thread(() -> {
                while (!done) {
                    LOCK.lock();
                    try {
                        sink += burn(1_000_000);
                    } finally {
                        LOCK.unlock();
                    }
                    synchronized (MONITOR) {
                        sink += burn(500_000);
                    }
                }
            }, "contender-" + i));
        }
        threads.add(new Thread(() -> {
            int n = 0;
            while (!done) {
                Thread t = new Thread(() -> sink += burn(1_000_000), "short-" + n++);
                t.start();
                try {
                    t.join();
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "starter"));
        for (Thread t : threads) {
            t.start();
        }
        System.out.println("ready");
        while (!Files.exists(stop)) {
            Thread.sleep(50);
        }
        done = true;
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("done " + sink);
    }
}
