package otelprof.tests;

/**
 * A JVM for {@code otelprof attach} to attach to: prints {@code ready <pid as it sees it>},
 * then works in {@link #spin} a few milliseconds out of every ten (a profile of it has a
 * known hottest frame) until it is killed, or after a time limit, so that a test that dies
 * leaves no JVM behind for long.
 *
 * <p>Usage: {@code AttachTarget [seconds, default 120] [thread name]}: with a name, an idle
 * thread of that name runs too ({@code \e} in it stands for ESC), for output that tries to
 * steer a terminal.
 */
public final class AttachTarget {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 120;
        if (args.length > 1) {
            Thread idle = new Thread(() -> {
                try {
                    Thread.sleep(Long.MAX_VALUE);
                } catch (InterruptedException e) {
                    // ends the thread
                }
            }, args[1].replace("\\e", "\u001b"));
            idle.setDaemon(true);
            idle.start();
        }
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
