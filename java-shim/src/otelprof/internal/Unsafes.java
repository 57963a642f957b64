package otelprof.internal;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * {@code sun.misc.Unsafe}, reached by reflection (no compile-time reference), for the few plain
 * memory accesses on the per-context-switch path (the Unsafe path of docs/context-protocol.md,
 * "Write protocol"). On JDK 23 and earlier; on JDK 24 and later
 * only when the JVM runs with {@code --sun-misc-unsafe-memory-access=allow}, since otherwise it
 * warns at the first Unsafe memory access (JEP 498). {@code -Dotelprof.unsafe=false} turns it
 * off. Methods are handed out as bound method handles, which the JIT inlines to single
 * instructions when they sit in static finals.
 */
final class Unsafes {
    private Unsafes() {}

    private static final Class<?> CLASS;
    private static final Object INSTANCE;

    static {
        Class<?> c = null;
        Object u = null;
        try {
            if (allowed(Runtime.version().feature(), System.getProperty("sun.misc.unsafe.memory.access"),
                    System.getProperty("otelprof.unsafe"))) {
                c = Class.forName("sun.misc.Unsafe");
                java.lang.reflect.Field f = c.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                u = f.get(null);
            }
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            c = null;
            u = null;
        }
        CLASS = u == null ? null : c;
        INSTANCE = u;
    }

    /**
     * Whether to use Unsafe on JDK {@code feature}, given the JVM's Unsafe memory-access mode
     * (the system property behind {@code --sun-misc-unsafe-memory-access}, JDK 23+) and
     * {@code otelprof.unsafe}.
     */
    static boolean allowed(int feature, String memoryAccess, String otelprofUnsafe) {
        if ("false".equals(otelprofUnsafe)) {
            return false;
        }
        return feature < 24 || "allow".equals(memoryAccess);
    }

    /** The Unsafe method {@code name} of type {@code type}, bound to the instance; null if unavailable. */
    static MethodHandle method(String name, MethodType type) {
        if (INSTANCE == null) {
            return null;
        }
        try {
            return MethodHandles.publicLookup().findVirtual(CLASS, name, type).bindTo(INSTANCE);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }
}
