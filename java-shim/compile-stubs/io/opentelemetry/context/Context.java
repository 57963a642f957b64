// Compile-only declaration of the OpenTelemetry API type the shim uses (signatures as in
// OpenTelemetry Java 1.x). Never packaged: at run time the application's real classes are used.
package io.opentelemetry.context;

public interface Context {
    static Context current() {
        throw new UnsupportedOperationException("compile-only stub");
    }

    default Scope makeCurrent() {
        throw new UnsupportedOperationException("compile-only stub");
    }
}
