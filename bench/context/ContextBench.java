import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.SdkTracerProviderBuilder;
import io.opentelemetry.sdk.trace.SpanProcessor;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.management.ManagementFactory;

/**
 * Hand-rolled microbenchmarks of otelprof's context write path (run by bench/context.py, which
 * forks a fresh JVM per measurement and compares configurations in the same run).
 *
 * <p>Modes:
 * <ul>
 *   <li>{@code direct}: ns per {@code ThreadContext.set(...)} + {@code clear()} pair, minus the
 *       same loop without the calls ({@code direct-baseline}).
 *   <li>{@code activate}: ns per {@code span.makeCurrent()} + {@code scope.close()} pair; run
 *       with and without otelprof's context-storage wrapper.
 *   <li>{@code newspan}: ns per child span started, made current, closed and ended; run with
 *       and without the wrapper (the difference is the wrapper's cost for a new span).
 *   <li>{@code spans}: a span-heavy service loop (root span, two child activations, a little
 *       work each); after a warm-up (the third argument, in requests; JIT compilation of the
 *       SDK's and otelprof's code is over by then), prints the CPU time of the measured
 *       requests, activations per second and a checksum.
 * </ul>
 * With {@code -Dbench.otelprofProcessor=true} the SDK also has otelprof's span processor, as
 * the autoconfigure SPI and the OpenTelemetry javaagent set it up (it names local roots' ends
 * and sets {@code pyroscope.profile.id} on them at start).
 *
 * <p>Output: one line {@code result <mode> <value> <unit>}.
 */
public final class ContextBench {
    static volatile long sink;

    // The direct API is called through a MethodHandle found at run time, so this file compiles
    // without otelprof.jar; the handle is a constant and inlines like a direct call.
    static final MethodHandle SET;
    static final MethodHandle CLEAR;
    static final MethodHandle HANDLE;
    static final MethodHandle HANDLE_SET;
    static final MethodHandle HANDLE_CLEAR;

    /** The tracer of the span modes: a plain SDK, plus otelprof's span processor if asked. */
    static Tracer tracer() {
        SdkTracerProviderBuilder b = SdkTracerProvider.builder();
        if (Boolean.getBoolean("bench.otelprofProcessor")) {
            try {
                Object p = Class.forName("otelprof.otel.EndpointSpanProcessor").getConstructor().newInstance();
                b.addSpanProcessor((SpanProcessor) p);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("otelprof's span processor is not on the class path", e);
            }
        }
        return b.build().get("bench");
    }

    static {
        MethodHandle set = null, clear = null, handle = null, hset = null, hclear = null;
        try {
            Class<?> c = Class.forName("otelprof.ThreadContext");
            Class<?> h = Class.forName("otelprof.ThreadContext$Handle");
            MethodHandles.Lookup l = MethodHandles.publicLookup();
            MethodType setType = MethodType.methodType(void.class, long.class, long.class, long.class, long.class, boolean.class);
            set = l.findStatic(c, "set", setType);
            clear = l.findStatic(c, "clear", MethodType.methodType(void.class));
            handle = l.findStatic(c, "handle", MethodType.methodType(h)).asType(MethodType.methodType(Object.class));
            hset = l.findVirtual(h, "set", setType).asType(setType.insertParameterTypes(0, Object.class));
            hclear = l.findVirtual(h, "clear", MethodType.methodType(void.class)).asType(MethodType.methodType(void.class, Object.class));
        } catch (ReflectiveOperationException e) {
            // direct modes unavailable without otelprof.jar on the class path
        }
        SET = set;
        CLEAR = clear;
        HANDLE = handle;
        HANDLE_SET = hset;
        HANDLE_CLEAR = hclear;
    }

    static double handle(long iterations) throws Throwable {
        Object h = (Object) HANDLE.invokeExact();
        long x = 0;
        long start = System.nanoTime();
        for (long i = 0; i < iterations; i++) {
            HANDLE_SET.invokeExact(h, 0x0af7651916cd43ddL, i, i | 1, 0xb7ad6b7169203331L, true);
            HANDLE_CLEAR.invokeExact(h);
            x += i;
        }
        long ns = System.nanoTime() - start;
        sink += x;
        return (double) ns / iterations;
    }

    static double direct(long iterations, boolean calls) throws Throwable {
        long x = 0;
        long start = System.nanoTime();
        for (long i = 0; i < iterations; i++) {
            if (calls) {
                SET.invokeExact(0x0af7651916cd43ddL, i, i | 1, 0xb7ad6b7169203331L, true);
                CLEAR.invokeExact();
            }
            x += i;
        }
        long ns = System.nanoTime() - start;
        sink += x;
        return (double) ns / iterations;
    }

    static double activate(Span span, long iterations) {
        long start = System.nanoTime();
        for (long i = 0; i < iterations; i++) {
            try (Scope s = span.makeCurrent()) {
                sink++;
            }
        }
        return (double) (System.nanoTime() - start) / iterations;
    }

    /** A new child span per activation (the common case in real services). */
    static double newSpans(Tracer tracer, Span parent, long iterations) {
        long start = System.nanoTime();
        try (Scope p = parent.makeCurrent()) {
            for (long i = 0; i < iterations; i++) {
                Span child = tracer.spanBuilder("child").startSpan();
                try (Scope s = child.makeCurrent()) {
                    sink++;
                } finally {
                    child.end();
                }
            }
        }
        return (double) (System.nanoTime() - start) / iterations;
    }

    static long work(int n) {
        long x = 0;
        for (int i = 0; i < n; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    /**
     * One request of the span-heavy loop: a root span and two children, each made current
     * once (3 activations). A method of its own, as a service's request handler is, so that
     * the JIT compiles it as such rather than as part of one on-stack-replaced loop.
     */
    static long request(Tracer tracer, int rootWork, int childWork) {
        long x = 0;
        Span root = tracer.spanBuilder("GET /bench").startSpan();
        try (Scope r = root.makeCurrent()) {
            x += work(rootWork);
            for (int c = 0; c < 2; c++) {
                Span child = tracer.spanBuilder("child").startSpan();
                try (Scope s = child.makeCurrent()) {
                    x += work(childWork);
                } finally {
                    child.end();
                }
            }
        } finally {
            root.end();
        }
        return x;
    }

    public static void main(String[] args) throws Throwable {
        String mode = args[0];
        long iterations = Long.parseLong(args[1]);
        int warmups = Integer.parseInt(args.length > 2 ? args[2] : "5");
        switch (mode) {
            case "direct", "direct-baseline" -> {
                boolean calls = mode.equals("direct");
                if (calls && SET == null) {
                    throw new IllegalStateException("otelprof.ThreadContext not on the class path");
                }
                for (int w = 0; w < warmups; w++) {
                    direct(iterations, calls);
                }
                System.out.printf("result %s %.3f ns/op%n", mode, direct(iterations, calls));
            }
            case "direct-handle" -> {
                for (int w = 0; w < warmups; w++) {
                    handle(iterations);
                }
                System.out.printf("result %s %.3f ns/op%n", mode, handle(iterations));
            }
            case "activate" -> {
                Tracer tracer = tracer();
                Span span = tracer.spanBuilder("bench").startSpan();
                for (int w = 0; w < warmups; w++) {
                    activate(span, iterations);
                }
                System.out.printf("result activate %.3f ns/op%n", activate(span, iterations));
                span.end();
            }
            case "newspan" -> {
                Tracer tracer = tracer();
                Span parent = tracer.spanBuilder("root").startSpan();
                for (int w = 0; w < warmups; w++) {
                    newSpans(tracer, parent, iterations);
                }
                System.out.printf("result newspan %.3f ns/op%n", newSpans(tracer, parent, iterations));
            }
            case "spans" -> {
                // iterations = number of measured requests, after `warm` warm-up requests.
                // Each request: a root span and two children, each made current once: 3
                // activations (and 3 scope closes) per request.
                long warm = args.length > 2 ? Long.parseLong(args[2]) : iterations / 3;
                Tracer tracer = tracer();
                // Work per activation, in loop iterations: sized so that the loop makes about
                // 150k activations per second on one core, a span-heavy service.
                int rootWork = Integer.getInteger("rootWork", 5000);
                int childWork = Integer.getInteger("childWork", 7000);
                long x = 0;
                for (long i = 0; i < warm; i++) {
                    x += request(tracer, rootWork, childWork);
                }
                long cpu0 = ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
                long window0 = System.currentTimeMillis();
                long t0 = System.nanoTime();
                for (long i = 0; i < iterations; i++) {
                    x += request(tracer, rootWork, childWork);
                }
                double seconds = (System.nanoTime() - t0) / 1e9;
                long cpu = ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime() - cpu0;
                sink += x;
                System.out.printf("result spans %.6f cpu_s%n", cpu / 1e9);
                System.out.printf("activations_per_s %.0f%n", 3 * iterations / seconds);
                System.out.println("checksum " + (x & 0xffff));
                // Wall-clock bounds of the measured part, so that a harness running two forks
                // at once can check that their measurements overlapped.
                System.out.println("window_ms " + window0 + " " + System.currentTimeMillis());
            }
            default -> throw new IllegalArgumentException(mode);
        }
    }
}
