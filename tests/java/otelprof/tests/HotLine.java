package otelprof.tests;

/**
 * One method with two loops of known cost: the first runs three times as many iterations of
 * the same arithmetic as the second, so with line granularity the first loop's line holds
 * three quarters of the method's CPU. Usage: {@code HotLine SECONDS}.
 */
public final class HotLine {
    private HotLine() {}

    static volatile long sink;

    static long work(long rounds) {
        long acc = 17;
        for (long i = 0; i < 3 * rounds; i++) { acc = acc * 6364136223846793005L + i; } // HOT
        for (long i = 0; i < rounds; i++) { acc = acc * 6364136223846793005L + i; } // COLD
        return acc;
    }

    public static void main(String[] args) {
        long deadline = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        while (System.nanoTime() < deadline) {
            sink += work(1_000_000);
        }
        System.out.println("done " + sink);
    }
}
