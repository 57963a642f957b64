package otelprof.tests;

/**
 * A request loop whose cost moves halfway through, for the trend tests: every request runs
 * {@link #PARSE_UNITS} units of {@code parse}, and {@code render} runs 1 unit per request in
 * the first half and {@link #RENDER_UNITS_LATER} in the second. A unit is the same loop in
 * each method, so {@code render}'s share of the CPU goes from 1/3 to 4/6 (33 % to 67 %) at the
 * switch, while the load (busy threads) stays the same.
 *
 * <p>Run with {@code -XX:CompileCommand=dontinline,otelprof/tests/SwitchHalfway.*} so that
 * each method stays a frame of its own.
 *
 * <p>Usage: {@code SwitchHalfway <threads> <seconds>}. Prints {@code start <unix ms>},
 * {@code switch <unix ms>} and {@code end <unix ms>}.
 */
public final class SwitchHalfway {
    static final int UNIT = 20_000;
    static final int PARSE_UNITS = 2;
    static final int RENDER_UNITS_LATER = 4;
    static volatile int renderUnits = 1;
    static volatile long sink;

    static long unit(long x) {
        for (int i = 0; i < UNIT; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    static long parse(long x) {
        for (int u = 0; u < PARSE_UNITS; u++) {
            x = unit(x);
        }
        return x;
    }

    static long render(long x, int units) {
        for (int u = 0; u < units; u++) {
            x = unit(x);
        }
        return x;
    }

    static long handle(long x) {
        return render(parse(x), renderUnits);
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long millis = Long.parseLong(args[1]) * 1000L;
        long start = System.currentTimeMillis();
        long end = start + millis;
        System.out.println("start " + start);
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            workers[t] = new Thread(() -> {
                long x = 1;
                while (System.currentTimeMillis() < end) {
                    x = handle(x);
                }
                sink += x;
            }, "worker-" + t);
            workers[t].start();
        }
        Thread.sleep(millis / 2);
        renderUnits = RENDER_UNITS_LATER;
        System.out.println("switch " + System.currentTimeMillis());
        for (Thread w : workers) {
            w.join();
        }
        System.out.println("end " + System.currentTimeMillis());
    }
}
