package otelprof.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * This thread's span context record: native memory owned by the agent, in the layout of the
 * OpenTelemetry thread-context record (OTEP 4947), written without JNI calls.
 *
 * <p>Write protocol (the agent's signal handler runs on this same thread, so only compiler
 * ordering matters): mark the record "being written" ({@code valid = 2}), store-store fence,
 * store the ids, store-store fence, publish {@code valid = 1} with release semantics. A sample
 * taken in between sees an invalid record and carries no span.
 */
public final class ThreadRecord {
    // Offsets agreed with native/src/context.rs (checked against layout0() at start).
    static final int TRACE_ID = 0;
    static final int SPAN_ID = 16;
    static final int HEADER = 24; // valid u8, trace_flags u8, attrs_size u16
    static final int ATTRS = 28;
    static final int LOCAL_ROOT = 256;
    /** u32 bumped by the agent's signal handler for every sample taken on this thread. */
    static final int SAMPLES = 264;
    static final int RECORD_SIZE = 320;

    static final int VALID = 1;
    static final int WRITING = 2;
    /** Attribute key index 0 in the process context's key map: local_root_span_id. */
    static final int ATTR_LOCAL_ROOT = 0;
    static final int ATTRS_SIZE = 2 + 16;

    private static final VarHandle INT =
            MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.nativeOrder());
    private static final VarHandle LONG_BE =
            MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle LONG_NATIVE =
            MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
    private static final VarHandle SHORT_BE =
            MethodHandles.byteBufferViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);
    private static final boolean LITTLE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

    private static final boolean LAYOUT_OK = checkLayout();

    private static final ThreadLocal<ThreadRecord> CURRENT = ThreadLocal.withInitial(ThreadRecord::register);

    /** A record that ignores writes: the agent is not running or this thread is not sampled. */
    static final ThreadRecord NONE = new ThreadRecord(null);

    private final ByteBuffer buffer;
    // What the record's bytes hold now, so that unchanged fields are not written again (a
    // context switch within one trace usually changes only the span id).
    private long writtenTraceHigh;
    private long writtenTraceLow;
    private long writtenLocalRoot;
    /**
     * Per-thread state of the integration that drives this record (the OpenTelemetry wrapper
     * keeps what it shows here), so that one thread-local lookup finds both.
     */
    public Object integrationState;

    private ThreadRecord(ByteBuffer buffer) {
        this.buffer = buffer;
    }

    private static boolean checkLayout() {
        try {
            long l = NativeBridge.layout();
            return l == (((long) RECORD_SIZE << 32) | ((long) LOCAL_ROOT << 16) | SAMPLES);
        } catch (UnsatisfiedLinkError e) {
            return false;
        }
    }

    private static ThreadRecord register() {
        if (!LAYOUT_OK || !NativeBridge.active()) {
            return NONE;
        }
        ByteBuffer b = NativeBridge.registerThread();
        if (b == null || b.capacity() < RECORD_SIZE) {
            return NONE;
        }
        return new ThreadRecord(b);
    }

    /** The calling thread's record (registers the thread on first use). */
    public static ThreadRecord current() {
        return CURRENT.get();
    }

    public boolean enabled() {
        return buffer != null;
    }

    private static int header(int valid, int flags, int attrsSize) {
        return LITTLE
                ? (valid & 0xff) | (flags & 0xff) << 8 | (attrsSize & 0xffff) << 16
                : (valid & 0xff) << 24 | (flags & 0xff) << 16 | (attrsSize & 0xffff);
    }

    /**
     * Publishes a span: trace id (two halves), span id and local root span id as the longs
     * whose big-endian bytes are the W3C ids; {@code flags} are the W3C trace flags.
     */
    public void set(long traceIdHigh, long traceIdLow, long spanId, long localRootSpanId, int flags) {
        ByteBuffer b = buffer;
        if (b == null) {
            return;
        }
        INT.setOpaque(b, HEADER, header(WRITING, 0, 0));
        VarHandle.storeStoreFence();
        if (traceIdHigh != writtenTraceHigh || traceIdLow != writtenTraceLow) {
            LONG_BE.set(b, TRACE_ID, traceIdHigh);
            LONG_BE.set(b, TRACE_ID + 8, traceIdLow);
            writtenTraceHigh = traceIdHigh;
            writtenTraceLow = traceIdLow;
        }
        LONG_BE.set(b, SPAN_ID, spanId);
        if (localRootSpanId != writtenLocalRoot) {
            LONG_NATIVE.set(b, LOCAL_ROOT, localRootSpanId);
            SHORT_BE.set(b, ATTRS, (short) (ATTR_LOCAL_ROOT << 8 | 16));
            LONG_BE.set(b, ATTRS + 2, Hex.asciiHex((int) (localRootSpanId >>> 32)));
            LONG_BE.set(b, ATTRS + 10, Hex.asciiHex((int) localRootSpanId));
            writtenLocalRoot = localRootSpanId;
        }
        VarHandle.storeStoreFence();
        INT.setRelease(b, HEADER, header(VALID, flags, ATTRS_SIZE));
    }

    /**
     * Samples taken on this thread so far (wraps around). Comparing two readings tells whether
     * the thread was sampled in between.
     */
    public int samples() {
        ByteBuffer b = buffer;
        return b == null ? 0 : (int) INT.get(b, SAMPLES);
    }

    /** Publishes "no span". */
    public void clear() {
        ByteBuffer b = buffer;
        if (b != null) {
            INT.setRelease(b, HEADER, header(0, 0, 0));
        }
    }

    /** The record bytes, for tests. */
    public ByteBuffer bufferForTests() {
        return buffer == null ? null : buffer.duplicate();
    }
}
