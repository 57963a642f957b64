package otelprof.tests;

import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * CPU work spread over a great many distinct stacks (random walks of random depth through
 * eight mutually recursive methods), so that every profile is large and different: the
 * workload for bounds on what the agent keeps while its collector is away. Prints its
 * resident memory every second ({@code rss_kb <second> <kB>}) and the time the work took
 * ({@code elapsed_ms}).
 *
 * <p>Usage: {@code ManyStacks <threads> <seconds>}
 */
public final class ManyStacks {
    static volatile long sink;

    static long next(long r) {
        r ^= r << 13;
        r ^= r >>> 7;
        r ^= r << 17;
        return r;
    }

    static long burn(long r) {
        long x = r;
        for (int i = 0; i < 2_000; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    static long step(int d, long r) {
        if (d == 0) {
            return burn(r);
        }
        switch ((int) (r & 7)) {
            case 0: return a0(d - 1, next(r));
            case 1: return a1(d - 1, next(r));
            case 2: return a2(d - 1, next(r));
            case 3: return a3(d - 1, next(r));
            case 4: return a4(d - 1, next(r));
            case 5: return a5(d - 1, next(r));
            case 6: return a6(d - 1, next(r));
            default: return a7(d - 1, next(r));
        }
    }

    static long a0(int d, long r) { return step(d, r) + 1; }
    static long a1(int d, long r) { return step(d, r) + 2; }
    static long a2(int d, long r) { return step(d, r) + 3; }
    static long a3(int d, long r) { return step(d, r) + 4; }
    static long a4(int d, long r) { return step(d, r) + 5; }
    static long a5(int d, long r) { return step(d, r) + 6; }
    static long a6(int d, long r) { return step(d, r) + 7; }
    static long a7(int d, long r) { return step(d, r) + 8; }

    static long rssKb() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (Exception e) {
            // reported as 0
        }
        return 0;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        int seconds = Integer.parseInt(args[1]);
        long start = System.nanoTime();
        long end = start + seconds * 1_000_000_000L;
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            long seed = 0x9E3779B97F4A7C15L * (t + 1);
            workers[t] = new Thread(() -> {
                long r = seed;
                while (System.nanoTime() < end) {
                    r = next(r);
                    sink += step(4 + (int) ((r >>> 8) & 7), r);
                }
            }, "walker-" + t);
            workers[t].start();
        }
        for (int s = 1; System.nanoTime() < end; s++) {
            Thread.sleep(1000);
            System.out.println("rss_kb " + s + " " + rssKb());
        }
        for (Thread w : workers) {
            w.join();
        }
        System.out.println("elapsed_ms " + (System.nanoTime() - start) / 1_000_000);
        System.out.println("done " + sink);
    }
}
