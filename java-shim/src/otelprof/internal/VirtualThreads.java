package otelprof.internal;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * {@code Thread.isVirtual()} without compiling against JDK 21 (virtual threads get records of
 * their own: docs/context-protocol.md, "Virtual threads").
 */
final class VirtualThreads {
    private VirtualThreads() {}

    private static final MethodHandle IS_VIRTUAL = find();

    private static MethodHandle find() {
        try {
            return MethodHandles.publicLookup()
                    .findVirtual(Thread.class, "isVirtual", MethodType.methodType(boolean.class));
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null; // JDK < 21: no virtual threads
        }
    }

    static boolean isVirtual(Thread t) {
        if (IS_VIRTUAL == null) {
            return false;
        }
        try {
            return (boolean) IS_VIRTUAL.invokeExact(t);
        } catch (Throwable e) {
            return false;
        }
    }
}
