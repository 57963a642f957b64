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
 * <p>The hot path allocates the scope, plus one ids object when a span is attached that was not
 * parsed last (one cached span per thread), and writes the thread's long-lived state once per
 * attach and once per close.
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
        Top top = state.top;
        Scope scope = null;
        if (own) {
            // As the default storage: attaching null or the current context is a no-op.
            if (toAttach == null || toAttach == top.context) {
                return Noop.INSTANCE;
            }
        } else {
            scope = delegate.attach(toAttach);
        }
        Span span = toAttach == null ? null : Span.fromContextOrNull(toAttach);
        SpanContext next = span == null ? null : span.getSpanContext();
        if (next != null && !next.isValid()) {
            next = null;
        }
        Ids shown = top.ids;
        if (next == (shown == null ? null : shown.context)) {
            // Same span (e.g. only baggage changed): nothing to write.
            if (!own) {
                return scope;
            }
            Restoring same = new Restoring(null, state, toAttach, shown, top, 0, 0);
            state.top = same;
            return same;
        }
        Ids ids = next == null ? null : state.idsOf(span, next, shown);
        Restoring r = new Restoring(scope, state, own ? toAttach : null, ids, top, record.samples(), SampleCounter.get());
        state.top = r;
        state.show(ids);
        return r;
    }

    @Override
    public Context current() {
        if (own) {
            ThreadRecord record = ThreadRecord.current();
            if (record.enabled()) {
                return PerThread.of(record).top.context;
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

    /** Parsed ids of one span context, with its local root. Immutable. */
    static final class Ids {
        final SpanContext context;
        /** The trace id string these ids were parsed from (children share their parent's). */
        final String traceIdHex;
        final long traceHigh;
        final long traceLow;
        final long spanId;
        final long localRoot;
        final int flags;
        /** The SDK span of the local root, when known (its name is the endpoint). */
        final Span rootSpan;

        Ids(SpanContext context, String traceIdHex, long traceHigh, long traceLow, long spanId, long localRoot,
                int flags, Span rootSpan) {
            this.context = context;
            this.traceIdHex = traceIdHex;
            this.traceHigh = traceHigh;
            this.traceLow = traceLow;
            this.spanId = spanId;
            this.localRoot = localRoot;
            this.flags = flags;
            this.rootSpan = rootSpan;
        }
    }

    /**
     * What a thread has attached: the context (when this class keeps it, else null) and the
     * ids of its span (null: none). Immutable; the thread's {@link PerThread#top} is replaced,
     * not changed.
     */
    static class Top {
        static final Top EMPTY = new Top(null, null, null);
        /** Longest chain of scopes kept: see {@link Restoring#below}. */
        static final int MAX_DEPTH = 32;

        final Context context;
        final Ids ids;
        /** What to show again when this is closed; null for a snapshot or the empty top. */
        final Top below;
        final int depth;

        Top(Context context, Ids ids, Top below) {
            this.context = context;
            this.ids = ids;
            this.below = below;
            this.depth = below == null ? 0 : below.depth + 1;
        }

        /**
         * {@code top} as the base of a new scope: itself, or, past {@link #MAX_DEPTH}, a copy
         * without the chain below it (scopes that are never closed must not pile up).
         */
        static Top base(Top top) {
            return top.depth < MAX_DEPTH ? top : new Top(top.context, top.ids, null);
        }
    }

    /**
     * Per thread: what is attached and shown, plus a one-entry cache of parsed ids.
     *
     * <p>This object lives as long as its thread, so it is in the old generation, and every
     * store of a new object's reference into it costs a G1 post-write barrier (a full fence on
     * JDK 17 when the card is not young). Hence one field for everything attached, replaced
     * once per attach and once per close (the default storage's thread-local does the same),
     * and the cache, written for new local roots and spans attached away from their parent.
     */
    static final class PerThread {
        final ThreadRecord record;
        /** What is attached now. */
        Top top = Top.EMPTY;
        /** The ids parsed last: a span attached again is not parsed again. */
        private Ids cached;
        /** Scratch for hex parsing when ids cannot be read in place. */
        final byte[] hex = new byte[16];

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

        /** The ids of {@code sc}, the context of {@code span}: parsed unless seen last. */
        Ids idsOf(Span span, SpanContext sc, Ids shown) {
            Ids last = cached;
            if (last != null && last.context == sc) {
                return last;
            }
            String trace = sc.getTraceId();
            long traceHigh, traceLow;
            if (last != null && trace == last.traceIdHex) {
                traceHigh = last.traceHigh;
                traceLow = last.traceLow;
            } else {
                traceHigh = Hex.parse16Trusted(trace, 0, hex);
                traceLow = Hex.parse16Trusted(trace, 16, hex);
            }
            Ids ids = LocalRoots.INSTANCE.idsOf(span, sc, trace, traceHigh, traceLow, shown, hex);
            if (shown == null || ids.localRoot != shown.localRoot) {
                // Kept for a later attach of the same span: local roots, and spans attached
                // away from their trace's work on this thread (Context.wrap on a pool). Not a
                // child nested under the span shown, which is rarely attached twice; skipping
                // it saves a barrier-heavy store per span in span-heavy code.
                cached = ids;
            }
            return ids;
        }

        /** Makes the record show {@code ids} (null: no span). */
        void show(Ids ids) {
            if (ids == null) {
                record.clear();
            } else {
                record.set(ids.traceHigh, ids.traceLow, ids.spanId, ids.localRoot, ids.flags);
            }
        }
    }

    /**
     * The scope of an attach: it is the thread's top while open. Closing closes the delegate's
     * scope (or, when this class keeps the context, restores the one below as the default
     * storage would), then shows the previous span again.
     */
    static final class Restoring extends Top implements Scope {
        /** The delegate's scope; null when this class keeps the context. */
        private final Scope delegate;
        private final PerThread state;
        /** This thread's sample count when the scope opened. */
        private final int samplesAtOpen;
        /** The process's sample count when the scope opened. */
        private final long allSamplesAtOpen;
        private boolean closed;

        Restoring(Scope delegate, PerThread state, Context attached, Ids ids, Top below, int samplesAtOpen,
                long allSamplesAtOpen) {
            super(attached, ids, base(below));
            this.delegate = delegate;
            this.state = state;
            this.samplesAtOpen = samplesAtOpen;
            this.allSamplesAtOpen = allSamplesAtOpen;
        }

        @Override
        public void close() {
            Top top = state.top;
            if (delegate != null) {
                delegate.close();
                if (closed) {
                    return;
                }
                closed = true;
                if (top.ids != ids) {
                    return; // closed out of order: the span shown stays
                }
            } else if (closed || top.context != context) {
                // As the default storage: only the scope of the current context restores (a
                // scope closed out of order, or twice, is ignored).
                return;
            } else {
                closed = true;
            }
            Top back = below;
            state.top = back;
            Ids closing = top.ids; // this scope's, or (out of order, same context) the top's
            if (closing == back.ids) {
                return;
            }
            if (closing != null) {
                if (state.record.samples() != samplesAtOpen) {
                    // Sampled while this scope was open: name the local root, as it is now (by
                    // the time a scope closes, instrumentation has usually given it its route).
                    LocalRoots.INSTANCE.sampled(closing);
                } else if (closing.localRoot == closing.spanId && closing.rootSpan != null
                        && SampleCounter.get() != allSamplesAtOpen) {
                    // The root's own scope closes, unsampled here but with samples taken
                    // elsewhere meanwhile: its work may have been sampled on other threads
                    // (executors) before it got its final name.
                    LocalRoots.INSTANCE.rootClosed(closing);
                }
            }
            state.show(back.ids);
        }
    }
}
