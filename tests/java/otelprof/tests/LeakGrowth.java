package otelprof.tests;

import java.util.HashMap;
import java.util.SplittableRandom;

/**
 * Leak-ranking workload: steady sites, churn, and optionally one site that leaks.
 *
 * <ul>
 *   <li>{@link #config} and {@link #index}: built once at the start (24 MiB and 8 MiB of byte
 *       arrays) and held unchanged: steady, never growing.
 *   <li>{@link #session}: arrays that live about a tenth of a second (a ring replaced slot by
 *       slot): always some live, never growing.
 *   <li>{@link #churn}: about 100 MB/s of arrays that die at once.
 *   <li>{@link #leak}, with {@code leak} as the first argument: about 1.5 MB/s of arrays of 1
 *       to 4 KiB put into a map that is never cleared.
 * </ul>
 *
 * Prints {@code leaked <bytes>} at the end.
 *
 * <p>Usage: {@code LeakGrowth <leak|none> <seconds>}.
 */
public final class LeakGrowth {
    static byte[][] config, index;
    static final byte[][] SESSIONS = new byte[1024][];
    static final HashMap<Long, byte[]> LEAKED = new HashMap<>();
    static int next;
    static long leaked;
    static volatile long sink;

    static byte[][] config(SplittableRandom r) {
        byte[][] held = new byte[6 * 1024][];
        for (int i = 0; i < held.length; i++) {
            held[i] = new byte[3 * 1024 + r.nextInt(2 * 1024)];
        }
        return held;
    }

    static byte[][] index(SplittableRandom r) {
        byte[][] held = new byte[8 * 1024][];
        for (int i = 0; i < held.length; i++) {
            held[i] = new byte[512 + r.nextInt(1024)];
        }
        return held;
    }

    static void session(SplittableRandom r) {
        SESSIONS[next] = new byte[1024 + r.nextInt(1024)];
        next = (next + 1) & (SESSIONS.length - 1);
    }

    static void churn(SplittableRandom r) {
        byte[] a = new byte[8 * 1024 + r.nextInt(8 * 1024)];
        a[a.length - 1] = 1;
        sink += a.length;
    }

    static void leak(SplittableRandom r) {
        byte[] a = new byte[1024 + r.nextInt(3 * 1024)];
        LEAKED.put((long) LEAKED.size(), a);
        leaked += a.length;
    }

    public static void main(String[] args) throws Exception {
        boolean leaking = args[0].equals("leak");
        long seconds = Long.parseLong(args[1]);
        SplittableRandom r = new SplittableRandom(7);
        config = config(r);
        index = index(r);
        long start = System.nanoTime();
        long end = start + seconds * 1_000_000_000L;
        // Steps of 10 ms: 8 sessions (about 10,000 a second replace a ring of 1,024: each lives
        // about a tenth of a second), 80 churned arrays (about 100 MB/s), 6 leaked arrays
        // (about 1.5 MB/s).
        for (long step = 0; System.nanoTime() < end; step++) {
            for (int i = 0; i < 80; i++) {
                churn(r);
                if (i % 10 == 0) {
                    session(r);
                }
            }
            if (leaking) {
                for (int i = 0; i < 6; i++) {
                    leak(r);
                }
            }
            long due = start + (step + 1) * 10_000_000L;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
        }
        sink += config.length + index.length;
        System.out.println("leaked " + leaked);
    }
}
