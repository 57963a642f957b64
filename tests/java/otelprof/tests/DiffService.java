package otelprof.tests;

/**
 * A request loop with a known call tree and known CPU shares, in three builds, for the diff
 * tests. Every request runs whole units of the same loop ({@link #UNIT} iterations of
 * {@code x = x * 31 + i}), each unit in a named method, so a method's share of the CPU is its
 * share of the units:
 *
 * <pre>
 * run → worker → handle → renderHtml → escape            (home:   HTML_ESCAPES units)
 *                       → renderJson → escape, encode    (api:    4 + 4 units)
 *                       → search     → score             (search: SCORE_UNITS units)
 * </pre>
 *
 * <ul>
 *   <li>{@code base}: 4 escapes in renderHtml, 8 units of score. Of 20 units: renderHtml 20 %,
 *       escape 40 %, renderJson 40 %, search and score 40 %.
 *   <li>{@code inclusive}: renderHtml calls the shared escape 12 times (its loop count grew;
 *       its own code did not). Of 28 units: renderHtml 42.9 % in total (+22.9 pp) and ~0 %
 *       self, escape 57.1 % (+17.1 pp: diluted by renderJson's share of it shrinking).
 *   <li>{@code self}: score's own loop runs 16 units. Of 28: score 57.1 % self (+17.1 pp).
 * </ul>
 *
 * Requests are short (about a tenth of a millisecond) and cycle through the three endpoints
 * in a shuffled order, so CPU samples every millisecond land on independent requests.
 * Run with {@code -XX:CompileCommand=dontinline,otelprof/tests/DiffService.*} so that each
 * method stays a frame of its own.
 *
 * <p>Usage: {@code DiffService <base|inclusive|self> <threads> <seconds>}. Prints
 * {@code start <unix ms>}, then {@code end <unix ms> requests <n>}.
 */
public final class DiffService {
    static final int UNIT = 20_000;
    static int htmlEscapes = 4;
    static int scoreUnits = 8;
    static volatile long sink;

    static long escape(long x) {
        for (int i = 0; i < UNIT; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    static long encode(long x) {
        for (int i = 0; i < UNIT; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    /** Self time only: the loop is in this method's own body. */
    static long score(long x, int units) {
        for (int u = 0; u < units; u++) {
            for (int i = 0; i < UNIT; i++) {
                x = x * 31 + i;
            }
        }
        return x;
    }

    static long renderHtml(long x) {
        for (int i = 0; i < htmlEscapes; i++) {
            x = escape(x);
        }
        return x;
    }

    static long renderJson(long x) {
        for (int i = 0; i < 4; i++) {
            x = escape(x);
            x = encode(x);
        }
        return x;
    }

    static long search(long x) {
        return score(x, scoreUnits);
    }

    static long handle(int endpoint, long x) {
        switch (endpoint) {
            case 0:
                return renderHtml(x);
            case 1:
                return renderJson(x);
            default:
                return search(x);
        }
    }

    static long worker(long deadlineNanos, long seed) {
        java.util.Random random = new java.util.Random(seed);
        int[] round = {0, 1, 2};
        long x = seed, requests = 0;
        while (System.nanoTime() < deadlineNanos) {
            for (int i = round.length - 1; i > 0; i--) {
                int j = random.nextInt(i + 1);
                int t = round[i];
                round[i] = round[j];
                round[j] = t;
            }
            for (int endpoint : round) {
                x = handle(endpoint, x);
                requests++;
            }
        }
        sink += x;
        return requests;
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "base":
                break;
            case "inclusive":
                htmlEscapes = 12;
                break;
            case "self":
                scoreUnits = 16;
                break;
            default:
                throw new IllegalArgumentException("build: base, inclusive or self, not " + args[0]);
        }
        int threads = Integer.parseInt(args[1]);
        long deadline = System.nanoTime() + (long) (Double.parseDouble(args[2]) * 1e9);
        System.out.println("start " + System.currentTimeMillis());
        long[] requests = new long[threads];
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            workers[t] = new Thread(() -> requests[id] = worker(deadline, 42 + id), "worker-" + t);
            workers[t].start();
        }
        long total = 0;
        for (int t = 0; t < threads; t++) {
            workers[t].join();
            total += requests[t];
        }
        System.out.println("end " + System.currentTimeMillis() + " requests " + total);
    }
}
