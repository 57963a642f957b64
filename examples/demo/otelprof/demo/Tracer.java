package otelprof.demo;

import java.util.concurrent.ThreadLocalRandom;
import otelprof.ThreadContext;

/**
 * A tiny tracer for the demo: W3C-style ids, a parent per span, and the context handed to
 * otelprof through its direct API ({@link ThreadContext}), as a tracer that is not
 * OpenTelemetry would do. With OpenTelemetry none of this is needed: otelprof follows
 * OpenTelemetry's context by itself.
 */
final class Tracer {
    private Tracer() {}

    static final class Span {
        final long traceHi, traceLo, spanId, localRootId;
        final Span parent;
        final String name;
        final long startNanos = System.nanoTime();
        long durationNanos;

        Span(long traceHi, long traceLo, long spanId, long localRootId, Span parent, String name) {
            this.traceHi = traceHi;
            this.traceLo = traceLo;
            this.spanId = spanId;
            this.localRootId = localRootId;
            this.parent = parent;
            this.name = name;
        }

        String traceId() {
            return String.format("%016x%016x", traceHi, traceLo);
        }

        String spanIdHex() {
            return String.format("%016x", spanId);
        }
    }

    private static final ThreadLocal<Span> CURRENT = new ThreadLocal<>();

    private static long nonZero() {
        long v;
        do {
            v = ThreadLocalRandom.current().nextLong();
        } while (v == 0);
        return v;
    }

    /** A server span with no local parent: its name is the endpoint. */
    static Span startRoot(String endpoint) {
        long id = nonZero();
        Span s = new Span(nonZero(), nonZero(), id, id, null, endpoint);
        ThreadContext.set(s.traceHi, s.traceLo, s.spanId, s.localRootId, true);
        ThreadContext.setEndpoint(s.localRootId, endpoint);
        CURRENT.set(s);
        return s;
    }

    /** A child of the current span. */
    static Span startChild(String name) {
        Span p = CURRENT.get();
        if (p == null) {
            return startRoot(name);
        }
        Span s = new Span(p.traceHi, p.traceLo, nonZero(), p.localRootId, p, name);
        ThreadContext.set(s.traceHi, s.traceLo, s.spanId, s.localRootId, true);
        CURRENT.set(s);
        return s;
    }

    /** Ends `s` and makes its parent current again (or no span). */
    static void end(Span s) {
        s.durationNanos = System.nanoTime() - s.startNanos;
        Span p = s.parent;
        if (p != null) {
            ThreadContext.set(p.traceHi, p.traceLo, p.spanId, p.localRootId, true);
        } else {
            ThreadContext.clear();
        }
        CURRENT.set(p);
    }
}
