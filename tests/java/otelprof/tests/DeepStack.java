package otelprof.tests;

/**
 * CPU time spent at the bottom of a recursion deeper than Pyroscope keeps (1,000 frames): the
 * leaf, {@link #leaf}, is where all the time goes, under {@code depth} frames of
 * {@link #down}.
 *
 * <p>Usage: {@code DeepStack <depth> <seconds>}
 */
public final class DeepStack {
    static volatile long sink;

    static long leaf(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 31 + i;
            }
        }
        return x;
    }

    static long down(int depth, long nanos) {
        if (depth <= 0) {
            return leaf(nanos);
        }
        return down(depth - 1, nanos) + 1;
    }

    public static void main(String[] args) throws Exception {
        int depth = Integer.parseInt(args[0]);
        double seconds = Double.parseDouble(args[1]);
        // A thread with room for the recursion: the main thread's stack may be too small.
        Thread t = new Thread(null, () -> sink += down(depth, (long) (seconds * 1e9)), "deep", 64L << 20);
        t.start();
        t.join();
        System.out.println("done");
    }
}
