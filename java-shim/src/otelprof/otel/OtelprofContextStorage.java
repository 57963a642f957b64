package otelprof.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.ContextStorage;
import io.opentelemetry.context.Scope;
import otelprof.internal.Hex;
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
        return new Restoring(scope, state, previous, previousIds, next);
    }

    @Override
    public Context current() {
        return delegate.current();
    }

    @Override
    public Context root() {
        return delegate.root();
    }

    /** Parsed ids of one span context. */
    static final class Ids {
        final long traceHigh;
        final long traceLow;
        final long spanId;
        final long localRoot;
        final int flags;
        /** The SDK span, when this span is a local root (its name is the endpoint). */
        Span root;
        /** The endpoint name last reported for it (compared by identity: a rename is a new String). */
        String reportedName;

        Ids(long traceHigh, long traceLow, long spanId, long localRoot, int flags) {
            this.traceHigh = traceHigh;
            this.traceLow = traceLow;
            this.spanId = spanId;
            this.localRoot = localRoot;
            this.flags = flags;
        }

        static Ids parse(SpanContext sc, long localRoot) {
            String trace = sc.getTraceId();
            long span = Hex.parse(sc.getSpanId(), 0, 16);
            return new Ids(Hex.parse(trace, 0, 16), Hex.parse(trace, 16, 16), span,
                    localRoot == 0 ? span : localRoot, sc.getTraceFlags().asByte());
        }
    }

    /** What this thread's record shows, plus a one-entry cache of parsed ids. */
    static final class PerThread {
        final ThreadRecord record;
        SpanContext current;
        Ids currentIds;
        private SpanContext cached;
        private Ids cachedIds;

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
                long parentRoot = currentIds == null ? 0 : currentIds.localRoot;
                long parentSpan = currentIds == null ? 0 : currentIds.spanId;
                ids = LocalRoots.INSTANCE.idsOf(span, sc, parentSpan, parentRoot);
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
        private boolean closed;

        Restoring(Scope delegate, PerThread state, SpanContext previous, Ids previousIds, SpanContext attached) {
            this.delegate = delegate;
            this.state = state;
            this.previous = previous;
            this.previousIds = previousIds;
            this.attached = attached;
        }

        @Override
        public void close() {
            delegate.close();
            if (closed) {
                return;
            }
            closed = true;
            Ids ids = state.currentIds;
            if (state.current == attached && ids != null && ids.root != null) {
                // A local root's scope closes: by now instrumentation has usually given it its
                // final name (the route); report it if it changed, so earlier samples get it.
                LocalRoots.INSTANCE.scopeClosed(ids);
            }
            if (state.current == attached) {
                state.restore(previous, previousIds);
            }
        }
    }
}
