// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.sdk.autoconfigure.spi;

import io.opentelemetry.sdk.trace.SdkTracerProviderBuilder;
import java.util.function.BiFunction;

public interface AutoConfigurationCustomizer {
    default AutoConfigurationCustomizer addTracerProviderCustomizer(
            BiFunction<SdkTracerProviderBuilder, ConfigProperties, SdkTracerProviderBuilder> customizer) {
        throw new UnsupportedOperationException("compile-only stub");
    }
}
