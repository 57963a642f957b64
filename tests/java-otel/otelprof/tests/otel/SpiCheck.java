package otelprof.tests.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.autoconfigure.spi.AutoConfigurationCustomizer;
import io.opentelemetry.sdk.autoconfigure.spi.AutoConfigurationCustomizerProvider;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.SdkTracerProviderBuilder;
import io.opentelemetry.sdk.autoconfigure.spi.ConfigProperties;
import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;
import java.util.function.BiFunction;

/**
 * otelprof.jar on the class path only (no -javaagent): the SDK autoconfigure SPI finds its
 * provider, whose static initialiser starts the agent (options from OTELPROF_OPTIONS) and wraps
 * context storage; its customizer adds the span processor that reports final endpoint names.
 * What the SDK's AutoConfiguredOpenTelemetrySdk does with providers is done here by hand (that
 * module is not in the test jar): load them, let them customize a tracer provider builder.
 *
 * <p>With argument {@code early}, the application touches context before the SPI runs, as a
 * misconfigured application would: the wrapper is then ignored by OpenTelemetry, and otelprof
 * must say so.
 */
public final class SpiCheck {
    static volatile long sink;

    static void spiWork() {
        sink += SpanScenarios.burn(20_000_000);
    }

    static int providers;
    static int customizerCount;

    /**
     * {@code builder} as the autoconfigure SPI's providers customize it (otelprof's adds its span
     * processor); counts them in {@link #providers} and {@link #customizerCount}.
     */
    static SdkTracerProviderBuilder autoconfigured(SdkTracerProviderBuilder builder) {
        List<BiFunction<SdkTracerProviderBuilder, ConfigProperties, SdkTracerProviderBuilder>> customizers = new ArrayList<>();
        AutoConfigurationCustomizer collector = new AutoConfigurationCustomizer() {
            @Override
            public AutoConfigurationCustomizer addTracerProviderCustomizer(
                    BiFunction<SdkTracerProviderBuilder, ConfigProperties, SdkTracerProviderBuilder> c) {
                customizers.add(c);
                return this;
            }

            // The remaining methods of the real interface are not used by otelprof.
            @Override
            public AutoConfigurationCustomizer addPropagatorCustomizer(
                    BiFunction<? super io.opentelemetry.context.propagation.TextMapPropagator, ConfigProperties,
                            ? extends io.opentelemetry.context.propagation.TextMapPropagator> c) {
                return this;
            }

            @Override
            public AutoConfigurationCustomizer addResourceCustomizer(
                    BiFunction<? super io.opentelemetry.sdk.resources.Resource, ConfigProperties,
                            ? extends io.opentelemetry.sdk.resources.Resource> c) {
                return this;
            }

            @Override
            public AutoConfigurationCustomizer addSamplerCustomizer(
                    BiFunction<? super io.opentelemetry.sdk.trace.samplers.Sampler, ConfigProperties,
                            ? extends io.opentelemetry.sdk.trace.samplers.Sampler> c) {
                return this;
            }

            @Override
            public AutoConfigurationCustomizer addSpanExporterCustomizer(
                    BiFunction<? super io.opentelemetry.sdk.trace.export.SpanExporter, ConfigProperties,
                            ? extends io.opentelemetry.sdk.trace.export.SpanExporter> c) {
                return this;
            }

            @Override
            public AutoConfigurationCustomizer addPropertiesSupplier(
                    java.util.function.Supplier<java.util.Map<String, String>> s) {
                return this;
            }
        };
        for (AutoConfigurationCustomizerProvider p : ServiceLoader.load(AutoConfigurationCustomizerProvider.class)) {
            p.customize(collector);
            providers++;
        }
        for (var c : customizers) {
            builder = c.apply(builder, null);
        }
        customizerCount = customizers.size();
        return builder;
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("early")) {
            Context.current();
        }
        SdkTracerProvider provider = autoconfigured(SdkTracerProvider.builder()).build();
        Tracer tracer = provider.get("spi");
        long end = System.nanoTime() + 3_000_000_000L;
        while (System.nanoTime() < end) {
            Span root = tracer.spanBuilder("GET").startSpan();
            try (Scope s = root.makeCurrent()) {
                spiWork();
            }
            // Renamed after its scope closed: only the span processor's end callback sees this.
            root.updateName("GET /spi");
            root.end();
            System.out.println("span " + root.getSpanContext().getSpanId() + " " + root.getSpanContext().getTraceId()
                    + " spiWork " + root.getSpanContext().getSpanId() + " GET_/spi true");
        }
        System.out.println("providers=" + providers + " customizers=" + customizerCount);
        Thread.sleep(Long.getLong("linger", 0));
        provider.close();
    }
}
