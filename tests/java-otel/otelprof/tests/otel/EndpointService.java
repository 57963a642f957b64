package otelprof.tests.otel;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.DoubleHistogram;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.opentelemetry.exporter.otlp.http.metrics.OtlpHttpMetricExporter;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.export.PeriodicMetricReader;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A service whose regression is confined to one endpoint, for the diff-by-endpoint test. Each
 * request is a server span of the real OpenTelemetry SDK named after its endpoint (otelprof
 * follows it as the samples' {@code span_name}), and is counted in the semantic conventions'
 * {@code http.server.request.duration} histogram, exported over OTLP/HTTP by the SDK.
 *
 * <p>Every request runs whole units of one loop ({@link #UNIT} iterations), so its CPU is known
 * up to the unit's cost: {@code GET /home} 3 units ({@code Render.page}), {@code GET /cart} 2
 * ({@code total}, shared with checkout), {@code POST /checkout} 4 ({@code total} and
 * {@code charge}). After the switch {@code GET /cart} calls {@code total} twice: twice its CPU
 * per request, the others unchanged; {@code total}, shared with checkout, grows only under
 * cart.
 *
 * <p>Phases: warm-up, before, after. Between phases the workers stop, the metrics are flushed
 * (a cumulative point at a moment with no request in flight), and the time is printed, so a
 * time range from one printed time to the next holds exactly the CPU and the requests of its
 * phase. Prints {@code measure <unix ms>}, {@code switch <unix ms>}, {@code end <unix ms>},
 * and {@code requests <phase> <endpoint> <n>}.
 *
 * <p>Usage: {@code EndpointService <metrics url> <threads> <warm-up s> <before s> <after s>}.
 */
public final class EndpointService {
    static final int UNIT = 20_000;
    static final String[] ENDPOINTS = {"GET /home", "GET /cart", "POST /checkout"};
    static volatile boolean regressed;
    static volatile long sink;

    static long unit(long x) {
        for (int i = 0; i < UNIT; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    static long page(long x) {
        for (int i = 0; i < 3; i++) {
            x = unit(x);
        }
        return x;
    }

    /** Prices a basket: shared by cart and checkout. */
    static long total(long x) {
        return unit(unit(x));
    }

    static long charge(long x) {
        return unit(unit(x));
    }

    static long handle(int endpoint, long x) {
        switch (endpoint) {
            case 0:
                return page(x);
            case 1:
                x = total(x);
                return regressed ? total(x) : x;
            default:
                return charge(total(x));
        }
    }

    static final AttributeKey<String> METHOD = AttributeKey.stringKey("http.request.method");
    static final AttributeKey<String> ROUTE = AttributeKey.stringKey("http.route");

    static void run(Tracer tracer, DoubleHistogram duration, AtomicLongArray counts, long deadline, long seed) {
        Random random = new Random(seed);
        int[] round = {0, 1, 2};
        long x = seed;
        while (System.nanoTime() < deadline) {
            for (int i = round.length - 1; i > 0; i--) {
                int j = random.nextInt(i + 1);
                int t = round[i];
                round[i] = round[j];
                round[j] = t;
            }
            for (int e : round) {
                long start = System.nanoTime();
                Span span = tracer.spanBuilder(ENDPOINTS[e]).setSpanKind(SpanKind.SERVER).startSpan();
                try (Scope scope = span.makeCurrent()) {
                    x = handle(e, x);
                } finally {
                    span.end();
                }
                String[] parts = ENDPOINTS[e].split(" ");
                duration.record((System.nanoTime() - start) / 1e9, Attributes.of(METHOD, parts[0], ROUTE, parts[1]));
                counts.incrementAndGet(e);
            }
        }
        sink += x;
    }

    static void phase(String name, int threads, double seconds, Tracer tracer, DoubleHistogram duration,
            SdkMeterProvider meters) throws Exception {
        AtomicLongArray counts = new AtomicLongArray(ENDPOINTS.length);
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final long seed = 7 + t;
            workers[t] = new Thread(() -> run(tracer, duration, counts, deadline, seed), "worker-" + t);
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        // A flush fails when the periodic export is running at that moment: try again.
        boolean flushed = false;
        for (int attempt = 0; attempt < 50 && !flushed; attempt++) {
            flushed = meters.forceFlush().join(10, TimeUnit.SECONDS).isSuccess();
            if (!flushed) {
                Thread.sleep(100);
            }
        }
        if (!flushed) {
            throw new IllegalStateException("the metrics were not exported");
        }
        for (int e = 0; e < ENDPOINTS.length; e++) {
            System.out.println("requests " + name + " " + ENDPOINTS[e].replace(' ', '_') + " " + counts.get(e));
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        int threads = Integer.parseInt(args[1]);
        Resource resource = Resource.getDefault().merge(Resource.create(Attributes.of(
                AttributeKey.stringKey("service.name"), System.getenv().getOrDefault("OTEL_SERVICE_NAME", "shop"))));
        SdkMeterProvider meters = SdkMeterProvider.builder()
                .setResource(resource)
                .registerMetricReader(PeriodicMetricReader.builder(OtlpHttpMetricExporter.builder().setEndpoint(url).build())
                        .setInterval(Duration.ofSeconds(1))
                        .build())
                .build();
        DoubleHistogram duration = meters.get("otelprof-tests").histogramBuilder("http.server.request.duration")
                .setUnit("s")
                .build();
        SdkTracerProvider traces = SdkTracerProvider.builder().setResource(resource).build();
        Tracer tracer = traces.get("otelprof-tests");

        phase("warmup", threads, Double.parseDouble(args[2]), tracer, duration, meters);
        System.out.println("measure " + System.currentTimeMillis());
        phase("before", threads, Double.parseDouble(args[3]), tracer, duration, meters);
        System.out.println("switch " + System.currentTimeMillis());
        regressed = true;
        phase("after", threads, Double.parseDouble(args[4]), tracer, duration, meters);
        System.out.println("end " + System.currentTimeMillis());
        meters.shutdown().join(10, TimeUnit.SECONDS);
        traces.shutdown().join(10, TimeUnit.SECONDS);
    }
}
