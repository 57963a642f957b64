package otelprof.tests.otel;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.ContextKey;
import io.opentelemetry.context.ContextStorage;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The behaviour of context storage that applications rely on, checked step by step: run with
 * and without otelprof, the output must be the same (otelprof keeps the context itself when
 * the storage below it is OpenTelemetry's default, so it must behave exactly like it).
 * Prints one {@code ok <step>} or {@code FAIL <step>} line per check, then which storage is
 * in use.
 */
public final class StorageSemantics {
    private static int failures;

    private static void check(String step, boolean ok) {
        System.out.println((ok ? "ok " : "FAIL ") + step);
        if (!ok) {
            failures++;
        }
    }

    public static void main(String[] args) throws Exception {
        Tracer tracer = SdkTracerProvider.builder().build().get("semantics");
        ContextKey<String> key = ContextKey.named("key");
        Span a = tracer.spanBuilder("a").startSpan();
        Span b = tracer.spanBuilder("b").startSpan();

        check("starts at root", Context.current() == Context.root());
        Scope sa = a.makeCurrent();
        check("attach a", Span.current() == a);
        Scope same = Context.current().makeCurrent();
        same.close();
        check("attaching the current context is a no-op", Span.current() == a);
        Scope nul = ContextStorage.get().attach(null);
        nul.close();
        check("attaching null is a no-op", Span.current() == a);

        Scope keyed = Context.current().with(key, "v").makeCurrent();
        check("same span, new value", Span.current() == a && "v".equals(Context.current().get(key)));
        Scope sb = b.makeCurrent();
        check("attach b over it", Span.current() == b && "v".equals(Context.current().get(key)));
        keyed.close();
        check("a scope closed out of order is ignored", Span.current() == b && "v".equals(Context.current().get(key)));
        sb.close();
        check("closing b restores a with the value", Span.current() == a && "v".equals(Context.current().get(key)));
        sb.close();
        check("closing b twice is ignored", Span.current() == a && "v".equals(Context.current().get(key)));
        keyed.close();
        check("closing the value's scope restores a without it", Span.current() == a && Context.current().get(key) == null);

        AtomicReference<Span> seen = new AtomicReference<>();
        Thread other = new Thread(() -> seen.set(Span.current()));
        other.start();
        other.join();
        check("another thread does not see it", seen.get() == Span.getInvalid());

        ExecutorService pool = Executors.newSingleThreadExecutor();
        pool.submit(Context.current().wrap(() -> seen.set(Span.current()))).get();
        check("wrapped work sees it on the pool", seen.get() == a);
        pool.submit(() -> seen.set(Span.current())).get();
        check("the pool thread is back at root afterwards", seen.get() == Span.getInvalid());
        ExecutorService wrapping = Context.taskWrapping(pool);
        wrapping.submit(() -> seen.set(Span.current())).get();
        check("taskWrapping carries it", seen.get() == a);
        pool.shutdown();

        sa.close();
        check("closing a returns to root", Context.current() == Context.root() && Span.current() == Span.getInvalid());
        sa.close();
        check("closing a twice is ignored", Context.current() == Context.root());

        // Interleaved scopes across two contexts on one thread, closed in order.
        try (Scope x = a.makeCurrent()) {
            try (Scope y = b.makeCurrent()) {
                try (Scope z = Context.root().makeCurrent()) {
                    check("root attached inside spans", Span.current() == Span.getInvalid());
                }
                check("b after root's scope", Span.current() == b);
            }
            check("a after b's scope", Span.current() == a);
        }
        check("root at the end", Context.current() == Context.root());

        // Deep nesting (past otelprof's kept chain of 32 scopes), closed last-in first-out:
        // every level comes back.
        int depth = 100;
        Scope[] scopes = new Scope[depth];
        Context[] contexts = new Context[depth];
        for (int i = 0; i < depth; i++) {
            Context c = Context.current().with(i % 3 == 2 ? a : b).with(key, "d" + i);
            contexts[i] = c;
            scopes[i] = c.makeCurrent();
        }
        boolean levels = true;
        for (int i = depth - 1; i >= 0; i--) {
            levels &= Context.current() == contexts[i];
            scopes[i].close();
        }
        check("100 nested scopes restore every level", levels && Context.current() == Context.root());

        // The same context attached again above another: closing the lower scope first
        // restores what was below it (the current context is the one it attached).
        Scope l1 = a.makeCurrent();
        Context ca = Context.current();
        Scope l2 = b.makeCurrent();
        Scope l3 = ca.makeCurrent();
        l1.close();
        check("lower scope of the current context restores below it", Context.current() == Context.root());
        l3.close();
        l2.close();
        check("then the upper scopes are ignored", Context.current() == Context.root());

        String storage = ContextStorage.get().getClass().getName();
        String owns = "n/a";
        try {
            owns = String.valueOf(ContextStorage.get().getClass().getMethod("ownsContext").invoke(ContextStorage.get()));
        } catch (NoSuchMethodException e) {
            // not otelprof's storage
        }
        System.out.println("storage=" + storage + " owns=" + owns + " failures=" + failures);
    }
}
