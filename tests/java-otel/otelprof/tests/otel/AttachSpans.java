package otelprof.tests.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A JVM with the real OpenTelemetry SDK that otelprof is attached to while it runs. Two
 * threads serve requests, each a span ({@code GET /work}) made current around CPU work.
 *
 * <p>With {@code late}, OpenTelemetry is not touched before the attach: the program prints
 * {@code ready} and waits for {@code goFile}, so the jar's agentmain finds the context storage
 * unused and can wrap it. With {@code early}, spans run from the start (the storage is in
 * use when otelprof arrives) and go on after {@code goFile} appears. Either way the requests
 * then run for {@code seconds}, and the program prints {@code spans <n>} and exits.
 *
 * <p>Usage: {@code AttachSpans late|early <goFile> <seconds>}
 */
public final class AttachSpans {
    static volatile long sink;
    static volatile boolean done;

    static long work(long x) {
        for (int i = 0; i < 200_000; i++) {
            x = x * 31 + i;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        boolean early = args[0].equals("early");
        Path go = Path.of(args[1]);
        long seconds = Long.parseLong(args[2]);
        if (!early) {
            System.out.println("ready");
            while (!Files.exists(go)) {
                Thread.sleep(20);
            }
        }
        SdkTracerProvider provider = SdkTracerProvider.builder().build();
        Tracer tracer = provider.get("attach-test");
        long[] spans = new long[2];
        Thread[] threads = new Thread[2];
        for (int t = 0; t < 2; t++) {
            int k = t;
            threads[t] = new Thread(() -> {
                long x = 0;
                while (!done) {
                    Span span = tracer.spanBuilder("GET /work").startSpan();
                    try (Scope ignored = span.makeCurrent()) {
                        x = work(x);
                    } finally {
                        span.end();
                    }
                    spans[k]++;
                }
                sink += x;
            }, "server-" + t);
            threads[t].start();
        }
        if (early) {
            System.out.println("ready");
            while (!Files.exists(go)) {
                Thread.sleep(20);
            }
        }
        Thread.sleep(seconds * 1000);
        done = true;
        for (Thread t : threads) {
            t.join();
        }
        provider.close();
        System.out.println("spans " + (spans[0] + spans[1]));
    }
}
