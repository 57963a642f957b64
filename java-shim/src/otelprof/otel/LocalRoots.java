package otelprof.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import java.util.concurrent.ConcurrentHashMap;
import otelprof.internal.Hex;
import otelprof.internal.NativeBridge;

/**
 * Finds the local root of each span (the first span of its trace in this process: a span
 * whose parent is invalid or remote is its own local root, otherwise it inherits its
 * parent's) and reports local roots' names, which are the endpoints.
 *
 * <p>The parent is known from the SDK span ({@code ReadableSpan}). It is usually the span
 * shown on this thread just before (nested spans, work under {@code Context.wrap}); otherwise
 * a bounded map from span id to local root answers. Without the SDK every span is treated as
 * its own local root.
 */
final class LocalRoots {
    static final LocalRoots INSTANCE = new LocalRoots();

    private static final int MAX_TRACKED = 1 << 16;

    /** span id -> local root span id, for spans seen recently. Cleared when it grows too big. */
    private final ConcurrentHashMap<Long, Long> rootOf = new ConcurrentHashMap<>();

    /**
     * Set once the SDK calls our span processor: final names then come from span end, and
     * scope closes need not look at names at all.
     */
    static volatile boolean processorActive;

    private static final boolean SDK = SdkSpans.present(LocalRoots.class.getClassLoader());

    /** Parses {@code sc}'s ids and works out its local root. */
    OtelprofContextStorage.Ids idsOf(Span span, SpanContext sc, long currentSpan, long currentRoot) {
        OtelprofContextStorage.Ids ids = OtelprofContextStorage.Ids.parse(sc, 0);
        long root = ids.spanId;
        if (SDK && SdkSpans.readable(span)) {
            SpanContext parent = SdkSpans.parent(span);
            if (parent != null && parent.isValid() && !parent.isRemote()) {
                long parentId = Hex.parse(parent.getSpanId(), 0, 16);
                if (parentId == currentSpan && currentRoot != 0) {
                    root = currentRoot;
                } else {
                    Long known = rootOf.get(parentId);
                    root = known != null ? known : parentId;
                }
            } else {
                // A local root: report its name now; it is reported again if it changed when
                // its scope closes, and when it ends, so renames win.
                ids.root = span;
                ids.reportedName = SdkSpans.name(span);
                NativeBridge.reportEndpoint(ids.spanId, ids.reportedName);
            }
        }
        if (rootOf.size() >= MAX_TRACKED) {
            rootOf.clear();
        }
        rootOf.put(ids.spanId, root);
        return root == ids.spanId
                ? ids
                : new OtelprofContextStorage.Ids(ids.traceHigh, ids.traceLow, ids.spanId, root, ids.flags);
    }

    /** The scope of local root {@code ids} closed: report its name if it changed. */
    void scopeClosed(OtelprofContextStorage.Ids ids) {
        if (processorActive) {
            return;
        }
        String name = SdkSpans.name(ids.root);
        if (name != ids.reportedName) {
            ids.reportedName = name;
            NativeBridge.reportEndpoint(ids.spanId, name);
        }
    }

    /** From the SDK's end callback: the final name of a span that may be a local root. */
    void ended(long spanId, SpanContext parent, String name) {
        if (parent != null && parent.isValid() && !parent.isRemote()) {
            return;
        }
        NativeBridge.reportEndpoint(spanId, name);
    }
}
