package otelprof.tests;

import java.io.InputStream;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * Code that is compiled again and again: the main thread defines {@link JitFodder} as a new
 * hidden class from the same bytes, calls its methods until they are hot enough to be compiled
 * by both JIT tiers, then drops the class and defines the next. Every class's methods are new
 * code to the JIT, so its compiler threads stay busy for the whole run, not only at start-up.
 * With {@code steady} it defines one class and keeps calling it: the compilers go quiet after
 * the warm-up.
 *
 * <p>Usage: {@code JitChurn <churn|steady> <seconds>}
 */
public final class JitChurn {
    static volatile long sink;

    public static void main(String[] args) throws Throwable {
        boolean churn = args[0].equals("churn");
        double seconds = Double.parseDouble(args[1]);
        byte[] bytes;
        try (InputStream in = JitChurn.class.getResourceAsStream("/otelprof/tests/JitFodder.class")) {
            bytes = in.readAllBytes();
        }
        MethodHandles.Lookup lookup = MethodHandles.lookup();
        MethodType type = MethodType.methodType(long.class, long.class);
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long classes = 0;
        MethodHandle work = null;
        while (System.nanoTime() < end) {
            if (work == null || churn) {
                Class<?> c = lookup.defineHiddenClass(bytes, true).lookupClass();
                work = lookup.findStatic(c, "work", type);
                classes++;
            }
            long x = 0;
            for (int i = 0; i < 20_000; i++) {
                x += (long) work.invokeExact((long) i);
            }
            sink += x;
        }
        System.out.println("classes " + classes);
    }
}

/** The code compiled again and again: a few methods with loops and branches for the JIT. */
final class JitFodder {
    static long work(long n) {
        long a = mix(n);
        for (int i = 0; i < 8; i++) {
            a = (a & 1) == 0 ? mix(a + i) : spread(a ^ i);
        }
        return a;
    }

    static long mix(long x) {
        x ^= x >>> 33;
        x *= 0xff51afd7ed558ccdL;
        x ^= x >>> 33;
        return x;
    }

    static long spread(long x) {
        long r = 0;
        for (int i = 0; i < 4; i++) {
            r = r * 31 + ((x >>> (i * 8)) & 0xff);
        }
        return r;
    }
}
