// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.sdk.autoconfigure.spi;

public interface ConfigProperties {}
