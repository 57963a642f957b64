import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * Fixed work timed from inside the JVM, started on a signal: for bench/stop_cost.py, which
 * attaches the agent (or not) while this JVM warms up, then lets the timed part run.
 *
 * <p>Two threads each run {@code units} requests mixing what the agent's engines watch: calls
 * and arithmetic (CPU), small allocations (allocation sampling), a contended monitor (lock
 * events), and thread start/end (one short thread per 2,000 requests). Prints {@code warm}
 * after the warm-up, waits for {@code goFile}, then prints {@code elapsed_ms <n>} and a
 * checksum.
 *
 * <p>Usage: {@code AfterStop <units> <goFile>}
 */
public final class AfterStop {
    static final Object MONITOR = new Object();
    static long shared;

    static long request(int i, Map<Integer, long[]> cache) {
        long[] a = cache.computeIfAbsent(i & 1023, k -> new long[8]);
        long x = i;
        for (int j = 0; j < 200; j++) {
            x = x * 31 + (j ^ a[j & 7]);
        }
        a[i & 7] = x;
        byte[] garbage = new byte[64 + (i & 255)];
        x += garbage.length;
        if ((i & 63) == 0) {
            synchronized (MONITOR) {
                shared += x;
            }
        }
        return x;
    }

    static long run(int units) throws InterruptedException {
        Map<Integer, long[]> cache = new HashMap<>();
        long sum = 0;
        for (int i = 0; i < units; i++) {
            sum += request(i, cache);
            if (i % 2000 == 1999) {
                Thread t = new Thread(() -> shared++);
                t.start();
                t.join();
            }
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        int units = Integer.parseInt(args[0]);
        Path go = Path.of(args[1]);
        long warm = run(units / 4) + run(units / 4);
        System.out.println("warm " + (warm & 1));
        while (!Files.exists(go)) {
            Thread.sleep(20);
        }
        long[] sums = new long[2];
        Thread[] threads = new Thread[2];
        long start = System.nanoTime();
        for (int t = 0; t < 2; t++) {
            int k = t;
            threads[t] = new Thread(() -> {
                try {
                    sums[k] = run(units);
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }, "work-" + t);
            threads[t].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        long elapsed = System.nanoTime() - start;
        System.out.println("elapsed_ms " + elapsed / 1_000_000);
        System.out.println("checksum " + (sums[0] ^ sums[1]));
    }
}
