package otelprof.tests;

/**
 * A JVM for live-heap tests on a running JVM (attach, OpAMP captures): prints {@code ready
 * <pid as it sees it>}, then, until killed or a time limit, holds a steady set of objects
 * allocated in {@link #keep} (a ring of 4,096 arrays of 2 KiB, about 8.5 MB, replaced slot by
 * slot, so that the set turns over every few seconds) while {@link #waste} allocates about
 * 50 MB/s of arrays that die at once (young collections every few hundred milliseconds with a
 * small young generation).
 *
 * <p>Usage: {@code LiveTarget [seconds, default 120]}.
 */
public final class LiveTarget {
    static final byte[][] RING = new byte[4096][];
    static int next;
    static volatile long sink;

    static void keep() {
        for (int i = 0; i < 8; i++) {
            RING[next] = new byte[2048];
            next = (next + 1) & (RING.length - 1);
        }
    }

    static void waste() {
        for (int i = 0; i < 4; i++) {
            byte[] a = new byte[64 * 1024 + i];
            a[a.length - 1] = 1;
            sink += a.length;
        }
    }

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 120;
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (System.nanoTime() < end) {
            keep();
            waste();
            Thread.sleep(5);
        }
        sink += RING.length;
    }
}
