package otelprof.otel;

import io.opentelemetry.context.ContextStorage;
import otelprof.internal.Log;

/**
 * Installs the context-storage wrapper. OpenTelemetry applies wrappers only if they are added
 * before the storage is first used (later calls are silently ignored), so this runs from the
 * earliest hooks there are: the javaagent's premain, and the static initialiser of the SDK
 * autoconfigure SPI provider (which the OpenTelemetry javaagent loads from extensions before
 * it touches context).
 */
public final class OtelIntegration {
    private OtelIntegration() {}

    private static boolean installed;

    /** Adds the wrapper (once per class loader). */
    public static synchronized void install() {
        if (installed) {
            return;
        }
        installed = true;
        ContextStorage.addWrapper(OtelprofContextStorage::new);
        startVerifier();
    }

    /** Whether the storage in use is (or contains) our wrapper. Initialises the storage. */
    public static boolean active() {
        return OtelprofContextStorage.used() || ContextStorage.get() instanceof OtelprofContextStorage;
    }

    /**
     * Checks a little later (when the application has set OpenTelemetry up) that the wrapper
     * is in use, and says so in one line if not. Checking right away would initialise the
     * storage before other agents had a chance to add their own wrappers.
     */
    private static void startVerifier() {
        long delayMs = Long.getLong("otelprof.verifyDelayMs", 20_000L);
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(delayMs);
            } catch (InterruptedException e) {
                return;
            }
            try {
                if (!active()) {
                    Log.warn("OpenTelemetry context storage was set up before otelprof could wrap it;"
                            + " samples will not carry spans. Load otelprof earlier (-javaagent, or as an"
                            + " OpenTelemetry javaagent extension).");
                } else {
                    Log.debug("OpenTelemetry context integration is active");
                }
            } catch (Throwable e) {
                Log.warn("cannot verify the OpenTelemetry context integration: " + e);
            }
        }, "otelprof-verify");
        t.setDaemon(true);
        t.start();
    }
}
