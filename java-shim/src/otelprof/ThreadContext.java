package otelprof;

import otelprof.internal.Hex;
import otelprof.internal.NativeBridge;
import otelprof.internal.ThreadRecord;

/**
 * Direct API for tracers that are not OpenTelemetry: tell otelprof which span the current
 * thread works for, so its CPU samples carry it. With OpenTelemetry none of this is needed:
 * otelprof follows OpenTelemetry's context by itself.
 *
 * <p>Ids are W3C ids as numbers: a 128-bit trace id as two longs (high, low) and 64-bit span
 * ids as longs, each the big-endian value of the hex form. Zero means "none". Calls cost a few
 * nanoseconds and never block; when the agent is not running they do nothing.
 */
public final class ThreadContext {
    private ThreadContext() {}

    /** Whether the otelprof agent is running and sampling this JVM. */
    public static boolean isActive() {
        return NativeBridge.active();
    }

    /**
     * Marks the current thread as working for a span.
     *
     * @param localRootSpanId the first span of the trace in this process (the one whose name is
     *     the endpoint; pass {@code spanId} for a span that has no local parent)
     * @param sampled whether the trace is sampled (only sampled traces are linked to samples;
     *     the endpoint is recorded either way)
     */
    public static void set(long traceIdHigh, long traceIdLow, long spanId, long localRootSpanId, boolean sampled) {
        ThreadRecord.current().set(traceIdHigh, traceIdLow, spanId, localRootSpanId, sampled ? 1 : 0);
    }

    /** Like {@link #set(long, long, long, long, boolean)}, with lowercase or uppercase hex ids. */
    public static void set(String traceIdHex, String spanIdHex, String localRootSpanIdHex, boolean sampled) {
        if (traceIdHex == null || traceIdHex.length() != 32 || spanIdHex == null || spanIdHex.length() != 16) {
            clear();
            return;
        }
        long root = localRootSpanIdHex != null && localRootSpanIdHex.length() == 16
                ? Hex.parse16(localRootSpanIdHex, 0)
                : Hex.parse16(spanIdHex, 0);
        set(Hex.parse16(traceIdHex, 0), Hex.parse16(traceIdHex, 16), Hex.parse16(spanIdHex, 0), root, sampled);
    }

    /** The current thread no longer works for any span. */
    public static void clear() {
        ThreadRecord.current().clear();
    }

    /**
     * The current thread's context, for callers that switch spans often: keep it (per thread,
     * e.g. in your own thread-local state) and call {@link Handle#set} / {@link Handle#clear}
     * without the thread-local lookup the static methods make. Use it only on the thread that
     * obtained it.
     */
    public static Handle handle() {
        return new Handle(ThreadRecord.current());
    }

    /** One thread's context; see {@link #handle()}. */
    public static final class Handle {
        private final ThreadRecord record;

        Handle(ThreadRecord record) {
            this.record = record;
        }

        /** See {@link ThreadContext#set(long, long, long, long, boolean)}. */
        public void set(long traceIdHigh, long traceIdLow, long spanId, long localRootSpanId, boolean sampled) {
            record.set(traceIdHigh, traceIdLow, spanId, localRootSpanId, sampled ? 1 : 0);
        }

        /** See {@link ThreadContext#clear()}. */
        public void clear() {
            record.clear();
        }
    }

    /**
     * Names the endpoint of a local root span (e.g. {@code GET /owners/{id}}). Call again when the
     * name changes; the last name given before the profile is written applies to all samples
     * of that local root, including earlier ones.
     */
    public static void setEndpoint(long localRootSpanId, String name) {
        NativeBridge.reportEndpoint(localRootSpanId, name);
    }
}
