// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.api.trace;

import io.opentelemetry.context.Context;

public interface Span {
    static Span fromContextOrNull(Context context) {
        throw new UnsupportedOperationException("compile-only stub");
    }

    SpanContext getSpanContext();

    /** A default method of the real interface (since API 1.0). */
    Span setAttribute(String key, String value);
}
