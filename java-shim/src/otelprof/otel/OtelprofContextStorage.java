package otelprof.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.ContextStorage;
import io.opentelemetry.context.Scope;
import otelprof.internal.Hex;
import otelprof.internal.SampleCounter;
import otelprof.internal.ThreadRecord;

/**
 * Wraps OpenTelemetry's context storage: whenever a context is attached to a thread (and when
 * its scope closes and the previous one comes back) the thread's record is updated to the span
 * of that context. This follows context wherever it goes: {@code Context.wrap},
 * {@code Context.taskWrapping}, instrumented executors, reactive hand-offs; not span start/end,
 * which happen on whatever thread created the span.
 *
 * <p>The hot path does no allocation beyond the restoring scope and parses hex ids only when
 * the span changes (one cached span per thread).
 */
public final class OtelprofContextStorage implements ContextStorage {
    private final ContextStorage delegate;

    private static volatile boolean used;

    public OtelprofContextStorage(ContextStorage delegate) {
        this.delegate = delegate;
    }

    /** Whether any context went through this wrapper yet (the integration is live). */
    public static boolean used() {
        return used;
    }

    @Override
    public Scope attach(Context toAttach) {
        Scope scope = delegate.attach(toAttach);
        ThreadRecord record = ThreadRecord.current();
        if (!record.enabled()) {
            return scope;
        }
        if (!used) {
            used = true;
        }
        PerThread state = PerThread.of(record);
        Span span = toAttach == null ? null : Span.fromContextOrNull(toAttach);
        SpanContext next = span == null ? null : span.getSpanContext();
        if (next != null && !next.isValid()) {
            next = null;
        }
        SpanContext previous = state.current;
        if (next == previous) {
            return scope; // same span (e.g. only baggage changed): nothing to write
        }
        Ids previousIds = state.currentIds;
        state.show(span, next);
        return new Restoring(scope, state, previous, previousIds, next, record.samples(), SampleCounter.get());
    }

    @Override
    public Context current() {
        return delegate.current();
    }

    @Override
    public Context root() {
        return delegate.root();
    }

    /** Parsed ids of one span context, with its local root. */
    static final class Ids {
        final SpanContext context;
        final long traceHigh;
        final long traceLow;
        final long spanId;
        final long localRoot;
        final int flags;
        /** The SDK span of the local root, when known (its name is the endpoint). */
        final Span rootSpan;

        Ids(SpanContext context, long traceHigh, long traceLow, long spanId, long localRoot, int flags, Span rootSpan) {
            this.context = context;
            this.traceHigh = traceHigh;
            this.traceLow = traceLow;
            this.spanId = spanId;
            this.localRoot = localRoot;
            this.flags = flags;
            this.rootSpan = rootSpan;
        }
    }

    /** What this thread's record shows, plus a one-entry cache of parsed ids. */
    static final class PerThread {
        final ThreadRecord record;
        SpanContext current;
        Ids currentIds;
        private SpanContext cached;
        private Ids cachedIds;
        /** Scratch for hex parsing. */
        final byte[] hex = new byte[16];
        /** Last trace id parsed on this thread: children share their parent's String. */
        private String traceId;
        private long traceHigh;
        private long traceLow;

        private PerThread(ThreadRecord record) {
            this.record = record;
        }

        static PerThread of(ThreadRecord record) {
            Object s = record.integrationState;
            if (s instanceof PerThread) {
                return (PerThread) s;
            }
            PerThread created = new PerThread(record);
            record.integrationState = created;
            return created;
        }

        void show(Span span, SpanContext sc) {
            current = sc;
            if (sc == null) {
                currentIds = null;
                record.clear();
                return;
            }
            Ids ids;
            if (sc == cached) {
                ids = cachedIds;
            } else {
                String trace = sc.getTraceId();
                if (trace != traceId) {
                    traceId = trace;
                    traceHigh = Hex.parse16Trusted(trace, 0, hex);
                    traceLow = Hex.parse16Trusted(trace, 16, hex);
                }
                ids = LocalRoots.INSTANCE.idsOf(span, sc, traceHigh, traceLow, currentIds, hex);
                cached = sc;
                cachedIds = ids;
            }
            currentIds = ids;
            record.set(ids.traceHigh, ids.traceLow, ids.spanId, ids.localRoot, ids.flags);
        }

        void restore(SpanContext sc, Ids ids) {
            current = sc;
            currentIds = ids;
            if (ids == null) {
                record.clear();
            } else {
                record.set(ids.traceHigh, ids.traceLow, ids.spanId, ids.localRoot, ids.flags);
            }
        }
    }

    /** Closes the delegate's scope, then shows the previous span again. */
    static final class Restoring implements Scope {
        private final Scope delegate;
        private final PerThread state;
        private final SpanContext previous;
        private final Ids previousIds;
        private final SpanContext attached;
        /** This thread's sample count when the scope opened. */
        private final int samplesAtOpen;
        /** The process's sample count when the scope opened. */
        private final long allSamplesAtOpen;
        private boolean closed;

        Restoring(Scope delegate, PerThread state, SpanContext previous, Ids previousIds, SpanContext attached,
                int samplesAtOpen, long allSamplesAtOpen) {
            this.delegate = delegate;
            this.state = state;
            this.previous = previous;
            this.previousIds = previousIds;
            this.attached = attached;
            this.samplesAtOpen = samplesAtOpen;
            this.allSamplesAtOpen = allSamplesAtOpen;
        }

        @Override
        public void close() {
            delegate.close();
            if (closed) {
                return;
            }
            closed = true;
            Ids ids = state.currentIds;
            if (state.current == attached && ids != null) {
                if (state.record.samples() != samplesAtOpen) {
                    // Sampled while this scope was open: name the local root, as it is now (by
                    // the time a scope closes, instrumentation has usually given it its route).
                    LocalRoots.INSTANCE.sampled(ids);
                } else if (ids.localRoot == ids.spanId && ids.rootSpan != null
                        && SampleCounter.get() != allSamplesAtOpen) {
                    // The root's own scope closes, unsampled here but with samples taken
                    // elsewhere meanwhile: its work may have been sampled on other threads
                    // (executors) before it got its final name.
                    LocalRoots.INSTANCE.rootClosed(ids);
                }
            }
            if (state.current == attached) {
                state.restore(previous, previousIds);
            }
        }
    }
}
