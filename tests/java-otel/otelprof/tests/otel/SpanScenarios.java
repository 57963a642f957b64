package otelprof.tests.otel;

import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.LinkData;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import io.opentelemetry.sdk.trace.samplers.SamplingResult;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Span workloads where every span does its CPU work in a method of its own, so a profile can
 * be checked sample by sample: a sample carrying span S must be in S's method (precision), and
 * a sample in a span's method must carry that span (recall).
 *
 * <p>The SDK is built by hand (no autoconfigure, no javaagent), as many applications do. For
 * every span whose work is checked it prints one line:
 * {@code span <spanId> <traceId> <method> <localRootSpanId> <endpoint> <sampled>}.
 *
 * <p>Usage: {@code SpanScenarios <scenario>... } with scenarios sequential, nested, executor,
 * endpoints, virtual, unsampled; each runs for about {@code -Dseconds=} (default 4) seconds.
 */
public final class SpanScenarios {
    static volatile long sink;
    static final double SECONDS = Double.parseDouble(System.getProperty("seconds", "4"));

    /** Samples everything except traces whose root is named "unsampled": recorded, not sampled. */
    static final Sampler SAMPLER = new Sampler() {
        @Override
        public SamplingResult shouldSample(Context parent, String traceId, String name, SpanKind kind,
                Attributes attributes, List<LinkData> links) {
            Span parentSpan = Span.fromContext(parent);
            if (parentSpan.getSpanContext().isValid()) {
                return parentSpan.getSpanContext().isSampled() ? SamplingResult.recordAndSample()
                        : SamplingResult.recordOnly();
            }
            return name.startsWith("unsampled") ? SamplingResult.recordOnly() : SamplingResult.recordAndSample();
        }

        @Override
        public String getDescription() {
            return "otelprof-test";
        }
    };

    static final SdkTracerProvider PROVIDER = SdkTracerProvider.builder().setSampler(SAMPLER).build();
    static final Tracer TRACER = PROVIDER.get("otelprof-tests");

    static long burn(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 500; i++) {
                x = x * 31 + i;
            }
        }
        return x;
    }

    static synchronized void report(Span span, String method, Span localRoot, String endpoint) {
        System.out.println("span " + span.getSpanContext().getSpanId() + " " + span.getSpanContext().getTraceId()
                + " " + method + " " + localRoot.getSpanContext().getSpanId() + " " + endpoint.replace(' ', '_')
                + " " + span.getSpanContext().isSampled());
    }

    static long deadline() {
        return System.nanoTime() + (long) (SECONDS * 1e9);
    }

    // ---- (a) sequential spans on one thread ----
    static void seqOne() {
        sink += burn(15_000_000);
    }

    static void seqTwo() {
        sink += burn(15_000_000);
    }

    static void seqThree() {
        sink += burn(15_000_000);
    }

    static void sequential() {
        long end = deadline();
        int i = 0;
        while (System.nanoTime() < end) {
            String name = "seq-" + (i % 3);
            Span span = TRACER.spanBuilder(name).startSpan();
            try (Scope s = span.makeCurrent()) {
                switch (i % 3) {
                    case 0 -> seqOne();
                    case 1 -> seqTwo();
                    default -> seqThree();
                }
                report(span, i % 3 == 0 ? "seqOne" : i % 3 == 1 ? "seqTwo" : "seqThree", span, name);
            } finally {
                span.end();
            }
            i++;
        }
    }

    // ---- (b) nested spans ----
    static void nestedParentBefore() {
        sink += burn(10_000_000);
    }

    static void nestedChild() {
        sink += burn(20_000_000);
    }

    static void nestedParentAfter() {
        sink += burn(10_000_000);
    }

    static void nested() {
        long end = deadline();
        while (System.nanoTime() < end) {
            Span root = TRACER.spanBuilder("nested").startSpan();
            try (Scope s = root.makeCurrent()) {
                nestedParentBefore();
                Span child = TRACER.spanBuilder("nested-child").startSpan();
                try (Scope c = child.makeCurrent()) {
                    nestedChild();
                } finally {
                    child.end();
                }
                nestedParentAfter();
                // Renamed at the end: samples taken before must still get the final name.
                root.updateName("nested /final");
                report(root, "nestedParentBefore", root, "nested /final");
                report(root, "nestedParentAfter", root, "nested /final");
                report(child, "nestedChild", root, "nested /final");
            } finally {
                root.end();
            }
        }
    }

    // ---- (c) a root span whose work runs on an executor pool via context wrapping ----
    static void poolChildWork() {
        sink += burn(8_000_000);
    }

    static void poolWrappedWork() {
        sink += burn(8_000_000);
    }

    static void executor() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(3, r -> new Thread(r, "pool-worker"));
        long end = deadline();
        while (System.nanoTime() < end) {
            Span root = TRACER.spanBuilder("pool-root").startSpan();
            List<Future<?>> futures = new ArrayList<>();
            try (Scope s = root.makeCurrent()) {
                for (int i = 0; i < 6; i++) {
                    boolean withChild = i % 2 == 0;
                    futures.add(pool.submit(Context.current().wrap(() -> {
                        if (withChild) {
                            Span child = TRACER.spanBuilder("pool-child").startSpan();
                            try (Scope c = child.makeCurrent()) {
                                poolChildWork();
                                report(child, "poolChildWork", root, "pool-root");
                            } finally {
                                child.end();
                            }
                        } else {
                            poolWrappedWork();
                        }
                    })));
                }
                for (Future<?> f : futures) {
                    f.get();
                }
                report(root, "poolWrappedWork", root, "pool-root");
            } finally {
                root.end();
            }
        }
        pool.shutdown();
    }

    // ---- (d) two endpoints interleaved on a shared pool ----
    static void endpointAWork() {
        sink += burn(5_000_000);
    }

    static void endpointBWork() {
        sink += burn(5_000_000);
    }

    static void endpoints() throws Exception {
        ExecutorService shared = Context.taskWrapping(Executors.newFixedThreadPool(2, r -> new Thread(r, "shared-worker")));
        long end = deadline();
        Runnable client = () -> {
            boolean a = Thread.currentThread().getName().endsWith("a");
            while (System.nanoTime() < end) {
                // Named "GET" first; the route is known only after some work has been done, as
                // with real HTTP instrumentation.
                Span root = TRACER.spanBuilder("GET").startSpan();
                String route = a ? "GET /a" : "GET /b";
                try (Scope s = root.makeCurrent()) {
                    List<Future<?>> fs = new ArrayList<>();
                    for (int i = 0; i < 4; i++) {
                        fs.add(shared.submit(a ? SpanScenarios::endpointAWork : SpanScenarios::endpointBWork));
                        if (i == 1) {
                            root.updateName(route);
                        }
                    }
                    for (Future<?> f : fs) {
                        f.get();
                    }
                    report(root, a ? "endpointAWork" : "endpointBWork", root, route);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                } finally {
                    root.end();
                }
            }
        };
        Thread ta = new Thread(client, "client-a");
        Thread tb = new Thread(client, "client-b");
        ta.start();
        tb.start();
        ta.join();
        tb.join();
        shared.shutdown();
    }

    // ---- (e) virtual threads ----
    static void virtualWorkOne() {
        sink += burn(3_000_000);
    }

    static void virtualWorkTwo() {
        sink += burn(3_000_000);
    }

    static void virtual() throws Exception {
        ExecutorService vts = (ExecutorService) Executors.class.getMethod("newVirtualThreadPerTaskExecutor").invoke(null);
        long end = deadline();
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 16; t++) {
            boolean one = t % 2 == 0;
            fs.add(vts.submit(() -> {
                while (System.nanoTime() < end) {
                    String name = one ? "vt-one" : "vt-two";
                    Span root = TRACER.spanBuilder(name).startSpan();
                    try (Scope s = root.makeCurrent()) {
                        for (int k = 0; k < 3; k++) {
                            if (one) {
                                virtualWorkOne();
                            } else {
                                virtualWorkTwo();
                            }
                            // Block: the virtual thread unmounts, and resumes on any carrier.
                            Thread.sleep(ThreadLocalRandom.current().nextInt(1, 3));
                        }
                        report(root, one ? "virtualWorkOne" : "virtualWorkTwo", root, name);
                    } catch (InterruptedException e) {
                        return;
                    } finally {
                        root.end();
                    }
                }
            }));
        }
        for (Future<?> f : fs) {
            f.get();
        }
        vts.shutdown();
    }

    // ---- unsampled trace: no link, but the endpoint ----
    static void unsampledWork() {
        sink += burn(15_000_000);
    }

    static void unsampled() {
        long end = deadline();
        while (System.nanoTime() < end) {
            Span root = TRACER.spanBuilder("unsampled-root").startSpan();
            try (Scope s = root.makeCurrent()) {
                unsampledWork();
                report(root, "unsampledWork", root, "unsampled-root");
            } finally {
                root.end();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        for (String scenario : args) {
            switch (scenario) {
                case "sequential" -> sequential();
                case "nested" -> nested();
                case "executor" -> executor();
                case "endpoints" -> endpoints();
                case "virtual" -> virtual();
                case "unsampled" -> unsampled();
                default -> throw new IllegalArgumentException(scenario);
            }
            System.out.println("scenario " + scenario + " done");
        }
        PROVIDER.close();
        System.out.println("done " + sink);
    }
}
