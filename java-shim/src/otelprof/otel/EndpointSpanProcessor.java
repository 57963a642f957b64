package otelprof.otel;

import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.opentelemetry.sdk.trace.SpanProcessor;
import otelprof.internal.Hex;

/**
 * Reports each local root span's final name when it ends. Optional: without it (an SDK built
 * by hand) the name is reported when the root's scope closes, which is after routing in
 * practice; with it, renames after the scope closed are caught too.
 */
public final class EndpointSpanProcessor implements SpanProcessor {
    public EndpointSpanProcessor() {
        LocalRoots.processorActive = true;
    }

    @Override
    public void onStart(Context parentContext, ReadWriteSpan span) {}

    @Override
    public boolean isStartRequired() {
        return false;
    }

    @Override
    public void onEnd(ReadableSpan span) {
        LocalRoots.INSTANCE.ended(Hex.parse(span.getSpanContext().getSpanId(), 0, 16),
                span.getParentSpanContext(), span.getName());
    }

    @Override
    public boolean isEndRequired() {
        return true;
    }
}
