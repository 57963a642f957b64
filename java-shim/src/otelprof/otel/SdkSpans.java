package otelprof.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.sdk.trace.ReadableSpan;

/**
 * Everything that touches the OpenTelemetry SDK's span class, kept apart so that the rest of
 * the integration loads when only the API is present. Call nothing here unless
 * {@link #present} said yes.
 */
final class SdkSpans {
    private SdkSpans() {}

    static boolean present(ClassLoader loader) {
        try {
            Class.forName("io.opentelemetry.sdk.trace.ReadableSpan", false, loader);
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    static boolean readable(Span span) {
        return span instanceof ReadableSpan;
    }

    static SpanContext parent(Span span) {
        return ((ReadableSpan) span).getParentSpanContext();
    }

    static String name(Span span) {
        return span instanceof ReadableSpan ? ((ReadableSpan) span).getName() : null;
    }

    static boolean ended(Span span) {
        return !(span instanceof ReadableSpan) || ((ReadableSpan) span).hasEnded();
    }
}
