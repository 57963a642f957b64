package otelprof.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * How many samples the agent has taken, process-wide: read with one memory load, so the shim
 * can tell "no sample was taken while this scope was open" (the common case) for free. How
 * that decides which endpoint names are reported: docs/context-protocol.md, "Endpoints".
 */
public final class SampleCounter {
    private SampleCounter() {}

    private static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
    private static final ByteBuffer COUNTER = find();
    /** The counter's address when the record writes use Unsafe too (see ThreadRecord), else 0. */
    private static final long ADDRESS = ThreadRecord.plainAddressOf(COUNTER);

    private static ByteBuffer find() {
        try {
            return NativeBridge.linked() ? NativeBridge.sampleCounter0() : null;
        } catch (UnsatisfiedLinkError e) {
            return null;
        }
    }

    /** The current count (0 when the agent is not there). */
    public static long get() {
        if (ADDRESS != 0) {
            return ThreadRecord.readLongVolatile(ADDRESS);
        }
        ByteBuffer c = COUNTER;
        return c == null ? 0 : (long) LONG.getOpaque(c, 0);
    }
}
