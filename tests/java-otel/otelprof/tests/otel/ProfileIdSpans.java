package otelprof.tests.otel;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Requests as a traced service makes them, for Grafana's traces-to-profiles: each a local root
 * span (no parent, or a remote parent as from an incoming traceparent) with its own work, a
 * child, a grandchild, and a child on a pool thread, every span working in a method of its
 * own. The SDK is set up as autoconfigure does (the SPI's customizers, which add otelprof's
 * span processor), plus an exporter that keeps what it is given: the spans as a tracing
 * backend would receive them.
 *
 * <p>Prints {@code work <method> <spanId>} for each span's work and, once the provider is shut
 * down, {@code span <spanId> <traceId> <parentSpanId|-> <remote 0|1> <pyroscope.profile.id|->}
 * for every exported span. Usage: {@code ProfileIdSpans} ({@code -Dseconds=}, default 4).
 */
public final class ProfileIdSpans {
    static volatile long sink;
    static final double SECONDS = Double.parseDouble(System.getProperty("seconds", "4"));
    static final AttributeKey<String> PROFILE_ID = AttributeKey.stringKey("pyroscope.profile.id");

    static final List<SpanData> EXPORTED = Collections.synchronizedList(new ArrayList<>());

    static final SpanExporter KEEPER = new SpanExporter() {
        @Override
        public CompletableResultCode export(Collection<SpanData> spans) {
            EXPORTED.addAll(spans);
            return CompletableResultCode.ofSuccess();
        }

        @Override
        public CompletableResultCode flush() {
            return CompletableResultCode.ofSuccess();
        }

        @Override
        public CompletableResultCode shutdown() {
            return CompletableResultCode.ofSuccess();
        }
    };

    static synchronized void work(String method, Span span) {
        System.out.println("work " + method + " " + span.getSpanContext().getSpanId());
    }

    static void rootWork() {
        sink += SpanScenarios.burn(4_000_000);
    }

    static void dbWork() {
        sink += SpanScenarios.burn(4_000_000);
    }

    static void rowWork() {
        sink += SpanScenarios.burn(4_000_000);
    }

    static void renderWork() {
        sink += SpanScenarios.burn(4_000_000);
    }

    /** A span of {@code tracer} under the current one, working in {@code body}. */
    static void child(Tracer tracer, String name, String method, Runnable body) {
        Span span = tracer.spanBuilder(name).startSpan();
        try (Scope s = span.makeCurrent()) {
            body.run();
            work(method, span);
        } finally {
            span.end();
        }
    }

    static String hex(int digits) {
        StringBuilder b = new StringBuilder();
        while (b.length() < digits) {
            b.append(String.format("%016x", ThreadLocalRandom.current().nextLong() | 1));
        }
        return b.substring(0, digits);
    }

    static void request(Tracer tracer, ExecutorService pool, boolean remoteParent) throws Exception {
        Context parent = Context.root();
        if (remoteParent) {
            SpanContext remote = SpanContext.createFromRemoteParent(hex(32), hex(16), TraceFlags.getSampled(),
                    TraceState.getDefault());
            parent = parent.with(Span.wrap(remote));
        }
        Span root = tracer.spanBuilder(remoteParent ? "GET /remote" : "GET /orders/{id}").setParent(parent)
                .setSpanKind(SpanKind.SERVER).startSpan();
        try (Scope s = root.makeCurrent()) {
            rootWork();
            work("rootWork", root);
            child(tracer, "db", "dbWork", () -> {
                dbWork();
                child(tracer, "db.row", "rowWork", ProfileIdSpans::rowWork);
            });
            pool.submit(Context.current().wrap(() -> child(tracer, "render", "renderWork",
                    ProfileIdSpans::renderWork))).get();
        } finally {
            root.end();
        }
    }

    public static void main(String[] args) throws Exception {
        SdkTracerProvider provider = SpiCheck.autoconfigured(SdkTracerProvider.builder())
                .addSpanProcessor(SimpleSpanProcessor.create(KEEPER)).build();
        Tracer tracer = provider.get("otelprof-tests");
        ExecutorService pool = Executors.newFixedThreadPool(2, r -> new Thread(r, "render-pool"));
        long end = System.nanoTime() + (long) (SECONDS * 1e9);
        for (int i = 0; System.nanoTime() < end; i++) {
            request(tracer, pool, i % 3 == 2);
        }
        pool.shutdown();
        provider.shutdown().join(10, java.util.concurrent.TimeUnit.SECONDS);
        synchronized (EXPORTED) {
            for (SpanData d : EXPORTED) {
                SpanContext p = d.getParentSpanContext();
                String profileId = d.getAttributes().get(PROFILE_ID);
                System.out.println("span " + d.getSpanId() + " " + d.getTraceId() + " "
                        + (p.isValid() ? p.getSpanId() : "-") + " " + (p.isRemote() ? 1 : 0) + " "
                        + (profileId == null ? "-" : profileId));
            }
        }
        System.out.println("providers=" + SpiCheck.providers + " customizers=" + SpiCheck.customizerCount);
    }
}
