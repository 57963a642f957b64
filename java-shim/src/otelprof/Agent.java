package otelprof;

import java.lang.instrument.Instrumentation;
import otelprof.internal.Log;
import otelprof.internal.NativeBridge;
import otelprof.internal.NativeLoader;
import otelprof.internal.ReplyFile;

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

    /**
     * Loaded into a running JVM after the native agent was started there ({@code otelprof attach
     * PID start} sends {@code load instrument false <jar>=reply=<file>} next): finds the native
     * agent, installs OpenTelemetry context tracking when the OpenTelemetry API is present and
     * its context storage can still be wrapped, and writes a reply saying what is covered and
     * what is not (docs/attach.md). It never starts the native agent itself.
     */
    public static void agentmain(String args, Instrumentation inst) {
        ReplyFile.Reply reply;
        String path = null;
        try {
            path = ReplyFile.replyPath(args);
            String problem = ReplyFile.argumentProblem(args);
            reply = problem != null ? ReplyFile.Reply.error(problem) : attachContext();
        } catch (Throwable e) {
            reply = ReplyFile.Reply.error("internal error: " + e);
        }
        ReplyFile.deliver(reply, path);
    }

    private static ReplyFile.Reply attachContext() {
        String problem = NativeLoader.load();
        if (problem != null) {
            return ReplyFile.Reply.error("the native agent is not loaded: " + problem);
        }
        if (!NativeBridge.active()) {
            return ReplyFile.Reply.error("the native agent is not running: start it first (otelprof attach PID start)");
        }
        if (!otelApiPresent(ClassLoader.getSystemClassLoader())) {
            return ReplyFile.Reply.ok()
                    .with("context", "none: no OpenTelemetry API on the system class path")
                    .with("note", "samples carry spans only through otelprof.ThreadContext calls"
                            + " (an application whose OpenTelemetry is in another class loader is not followed)");
        }
        try {
            return otelprof.otel.OtelIntegration.installAtAttach();
        } catch (Throwable e) {
            return ReplyFile.Reply.error("cannot follow OpenTelemetry context: " + e);
        }
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
