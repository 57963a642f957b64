package otelprof.demo;

import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The HTTP server metric of the OpenTelemetry semantic conventions,
 * {@code http.server.request.duration} (a histogram in seconds per {@code http.request.method}
 * and {@code http.route}), exported as OTLP/HTTP protobuf, encoded by hand so that the demo
 * needs nothing but the JDK. Its counts tell otelprof how many requests each endpoint served,
 * which turns CPU shares into CPU per request.
 */
final class OtlpMetrics {
    static final double[] BOUNDS = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};

    static final class Route {
        final String method, route;
        final AtomicLongArray buckets = new AtomicLongArray(BOUNDS.length + 1);
        final java.util.concurrent.atomic.DoubleAdder sum = new java.util.concurrent.atomic.DoubleAdder();

        Route(String method, String route) {
            this.method = method;
            this.route = route;
        }

        void record(double seconds) {
            int i = 0;
            while (i < BOUNDS.length && seconds > BOUNDS[i]) {
                i++;
            }
            buckets.incrementAndGet(i);
            sum.add(seconds);
        }

        long count() {
            long n = 0;
            for (int i = 0; i < buckets.length(); i++) {
                n += buckets.get(i);
            }
            return n;
        }
    }

    final Map<String, Route> routes = new LinkedHashMap<>();
    private final long startNanos = System.currentTimeMillis() * 1_000_000L;
    private final String url;
    private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    OtlpMetrics(String url) {
        this.url = url;
    }

    synchronized Route route(String method, String route) {
        return routes.computeIfAbsent(method + " " + route, k -> new Route(method, route));
    }

    /** Sends the cumulative histograms; a failure is reported and otherwise ignored. */
    void export() {
        if (url == null || url.isEmpty()) {
            return;
        }
        try {
            HttpRequest request = HttpRequest.newBuilder(URI.create(url))
                    .timeout(Duration.ofSeconds(5))
                    .header("Content-Type", "application/x-protobuf")
                    .POST(HttpRequest.BodyPublishers.ofByteArray(encode()))
                    .build();
            HttpResponse<byte[]> response = client.send(request, HttpResponse.BodyHandlers.ofByteArray());
            if (response.statusCode() != 200) {
                System.err.println("shop: metrics export got HTTP " + response.statusCode());
            }
        } catch (Exception e) {
            System.err.println("shop: metrics export failed: " + e);
        }
    }

    // --- protobuf, the few wire types OTLP needs ---

    private static void varint(ByteArrayOutputStream out, long v) {
        while ((v & ~0x7fL) != 0) {
            out.write((int) ((v & 0x7f) | 0x80));
            v >>>= 7;
        }
        out.write((int) v);
    }

    private static void tag(ByteArrayOutputStream out, int field, int wire) {
        varint(out, ((long) field << 3) | wire);
    }

    private static void bytes(ByteArrayOutputStream out, int field, byte[] b) {
        tag(out, field, 2);
        varint(out, b.length);
        out.write(b, 0, b.length);
    }

    private static void string(ByteArrayOutputStream out, int field, String s) {
        bytes(out, field, s.getBytes(StandardCharsets.UTF_8));
    }

    private static void fixed64(ByteArrayOutputStream out, int field, long v) {
        tag(out, field, 1);
        for (int i = 0; i < 8; i++) {
            out.write((int) (v >>> (8 * i)));
        }
    }

    private static byte[] keyValue(String key, String value) {
        ByteArrayOutputStream any = new ByteArrayOutputStream();
        string(any, 1, value); // AnyValue.string_value
        ByteArrayOutputStream kv = new ByteArrayOutputStream();
        string(kv, 1, key);
        bytes(kv, 2, any.toByteArray());
        return kv.toByteArray();
    }

    static Map<String, String> resourceAttributes() {
        Map<String, String> attrs = new LinkedHashMap<>();
        String raw = System.getenv("OTEL_RESOURCE_ATTRIBUTES");
        if (raw != null) {
            for (String entry : raw.split(",")) {
                int eq = entry.indexOf('=');
                if (eq > 0) {
                    attrs.put(entry.substring(0, eq).trim(), entry.substring(eq + 1).trim());
                }
            }
        }
        String service = System.getenv("OTEL_SERVICE_NAME");
        if (service != null && !service.isEmpty()) {
            attrs.put("service.name", service);
        }
        return attrs;
    }

    synchronized byte[] encode() {
        long now = System.currentTimeMillis() * 1_000_000L;
        ByteArrayOutputStream histogram = new ByteArrayOutputStream();
        for (Route r : routes.values()) {
            ByteArrayOutputStream point = new ByteArrayOutputStream();
            fixed64(point, 2, startNanos); // start_time_unix_nano
            fixed64(point, 3, now); // time_unix_nano
            long[] counts = new long[r.buckets.length()];
            long total = 0;
            for (int i = 0; i < counts.length; i++) {
                counts[i] = r.buckets.get(i);
                total += counts[i];
            }
            fixed64(point, 4, total); // count
            tag(point, 5, 1); // sum (double)
            long sumBits = Double.doubleToLongBits(r.sum.sum());
            for (int i = 0; i < 8; i++) {
                point.write((int) (sumBits >>> (8 * i)));
            }
            ByteArrayOutputStream packed = new ByteArrayOutputStream();
            for (long c : counts) {
                for (int i = 0; i < 8; i++) {
                    packed.write((int) (c >>> (8 * i)));
                }
            }
            bytes(point, 6, packed.toByteArray()); // bucket_counts
            packed.reset();
            for (double b : BOUNDS) {
                long bits = Double.doubleToLongBits(b);
                for (int i = 0; i < 8; i++) {
                    packed.write((int) (bits >>> (8 * i)));
                }
            }
            bytes(point, 7, packed.toByteArray()); // explicit_bounds
            bytes(point, 9, keyValue("http.request.method", r.method));
            bytes(point, 9, keyValue("http.route", r.route));
            bytes(histogram, 1, point.toByteArray()); // data_points
        }
        tag(histogram, 2, 0);
        varint(histogram, 2); // AGGREGATION_TEMPORALITY_CUMULATIVE

        ByteArrayOutputStream metric = new ByteArrayOutputStream();
        string(metric, 1, "http.server.request.duration");
        string(metric, 2, "Duration of HTTP server requests.");
        string(metric, 3, "s");
        bytes(metric, 9, histogram.toByteArray());

        ByteArrayOutputStream scope = new ByteArrayOutputStream();
        string(scope, 1, "otelprof.demo");
        ByteArrayOutputStream scopeMetrics = new ByteArrayOutputStream();
        bytes(scopeMetrics, 1, scope.toByteArray());
        bytes(scopeMetrics, 2, metric.toByteArray());

        ByteArrayOutputStream resource = new ByteArrayOutputStream();
        for (Map.Entry<String, String> e : resourceAttributes().entrySet()) {
            bytes(resource, 1, keyValue(e.getKey(), e.getValue()));
        }
        ByteArrayOutputStream resourceMetrics = new ByteArrayOutputStream();
        bytes(resourceMetrics, 1, resource.toByteArray());
        bytes(resourceMetrics, 2, scopeMetrics.toByteArray());

        ByteArrayOutputStream request = new ByteArrayOutputStream();
        bytes(request, 1, resourceMetrics.toByteArray());
        return request.toByteArray();
    }
}
