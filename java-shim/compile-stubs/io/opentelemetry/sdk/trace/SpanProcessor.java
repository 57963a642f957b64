// Compile-only declaration (see io/opentelemetry/context/Context.java). The real interface
// also has default shutdown()/forceFlush()/close(); the shim does not override them.
package io.opentelemetry.sdk.trace;

import io.opentelemetry.context.Context;

public interface SpanProcessor {
    void onStart(Context parentContext, ReadWriteSpan span);

    boolean isStartRequired();

    void onEnd(ReadableSpan span);

    boolean isEndRequired();
}
