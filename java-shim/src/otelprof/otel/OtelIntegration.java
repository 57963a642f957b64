package otelprof.otel;

import io.opentelemetry.context.ContextStorage;
import otelprof.internal.Log;
import otelprof.internal.ReplyFile;

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

    /**
     * At attach (the JVM has been running): adds the wrapper and checks at once whether it is
     * the storage in use. OpenTelemetry applies wrappers only before its storage is first used,
     * so this succeeds only in a JVM that has not used OpenTelemetry context yet; otherwise the
     * reply says so. Checking initialises the storage, which here is what the caller asked for.
     */
    public static synchronized ReplyFile.Reply installAtAttach() {
        boolean before = installed;
        if (!installed) {
            installed = true;
            ContextStorage.addWrapper(OtelprofContextStorage::new);
        }
        ContextStorage storage = ContextStorage.get();
        if (active()) {
            return ReplyFile.Reply.ok()
                    .with("context", before
                            ? "OpenTelemetry (context storage wrapped since an earlier load)"
                            : "OpenTelemetry (context storage wrapped now)")
                    .with("note", "spans made current from now on are on the samples;"
                            + " a thread running a scope opened before stays without a span until its next one");
        }
        return ReplyFile.Reply.error("OpenTelemetry's context storage ("
                + storage.getClass().getName() + ") was already in use when otelprof was attached, and"
                + " OpenTelemetry wraps it only before its first use: samples will not carry spans."
                + " For span context start the JVM with -javaagent:otelprof.jar (or as an OpenTelemetry javaagent extension)");
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
