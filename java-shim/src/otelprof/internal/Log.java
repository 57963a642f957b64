package otelprof.internal;

/** One-line messages on stderr, prefixed like the native agent's. */
public final class Log {
    private Log() {}

    private static final boolean DEBUG = "debug".equals(System.getProperty("otelprof.log"))
            || String.valueOf(System.getenv("OTELPROF_LOG")).equals("debug");

    public static void warn(String message) {
        System.err.println("otelprof: " + message);
    }

    public static void debug(String message) {
        if (DEBUG) {
            System.err.println("otelprof: " + message);
        }
    }
}
