package otelprof.tests;

/**
 * Allocation at a great many distinct stacks, fast: each allocation at the end of a random
 * walk of eight levels through eight methods (8^8 paths), so that an allocation profile that
 * records every allocation has tens of thousands of distinct samples per second, more than a
 * backend takes in one profile.
 *
 * <p>Usage: {@code WideAllocs <threads> <seconds>}
 */
public final class WideAllocs {
    static volatile Object sink;

    static long next(long r) {
        r ^= r << 13;
        r ^= r >>> 7;
        r ^= r << 17;
        return r;
    }

    static void step(int d, long r) {
        if (d == 0) {
            sink = new byte[16 + (int) (r & 63)];
            return;
        }
        switch ((int) (r & 7)) {
            case 0: a0(d - 1, next(r)); break;
            case 1: a1(d - 1, next(r)); break;
            case 2: a2(d - 1, next(r)); break;
            case 3: a3(d - 1, next(r)); break;
            case 4: a4(d - 1, next(r)); break;
            case 5: a5(d - 1, next(r)); break;
            case 6: a6(d - 1, next(r)); break;
            default: a7(d - 1, next(r)); break;
        }
    }

    static void a0(int d, long r) { step(d, r); }
    static void a1(int d, long r) { step(d, r); }
    static void a2(int d, long r) { step(d, r); }
    static void a3(int d, long r) { step(d, r); }
    static void a4(int d, long r) { step(d, r); }
    static void a5(int d, long r) { step(d, r); }
    static void a6(int d, long r) { step(d, r); }
    static void a7(int d, long r) { step(d, r); }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long end = System.nanoTime() + (long) (Double.parseDouble(args[1]) * 1e9);
        Thread[] all = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            long seed = 0x9E3779B97F4A7C15L * (t + 1);
            all[t] = new Thread(() -> {
                long r = seed;
                long n = 0;
                while (System.nanoTime() < end) {
                    r = next(r);
                    step(8, r);
                    n++;
                }
                System.out.println("allocations " + n);
            }, "alloc-" + t);
            all[t].start();
        }
        for (Thread t : all) {
            t.join();
        }
        System.out.println("done");
    }
}
