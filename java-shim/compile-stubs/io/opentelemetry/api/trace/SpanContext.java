// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.api.trace;

public interface SpanContext {
    String getTraceId();

    String getSpanId();

    TraceFlags getTraceFlags();

    default boolean isValid() {
        throw new UnsupportedOperationException("compile-only stub");
    }

    default boolean isSampled() {
        throw new UnsupportedOperationException("compile-only stub");
    }

    boolean isRemote();
}
