// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.sdk.trace;

import io.opentelemetry.api.trace.Span;

public interface ReadWriteSpan extends Span, ReadableSpan {}
