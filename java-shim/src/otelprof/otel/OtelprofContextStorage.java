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
 * <p>The hot path allocates the scope (which carries the parsed ids of its span) and writes the
 * thread's long-lived state once per attach and once per close. What is written into the
 * thread's record, and in which order: docs/context-protocol.md, "Write protocol".
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
        PerThread state = PerThread.current();
        if (!state.enabled) {
            state = PerThread.refreshed(state, delegate);
        }
        if (!state.enabled) {
            // Not sampled: the delegate keeps this thread's context (always, for a thread's
            // record never changes).
            return delegate.attach(toAttach);
        }
        if (!used) {
            used = true;
        }
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
        if (next == top.span) {
            // Same span (e.g. only baggage changed): nothing to write.
            if (!own) {
                return scope;
            }
            Restoring same = new Restoring(null, state, toAttach, top, 0, 0);
            same.showSameAs(top);
            state.top = same;
            return same;
        }
        Restoring r = new Restoring(scope, state, own ? toAttach : null, top, state.record.samples(),
                SampleCounter.get());
        if (next != null) {
            state.resolve(r, span, next, top);
        }
        state.top = r;
        state.show(r);
        return r;
    }

    @Override
    public Context current() {
        if (own) {
            PerThread state = PerThread.current();
            if (state.enabled) {
                return state.top.context;
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

    /**
     * What a thread has attached: the context (when this class keeps it, else null) and the
     * span shown with it, parsed (one object per attach: no separate ids object to allocate
     * and to load through). The thread's {@link PerThread#top} is replaced, not changed: the
     * span fields are set by the attaching thread before the object becomes the top, and never
     * after.
     */
    static class Top {
        static final Top EMPTY = new Top(null, null);
        /** Longest chain of scopes kept: see {@link Restoring#below}. */
        static final int MAX_DEPTH = 32;

        final Context context;
        /** What to show again when this is closed; null for a snapshot or the empty top. */
        final Top below;
        final int depth;

        /** The span shown (null: none) and its ids. */
        SpanContext span;
        /** The trace id string the trace id was parsed from (children share their parent's). */
        String traceIdHex;
        long traceHigh;
        long traceLow;
        long spanId;
        long localRoot;
        int flags;
        /** The SDK span of the local root, when known (its name is the endpoint). */
        Span rootSpan;

        Top(Context context, Top below) {
            this.context = context;
            this.below = below;
            this.depth = below == null ? 0 : below.depth + 1;
        }

        /** Shows the same span as {@code other} (only on a top not yet published). */
        final void showSameAs(Top other) {
            span = other.span;
            traceIdHex = other.traceIdHex;
            traceHigh = other.traceHigh;
            traceLow = other.traceLow;
            spanId = other.spanId;
            localRoot = other.localRoot;
            flags = other.flags;
            rootSpan = other.rootSpan;
        }

        /**
         * {@code top} as the base of a new scope: itself, or, past {@link #MAX_DEPTH}, a copy
         * without the chain below it (scopes that are never closed must not pile up).
         */
        static Top base(Top top) {
            if (top.depth < MAX_DEPTH) {
                return top;
            }
            Top copy = new Top(top.context, null);
            copy.showSameAs(top);
            return copy;
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
        /** Whether this thread's record is live (the agent samples it). */
        final boolean enabled;
        /** What is attached now. */
        Top top = Top.EMPTY;
        /** The top whose span was parsed last: a span attached again is not parsed again. */
        private Top cached;
        /** Scratch for hex parsing when ids cannot be read in place. */
        final byte[] hex = new byte[16];
        /**
         * Each thread's state, in a thread-local of its own rather than hung off the thread's
         * record: {@link #current} runs for every {@code Context.current()} (the SDK asks once
         * per span started and once per {@code makeCurrent}), and each dependent load on the
         * way to {@link #top} is on that path. Inheritable for the reason given at
         * {@link ThreadRecord}'s: that map holds few entries; a new thread inherits nothing.
         */
        private static final InheritableThreadLocal<PerThread> CURRENT = new InheritableThreadLocal<>() {
            @Override
            protected PerThread childValue(PerThread parent) {
                return null;
            }
        };

        private PerThread(ThreadRecord record) {
            this.record = record;
            this.enabled = record.enabled();
        }

        /**
         * A thread that found the agent stopped gets a record once profiling has started
         * again, but only between scopes: with nothing attached through the delegate, which
         * kept this thread's context meanwhile, no open scope can be lost in the switch.
         */
        static PerThread refreshed(PerThread s, ContextStorage delegate) {
            if (s.enabled || !s.record.stale()) {
                return s;
            }
            Context now = delegate.current();
            if (now != null && now != delegate.root()) {
                return s;
            }
            PerThread fresh = new PerThread(ThreadRecord.current());
            CURRENT.set(fresh);
            return fresh;
        }

        static PerThread current() {
            PerThread s = CURRENT.get();
            if (s == null) {
                s = new PerThread(ThreadRecord.current());
                CURRENT.set(s);
            }
            return s;
        }

        /**
         * Sets {@code into}'s span to {@code sc}, the context of {@code span}, attached over
         * {@code shown}: parsed, unless it was parsed last.
         */
        void resolve(Top into, Span span, SpanContext sc, Top shown) {
            Top last = cached;
            if (last != null && last.span == sc) {
                into.showSameAs(last);
                return;
            }
            String trace = sc.getTraceId();
            into.span = sc;
            into.traceIdHex = trace;
            if (trace == shown.traceIdHex) {
                into.traceHigh = shown.traceHigh;
                into.traceLow = shown.traceLow;
            } else if (last != null && trace == last.traceIdHex) {
                into.traceHigh = last.traceHigh;
                into.traceLow = last.traceLow;
            } else {
                into.traceHigh = Hex.parse16Trusted(trace, 0, hex);
                into.traceLow = Hex.parse16Trusted(trace, 16, hex);
            }
            into.flags = sc.getTraceFlags().asByte();
            LocalRoots.INSTANCE.resolve(into, span, sc, shown, hex);
            if (shown.span == null || into.localRoot != shown.localRoot) {
                // Kept for a later attach of the same span: local roots, and spans attached
                // away from their trace's work on this thread (Context.wrap on a pool). Not a
                // child nested under the span shown, which is rarely attached twice; skipping
                // it saves a barrier-heavy store per span in span-heavy code.
                cached = into;
            }
        }

        /** Makes the record show {@code top}'s span (none: no span). */
        void show(Top top) {
            if (top.span == null) {
                record.clear();
            } else {
                record.set(top.traceHigh, top.traceLow, top.spanId, top.localRoot, top.flags);
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

        Restoring(Scope delegate, PerThread state, Context attached, Top below, int samplesAtOpen,
                long allSamplesAtOpen) {
            super(attached, base(below));
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
                if (top.span != span) {
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
            Top closing = top; // this scope, or (out of order, same span) the top
            if (closing.span == back.span) {
                return;
            }
            if (closing.span != null) {
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
            state.show(back);
        }
    }
}
