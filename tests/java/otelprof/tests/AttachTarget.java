package otelprof.tests;

/**
 * A JVM for {@code otelprof attach} to attach to: prints {@code ready <pid as it sees it>},
 * then works in {@link #spin} a few milliseconds out of every ten (a profile of it has a
 * known hottest frame) until it is killed, or after a time limit, so that a test that dies
 * leaves no JVM behind for long.
 *
 * <p>Usage: {@code AttachTarget [seconds, default 120]}
 */
public final class AttachTarget {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 120;
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (System.nanoTime() < end) {
            spin();
            Thread.sleep(8);
        }
    }

    static void spin() {
        long x = 0;
        long stop = System.nanoTime() + 2_000_000L;
        while (System.nanoTime() < stop) {
            for (int i = 0; i < 10_000; i++) {
                x = x * 31 + i;
            }
        }
        sink += x;
    }
}
