// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.sdk.trace;

public final class SdkTracerProviderBuilder {
    private SdkTracerProviderBuilder() {}

    public SdkTracerProviderBuilder addSpanProcessor(SpanProcessor processor) {
        throw new UnsupportedOperationException("compile-only stub");
    }
}
