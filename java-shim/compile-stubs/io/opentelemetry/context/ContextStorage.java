// Compile-only declaration (see Context.java).
package io.opentelemetry.context;

import java.util.function.Function;

public interface ContextStorage {
    static ContextStorage get() {
        throw new UnsupportedOperationException("compile-only stub");
    }

    static void addWrapper(Function<? super ContextStorage, ? extends ContextStorage> wrapper) {
        throw new UnsupportedOperationException("compile-only stub");
    }

    Scope attach(Context toAttach);

    Context current();

    default Context root() {
        throw new UnsupportedOperationException("compile-only stub");
    }
}
