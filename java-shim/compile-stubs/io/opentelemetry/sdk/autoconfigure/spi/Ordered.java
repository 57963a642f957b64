// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.sdk.autoconfigure.spi;

public interface Ordered {
    default int order() {
        return 0;
    }
}
