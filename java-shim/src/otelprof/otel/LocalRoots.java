package otelprof.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import java.util.concurrent.ConcurrentHashMap;
import otelprof.internal.Hex;
import otelprof.internal.NativeBridge;

/**
 * Finds the local root of each span (the first span of its trace in this process: a span
 * whose parent is invalid or remote is its own local root, otherwise it inherits its
 * parent's) and reports the names of local roots, which are the endpoints, bound to samples
 * when the profile is written (docs/context-protocol.md, "Endpoints").
 *
 * <p>The parent is known from the SDK span ({@code ReadableSpan}). It is usually the span
 * shown on this thread just before (nested spans, work under {@code Context.wrap}), which is
 * recognised by identity (the SDK hands a child its parent's SpanContext object); otherwise, if
 * the parent is a local root seen recently (a span created with an explicit parent context,
 * e.g. by messaging or async server instrumentation), a small cache of roots answers; failing
 * both, the parent is taken as the local root. Without the SDK every span is treated as its
 * own local root and has no name.
 *
 * <p>Names are reported only for roots that were sampled: the agent's signal handler counts
 * samples in the thread's record, and when a scope closes with the count changed, the name of
 * the scope's local root is reported (one JNI call per sampled root, none per request). If
 * the SDK calls our span processor, the name is reported again at the root's end, which
 * catches renames after the scope closed.
 */
final class LocalRoots {
    static final LocalRoots INSTANCE = new LocalRoots();

    private static final boolean SDK = SdkSpans.present(LocalRoots.class.getClassLoader());

    /** A local root seen recently. Immutable, so the cache needs no locks. */
    private static final class Entry {
        final long spanId;
        final long localRoot;
        final Span rootSpan;

        Entry(long spanId, long localRoot, Span rootSpan) {
            this.spanId = spanId;
            this.localRoot = localRoot;
            this.rootSpan = rootSpan;
        }
    }

    private static final int CACHE = 1 << 12;
    /** Direct-mapped by span id: lock-free, lossy (a miss only costs a guess). */
    private final Entry[] cache = new Entry[CACHE];

    private static int slot(long spanId) {
        // Span ids are random: their low bits are as good as any hash.
        return (int) spanId & (CACHE - 1);
    }

    /** Local roots that were sampled and not yet ended: reported again at their end. */
    private final ConcurrentHashMap<Long, Boolean> sampledRoots = new ConcurrentHashMap<>();
    private static final int MAX_SAMPLED_ROOTS = 1 << 16;

    /**
     * Sets the span id, local root and root span of {@code into}, whose span {@code sc} (the
     * context of {@code span}) is attached over {@code current}.
     */
    void resolve(OtelprofContextStorage.Top into, Span span, SpanContext sc, OtelprofContextStorage.Top current,
            byte[] scratch) {
        long spanId = Hex.parse16Trusted(sc.getSpanId(), 0, scratch);
        long root = spanId;
        Span rootSpan = null;
        if (SDK && SdkSpans.readable(span)) {
            SpanContext parent = SdkSpans.parent(span);
            if (parent != null && parent.isValid() && !parent.isRemote()) {
                SpanContext shown = current.span;
                if (shown != null && (parent == shown || parent.getSpanId().equals(shown.getSpanId()))) {
                    root = current.localRoot;
                    rootSpan = current.rootSpan;
                } else {
                    long parentId = Hex.parse16Trusted(parent.getSpanId(), 0, scratch);
                    Entry e = cache[slot(parentId)];
                    if (e != null && e.spanId == parentId) {
                        root = e.localRoot;
                        rootSpan = e.rootSpan;
                    } else {
                        root = parentId; // unknown parent: the best guess
                    }
                }
            } else {
                rootSpan = span;
                // Only roots are cached: one entry per request, not per span.
                cache[slot(spanId)] = new Entry(spanId, root, rootSpan);
            }
        }
        into.spanId = spanId;
        into.localRoot = root;
        into.rootSpan = rootSpan;
    }

    /** A scope closed on a thread that was sampled meanwhile: name its local root. */
    void sampled(OtelprofContextStorage.Top top) {
        if (top.rootSpan == null) {
            return;
        }
        NativeBridge.reportEndpoint(top.localRoot, SdkSpans.name(top.rootSpan));
        if (sampledRoots.size() >= MAX_SAMPLED_ROOTS) {
            sampledRoots.clear();
        }
        sampledRoots.put(top.localRoot, Boolean.TRUE);
    }

    /** A local root's scope closed: if it was sampled (anywhere), report its name now. */
    void rootClosed(OtelprofContextStorage.Top top) {
        if (sampledRoots.containsKey(top.localRoot)) {
            NativeBridge.reportEndpoint(top.localRoot, SdkSpans.name(top.rootSpan));
        }
    }

    /** From the SDK's end callback: the final name of a sampled local root. */
    void ended(long spanId, String name) {
        if (sampledRoots.remove(spanId) != null) {
            NativeBridge.reportEndpoint(spanId, name);
        }
    }
}
