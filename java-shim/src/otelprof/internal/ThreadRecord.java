package otelprof.internal;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * This thread's span context record: native memory owned by the agent, in the layout of the
 * OpenTelemetry thread-context record (OTEP 4947), written without JNI calls.
 *
 * <p>Layout: docs/context-protocol.md, "Record layout". Write protocol (mark, fields, fence,
 * publish; one store for a span switch within a trace; the fences of {@link #clear}) and the
 * access mode of each store on the Unsafe and VarHandle paths: docs/context-protocol.md,
 * "Write protocol".
 */
public final class ThreadRecord {
    // Offsets agreed with the agent's ContextRecord (docs/context-protocol.md, "Record
    // layout"); size, local root and samples are checked against layout0() at start.
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

    /**
     * Plain stores through {@code sun.misc.Unsafe} at the record's address, when allowed (see
     * {@link Unsafes}): the ByteBuffer view handles cost several ns per access (bounds, scope
     * and read-only checks that the JIT does not remove for a per-thread buffer), which is most
     * of a context switch's cost. Elsewhere the VarHandles are used.
     */
    private static final MethodHandle PUT_INT;
    private static final MethodHandle PUT_LONG;
    private static final MethodHandle PUT_SHORT;
    private static final MethodHandle PUT_ORDERED_INT;
    private static final MethodHandle PUT_ORDERED_LONG;
    private static final MethodHandle GET_INT_VOLATILE;
    private static final MethodHandle GET_LONG_VOLATILE;
    private static final boolean PLAIN;

    static {
        MethodHandle putInt = Unsafes.method("putInt", MethodType.methodType(void.class, long.class, int.class));
        MethodHandle putLong = Unsafes.method("putLong", MethodType.methodType(void.class, long.class, long.class));
        MethodHandle putShort = Unsafes.method("putShort", MethodType.methodType(void.class, long.class, short.class));
        MethodHandle putOrderedInt = Unsafes.method("putOrderedInt",
                MethodType.methodType(void.class, Object.class, long.class, int.class));
        MethodHandle putOrderedLong = Unsafes.method("putOrderedLong",
                MethodType.methodType(void.class, Object.class, long.class, long.class));
        MethodHandle getInt = Unsafes.method("getIntVolatile", MethodType.methodType(int.class, Object.class, long.class));
        MethodHandle getLong = Unsafes.method("getLongVolatile", MethodType.methodType(long.class, Object.class, long.class));
        PLAIN = putInt != null && putLong != null && putShort != null && putOrderedInt != null
                && putOrderedLong != null && getInt != null && getLong != null;
        PUT_INT = putInt;
        PUT_LONG = putLong;
        PUT_SHORT = putShort;
        PUT_ORDERED_INT = putOrderedInt;
        PUT_ORDERED_LONG = putOrderedLong;
        GET_INT_VOLATILE = getInt;
        GET_LONG_VOLATILE = getLong;
    }

    private static void putInt(long a, int v) {
        try {
            PUT_INT.invokeExact(a, v);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static void putLong(long a, long v) {
        try {
            PUT_LONG.invokeExact(a, v);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static void putShort(long a, short v) {
        try {
            PUT_SHORT.invokeExact(a, v);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static void putOrderedInt(long a, int v) {
        try {
            PUT_ORDERED_INT.invokeExact((Object) null, a, v);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static void putOrderedLong(long a, long v) {
        try {
            PUT_ORDERED_LONG.invokeExact((Object) null, a, v);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static int getIntVolatile(long a) {
        try {
            return (int) GET_INT_VOLATILE.invokeExact((Object) null, a);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    static long readLongVolatile(long a) {
        try {
            return (long) GET_LONG_VOLATILE.invokeExact((Object) null, a);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Each thread's record. An inheritable thread-local on purpose: those live in a map of
     * their own on each thread ({@code Thread.inheritableThreadLocals}), which few libraries
     * use, while the plain map holds every library's thread-locals, where a slot collision
     * makes each lookup probe further (in a profile of a new-span loop, the lookups fell from
     * 25 % to 14 % of its time with this change). A new thread inherits nothing
     * ({@link #childValue}) and registers on first use.
     */
    private static final InheritableThreadLocal<ThreadRecord> CURRENT = new InheritableThreadLocal<>() {
        @Override
        protected ThreadRecord childValue(ThreadRecord parent) {
            return null;
        }
    };

    /** A record that ignores writes, for good: the agent is not there (or its layout differs). */
    static final ThreadRecord NONE = new ThreadRecord(null);

    private static final VarHandle SESSION_LONG =
            MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
    /** The agent's count of profiling sessions started (8 bytes it owns), or null. */
    private static final ByteBuffer SESSIONS = sessions();

    private static ByteBuffer sessions() {
        try {
            return NativeBridge.linked() ? NativeBridge.sessionCounter0() : null;
        } catch (UnsatisfiedLinkError e) {
            return null;
        }
    }

    /** How many profiling sessions the agent has started so far. */
    static long session() {
        ByteBuffer s = SESSIONS;
        return s == null ? 0 : (long) SESSION_LONG.getOpaque(s, 0);
    }

    private final ByteBuffer buffer;
    /**
     * For a record that ignores writes because the agent was stopped when the thread asked:
     * the session count then, so that the thread asks again once profiling has started again
     * (see {@link #stale}); -1 for every other record.
     */
    private final long askedInSession;
    /** The record's address when the Unsafe path is on, else 0. */
    private final long address;
    // What the record's bytes hold now, so that unchanged fields are not written again (a
    // context switch within one trace usually changes only the span id).
    private long writtenTraceHigh;
    private long writtenTraceLow;
    private long writtenLocalRoot;
    /** The trace flags of the published span, or -1 when the record holds none ({@code valid = 0}). */
    private int publishedFlags = -1;

    private ThreadRecord(ByteBuffer buffer) {
        this(buffer, -1);
    }

    private ThreadRecord(ByteBuffer buffer, long askedInSession) {
        this.buffer = buffer;
        this.address = plainAddressOf(buffer);
        this.askedInSession = askedInSession;
    }

    /**
     * Whether this record stands for "the agent was stopped" and a session has started since:
     * the thread should ask for a real record again. One load of the agent's session count,
     * paid only by threads without a record.
     */
    public boolean stale() {
        return askedInSession >= 0 && askedInSession != session();
    }

    /** The address of an agent-made buffer if the Unsafe path is on, else 0. */
    static long plainAddressOf(ByteBuffer buffer) {
        return buffer == null || !PLAIN ? 0 : addressOf(buffer);
    }

    private static long addressOf(ByteBuffer buffer) {
        try {
            return NativeBridge.bufferAddress0(buffer);
        } catch (UnsatisfiedLinkError e) {
            return 0;
        }
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
        if (!LAYOUT_OK) {
            return NONE;
        }
        if (!NativeBridge.active()) {
            // Stopped (or not started yet): ask again after the next start.
            return SESSIONS == null ? NONE : new ThreadRecord(null, session());
        }
        ByteBuffer b = NativeBridge.registerThread();
        if (b == null || b.capacity() < RECORD_SIZE) {
            return NONE;
        }
        return new ThreadRecord(b);
    }

    /** The calling thread's record (registers the thread on first use). */
    public static ThreadRecord current() {
        ThreadRecord r = CURRENT.get();
        if (r == null || (r.buffer == null && r.stale())) {
            r = register();
            CURRENT.set(r);
        }
        return r;
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
        long a = address;
        if (a != 0) {
            setPlain(a, traceIdHigh, traceIdLow, spanId, localRootSpanId, flags);
            return;
        }
        ByteBuffer b = buffer;
        if (b == null) {
            return;
        }
        if (sameTrace(traceIdHigh, traceIdLow, localRootSpanId, flags)) {
            LONG_BE.setOpaque(b, SPAN_ID, spanId);
            return;
        }
        if (publishedFlags >= 0) {
            INT.setOpaque(b, HEADER, header(WRITING, 0, 0));
            VarHandle.storeStoreFence(); // the fields after the mark (clear() fences its own store)
        }
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
        // A plain store after the fence: the reader is this thread's signal handler, which needs
        // only program order (a release store would add an alignment check per write).
        INT.set(b, HEADER, header(VALID, flags, ATTRS_SIZE));
        publishedFlags = flags & 0xff;
    }

    /**
     * Whether the record already holds a valid span of this trace, local root and flags: then
     * only the span id changes, and one aligned 8-byte store (single-copy atomic, so a signal
     * sees the old span or the new one) replaces the mark-write-publish sequence. A switch
     * between spans of one request, the common case, costs one store.
     */
    private boolean sameTrace(long traceIdHigh, long traceIdLow, long localRootSpanId, int flags) {
        return publishedFlags == (flags & 0xff) && traceIdHigh == writtenTraceHigh && traceIdLow == writtenTraceLow
                && localRootSpanId == writtenLocalRoot;
    }

    /** {@link #set} with plain stores at the record's address (same protocol). */
    private void setPlain(long a, long traceIdHigh, long traceIdLow, long spanId, long localRootSpanId, int flags) {
        if (sameTrace(traceIdHigh, traceIdLow, localRootSpanId, flags)) {
            putOrderedLong(a + SPAN_ID, bigEndian(spanId));
            return;
        }
        if (publishedFlags >= 0) {
            // A valid record becomes invalid while several fields change; one that holds no
            // span (after clear()) is invalid already.
            putInt(a + HEADER, header(WRITING, 0, 0));
            VarHandle.storeStoreFence(); // the fields after the mark (clear() fences its own store)
        }
        if (traceIdHigh != writtenTraceHigh || traceIdLow != writtenTraceLow) {
            putLong(a + TRACE_ID, bigEndian(traceIdHigh));
            putLong(a + TRACE_ID + 8, bigEndian(traceIdLow));
            writtenTraceHigh = traceIdHigh;
            writtenTraceLow = traceIdLow;
        }
        putLong(a + SPAN_ID, bigEndian(spanId));
        if (localRootSpanId != writtenLocalRoot) {
            putLong(a + LOCAL_ROOT, localRootSpanId);
            putShort(a + ATTRS, bigEndian((short) (ATTR_LOCAL_ROOT << 8 | 16)));
            putLong(a + ATTRS + 2, bigEndian(Hex.asciiHex((int) (localRootSpanId >>> 32))));
            putLong(a + ATTRS + 10, bigEndian(Hex.asciiHex((int) localRootSpanId)));
            writtenLocalRoot = localRootSpanId;
        }
        VarHandle.storeStoreFence();
        // A release store here; the VarHandle path stores plainly after the same fence, which
        // is all this thread's signal handler needs (docs/context-protocol.md, "Write protocol").
        putOrderedInt(a + HEADER, header(VALID, flags, ATTRS_SIZE));
        publishedFlags = flags & 0xff;
    }

    private static long bigEndian(long v) {
        return LITTLE ? Long.reverseBytes(v) : v;
    }

    private static short bigEndian(short v) {
        return LITTLE ? Short.reverseBytes(v) : v;
    }

    /**
     * Samples taken on this thread so far (wraps around). Comparing two readings tells whether
     * the thread was sampled in between.
     */
    public int samples() {
        long a = address;
        if (a != 0) {
            return getIntVolatile(a + SAMPLES);
        }
        ByteBuffer b = buffer;
        return b == null ? 0 : (int) INT.get(b, SAMPLES);
    }

    /** Publishes "no span". */
    public void clear() {
        long a = address;
        ByteBuffer b = buffer;
        if (a != 0) {
            putInt(a + HEADER, header(0, 0, 0));
        } else if (b != null) {
            INT.set(b, HEADER, header(0, 0, 0));
        } else {
            return;
        }
        // The next set() stores fields without marking the record: keep them after this (a
        // release store would order what precedes it, not what follows).
        VarHandle.storeStoreFence();
        publishedFlags = -1;
    }

    /** The record bytes, for tests. */
    public ByteBuffer bufferForTests() {
        return buffer == null ? null : buffer.duplicate();
    }
}
