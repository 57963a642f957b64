package otelprof;

import java.lang.instrument.Instrumentation;
import otelprof.internal.Log;
import otelprof.internal.NativeBridge;
import otelprof.internal.NativeLoader;

/**
 * {@code -javaagent:otelprof.jar=<agent options>}: loads the native agent found beside the jar
 * and, when the OpenTelemetry API is on the class path, follows OpenTelemetry's context so
 * that samples carry spans. Options are those of {@code -agentpath:libotelprof.so=...}.
 */
public final class Agent {
    private Agent() {}

    private static boolean started;

    public static void premain(String args, Instrumentation inst) {
        start(args, "-javaagent");
        if (otelApiPresent(ClassLoader.getSystemClassLoader())) {
            installOtel();
        }
    }

    public static void agentmain(String args, Instrumentation inst) {
        premain(args, inst);
    }

    /**
     * Starts the native agent when otelprof is reached as a library (autoconfigure SPI or an
     * OpenTelemetry javaagent extension); options come from {@code OTELPROF_OPTIONS} or
     * {@code -Dotelprof.options}.
     */
    public static void startFromLibrary(String how) {
        String options = System.getProperty("otelprof.options", System.getenv("OTELPROF_OPTIONS"));
        start(options, how);
    }

    private static synchronized void start(String options, String how) {
        if (started) {
            return;
        }
        started = true;
        try {
            String problem = NativeLoader.load();
            if (problem == null) {
                problem = NativeBridge.start(options);
            }
            if (problem != null) {
                Log.warn(problem);
            } else {
                Log.debug("native agent running (" + how + ")");
            }
        } catch (Throwable e) {
            Log.warn("cannot start (" + how + "): " + e + "; the application continues without profiling");
        }
    }

    static boolean otelApiPresent(ClassLoader loader) {
        try {
            Class.forName("io.opentelemetry.context.ContextStorage", false, loader);
            Class.forName("io.opentelemetry.api.trace.Span", false, loader);
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    private static void installOtel() {
        try {
            otelprof.otel.OtelIntegration.install();
        } catch (Throwable e) {
            Log.warn("cannot follow OpenTelemetry context: " + e);
        }
    }
}
