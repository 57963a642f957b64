package otelprof.otel;

import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.opentelemetry.sdk.trace.SpanProcessor;
import otelprof.internal.Hex;

/**
 * The span processor otelprof adds to the SDK (through the autoconfigure SPI; an SDK built by
 * hand adds it with {@code addSpanProcessor(new EndpointSpanProcessor())}). Two things, both for
 * local roots only, the first span of a trace in this process (parent invalid or remote):
 *
 * <ul>
 *   <li>At start, the span attribute {@value #PROFILE_ID} = the span's own id (16 lowercase hex
 *       digits). Grafana shows "Profiles for this span" on spans that carry it and asks
 *       Pyroscope for the samples whose span id is its value; with the agent's
 *       {@code links=local_root} every sample of the request names this span. The same
 *       attribute, with the same value, as Grafana's own OpenTelemetry Java extension sets.
 *   <li>At end, the root's final name, the endpoint. Optional: without it the name is the one
 *       the root had when a sampled scope closed, which is after routing in practice; with it,
 *       renames after the scope closed are caught too.
 * </ul>
 *
 * <p>Nothing here runs on the context write path ({@link OtelprofContextStorage}): span start
 * and end are the SDK's, once per span, and a child span costs one check of its parent.
 */
public final class EndpointSpanProcessor implements SpanProcessor {
    /** The span attribute Grafana's traces-to-profiles looks for. */
    public static final String PROFILE_ID = "pyroscope.profile.id";

    private static boolean localRoot(ReadableSpan span) {
        SpanContext parent = span.getParentSpanContext();
        return !parent.isValid() || parent.isRemote();
    }

    @Override
    public void onStart(Context parentContext, ReadWriteSpan span) {
        if (localRoot(span)) {
            span.setAttribute(PROFILE_ID, span.getSpanContext().getSpanId());
        }
    }

    @Override
    public boolean isStartRequired() {
        return true;
    }

    @Override
    public void onEnd(ReadableSpan span) {
        if (!localRoot(span)) {
            return;
        }
        LocalRoots.INSTANCE.ended(Hex.parse16(span.getSpanContext().getSpanId(), 0), span.getName());
    }

    @Override
    public boolean isEndRequired() {
        return true;
    }
}
