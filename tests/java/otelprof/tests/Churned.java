package otelprof.tests;

/** Loaded again and again by {@link ClassChurn}, each time in a fresh class loader. */
public final class Churned {
    public static long burn(int n) {
        long x = 0;
        for (int i = 0; i < n; i++) {
            x = x * 31 + i;
        }
        return x;
    }
}
