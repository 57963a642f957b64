package otelprof.otel;

import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.opentelemetry.sdk.trace.SpanProcessor;
import otelprof.internal.Hex;

/**
 * Reports a sampled local root span's final name when it ends. Optional: without it (an SDK
 * built by hand) the name is the one the root had when a sampled scope closed, which is after
 * routing in practice; with it, renames after the scope closed are caught too.
 */
public final class EndpointSpanProcessor implements SpanProcessor {

    @Override
    public void onStart(Context parentContext, ReadWriteSpan span) {}

    @Override
    public boolean isStartRequired() {
        return false;
    }

    @Override
    public void onEnd(ReadableSpan span) {
        if (span.getParentSpanContext().isValid() && !span.getParentSpanContext().isRemote()) {
            return; // not a local root
        }
        LocalRoots.INSTANCE.ended(Hex.parse16(span.getSpanContext().getSpanId(), 0), span.getName());
    }

    @Override
    public boolean isEndRequired() {
        return true;
    }
}
