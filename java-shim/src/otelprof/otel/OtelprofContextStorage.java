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
    /**
     * The delegate is OpenTelemetry's default storage (one thread-local holding the current
     * context): then this class keeps the context itself, in the per-thread state it already
     * finds through the thread's record, instead of calling the delegate. Same behaviour, one
     * thread-local lookup and one scope object per attach instead of two of each. Any other
     * delegate (another wrapper, a custom storage) is always called.
     */
    private final boolean own;

    private static volatile boolean used;

    public OtelprofContextStorage(ContextStorage delegate) {
        this.delegate = delegate;
        this.own = delegate != null
                && delegate.getClass().getName().endsWith("io.opentelemetry.context.ThreadLocalContextStorage");
    }

    /** Whether any context went through this wrapper yet (the integration is live). */
    public static boolean used() {
        return used;
    }

    /** Whether this storage keeps the context itself (the delegate is the default storage). */
    public boolean ownsContext() {
        return own;
    }

    @Override
    public Scope attach(Context toAttach) {
        ThreadRecord record = ThreadRecord.current();
        if (!record.enabled()) {
            // Not sampled: the delegate keeps this thread's context (always, for a thread's
            // record never changes).
            return delegate.attach(toAttach);
        }
        if (!used) {
            used = true;
        }
        PerThread state = PerThread.of(record);
        Scope scope = null;
        Context before = null;
        if (own) {
            // As the default storage: attaching null or the current context is a no-op.
            before = state.context;
            if (toAttach == null || toAttach == before) {
                return Noop.INSTANCE;
            }
            state.context = toAttach;
        } else {
            scope = delegate.attach(toAttach);
        }
        Span span = toAttach == null ? null : Span.fromContextOrNull(toAttach);
        SpanContext next = span == null ? null : span.getSpanContext();
        if (next != null && !next.isValid()) {
            next = null;
        }
        SpanContext previous = state.current;
        if (next == previous) {
            // Same span (e.g. only baggage changed): nothing to write.
            return own ? new OwnScope(state, before, toAttach) : scope;
        }
        Ids previousIds = state.currentIds;
        state.show(span, next);
        return new Restoring(scope, state, before, toAttach, previous, previousIds, next, record.samples(),
                SampleCounter.get());
    }

    @Override
    public Context current() {
        if (own) {
            ThreadRecord record = ThreadRecord.current();
            if (record.enabled()) {
                return PerThread.of(record).context;
            }
        }
        return delegate.current();
    }

    @Override
    public Context root() {
        return delegate.root();
    }

    /** The scope of an attach that changed nothing. */
    private enum Noop implements Scope {
        INSTANCE;

        @Override
        public void close() {}
    }

    /** The scope of an attach that changed the context but not the span (own storage only). */
    static final class OwnScope implements Scope {
        private final PerThread state;
        private final Context before;
        private final Context attached;
        private boolean closed;

        OwnScope(PerThread state, Context before, Context attached) {
            this.state = state;
            this.before = before;
            this.attached = attached;
        }

        @Override
        public void close() {
            // As the default storage: only the scope of the current context restores (a
            // scope closed out of order, or twice, is ignored).
            if (!closed && state.context == attached) {
                closed = true;
                state.context = before;
            }
        }
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
        /** The current context, when this class keeps it (see {@link #own}). */
        Context context;
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

    /**
     * Closes the delegate's scope (or restores the context this class keeps), then shows the
     * previous span again.
     */
    static final class Restoring implements Scope {
        /** The delegate's scope; null when this class keeps the context. */
        private final Scope delegate;
        private final PerThread state;
        private final Context beforeContext;
        private final Context attachedContext;
        private final SpanContext previous;
        private final Ids previousIds;
        private final SpanContext attached;
        /** This thread's sample count when the scope opened. */
        private final int samplesAtOpen;
        /** The process's sample count when the scope opened. */
        private final long allSamplesAtOpen;
        private boolean closed;

        Restoring(Scope delegate, PerThread state, Context beforeContext, Context attachedContext,
                SpanContext previous, Ids previousIds, SpanContext attached, int samplesAtOpen, long allSamplesAtOpen) {
            this.delegate = delegate;
            this.state = state;
            this.beforeContext = beforeContext;
            this.attachedContext = attachedContext;
            this.previous = previous;
            this.previousIds = previousIds;
            this.attached = attached;
            this.samplesAtOpen = samplesAtOpen;
            this.allSamplesAtOpen = allSamplesAtOpen;
        }

        @Override
        public void close() {
            if (delegate != null) {
                delegate.close();
            } else if (closed || state.context != attachedContext) {
                // As the default storage: a scope closed out of order or twice is ignored, and
                // the span shown keeps following the context.
                return;
            } else {
                state.context = beforeContext;
            }
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
