package otelprof.otel;

import io.opentelemetry.sdk.autoconfigure.spi.AutoConfigurationCustomizer;
import io.opentelemetry.sdk.autoconfigure.spi.AutoConfigurationCustomizerProvider;
import otelprof.Agent;

/**
 * Entry point through the OpenTelemetry SDK autoconfigure SPI, also used when otelprof.jar is
 * an OpenTelemetry javaagent extension ({@code -Dotel.javaagent.extensions=otelprof.jar}).
 *
 * <p>The wrapper is added in the static initialiser: service loading happens before the SDK
 * (or the javaagent) first uses context storage, later would be too late.
 */
public final class OtelprofAutoConfiguration implements AutoConfigurationCustomizerProvider {
    static {
        Agent.startFromLibrary("OpenTelemetry autoconfigure");
        OtelIntegration.install();
    }

    @Override
    public void customize(AutoConfigurationCustomizer autoConfiguration) {
        autoConfiguration.addTracerProviderCustomizer(
                (builder, config) -> builder.addSpanProcessor(new EndpointSpanProcessor()));
    }
}
