package otelprof.tests.otel;

import java.util.concurrent.ThreadLocalRandom;
import otelprof.ThreadContext;

/**
 * A tracer that is not OpenTelemetry, using otelprof's direct API: each "request" sets the
 * thread's context, works in a method of its own, names its endpoint, and clears. Prints
 * {@code span <spanId> <traceId> <method> <localRootSpanId> <endpoint> true} per request.
 */
public final class DirectApi {
    static volatile long sink;

    static void directWorkA() {
        sink += SpanScenarios.burn(10_000_000);
    }

    static void directWorkB() {
        sink += SpanScenarios.burn(10_000_000);
    }

    static void untracedWork() {
        sink += SpanScenarios.burn(5_000_000);
    }

    public static void main(String[] args) {
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        long end = System.nanoTime() + (long) (Double.parseDouble(System.getProperty("seconds", "4")) * 1e9);
        ThreadLocalRandom r = ThreadLocalRandom.current();
        int i = 0;
        while (System.nanoTime() < end) {
            long hi = r.nextLong(), lo = r.nextLong(), span = r.nextLong() | 1;
            boolean a = i++ % 2 == 0;
            String endpoint = a ? "direct /a" : "direct /b";
            ThreadContext.set(hi, lo, span, span, true);
            ThreadContext.setEndpoint(span, endpoint);
            if (a) {
                directWorkA();
            } else {
                directWorkB();
            }
            ThreadContext.clear();
            untracedWork();
            System.out.printf("span %016x %016x%016x %s %016x %s true%n", span, hi, lo,
                    a ? "directWorkA" : "directWorkB", span, endpoint.replace(' ', '_'));
        }
        System.out.println("done " + sink);
    }
}
