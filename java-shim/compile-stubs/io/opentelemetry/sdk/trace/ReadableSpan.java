// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.sdk.trace;

import io.opentelemetry.api.trace.SpanContext;

public interface ReadableSpan {
    SpanContext getSpanContext();

    SpanContext getParentSpanContext();

    String getName();

    boolean hasEnded();
}
