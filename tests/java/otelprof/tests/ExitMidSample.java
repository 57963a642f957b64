package otelprof.tests;

/**
 * Busy threads that never finish; the main thread calls {@code System.exit(0)} after a
 * delay, so the JVM shuts down while samples are being taken.
 *
 * <p>Usage: {@code ExitMidSample <threads> <delayMillis>}
 */
public final class ExitMidSample {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long delay = Long.parseLong(args[1]);
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                long x = 0;
                while (true) {
                    for (int i = 0; i < 100_000; i++) {
                        x = x * 31 + i;
                    }
                    sink += x;
                }
            }, "busy-" + t);
            w.start();
        }
        Thread.sleep(delay);
        System.out.println("exiting");
        System.exit(0);
    }
}
