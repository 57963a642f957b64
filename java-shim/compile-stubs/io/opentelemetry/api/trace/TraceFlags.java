// Compile-only declaration (see io/opentelemetry/context/Context.java).
package io.opentelemetry.api.trace;

public interface TraceFlags {
    byte asByte();
}
