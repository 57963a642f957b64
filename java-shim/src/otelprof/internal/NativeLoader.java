package otelprof.internal;

import java.io.File;
import java.net.URISyntaxException;
import java.net.URL;
import java.security.CodeSource;

/** Finds libotelprof.so beside the jar this class came from and loads it. */
public final class NativeLoader {
    private NativeLoader() {}

    public static final String LIBRARY = "libotelprof.so";

    /**
     * Loads the agent library unless its natives are already bound. Returns null on success,
     * else a one-line reason.
     */
    public static synchronized String load() {
        if (NativeBridge.linked()) {
            return null;
        }
        File lib = locate();
        if (lib == null) {
            return "cannot find " + LIBRARY + " beside otelprof.jar (set -Dotelprof.library=/path/to/"
                    + LIBRARY + ")";
        }
        try {
            System.load(lib.getAbsolutePath());
        } catch (UnsatisfiedLinkError | SecurityException e) {
            return "cannot load " + lib + ": " + e.getMessage();
        }
        NativeBridge.resetLinkState();
        return NativeBridge.linked() ? null : "loaded " + lib + " but its natives do not bind";
    }

    static File locate() {
        String explicit = System.getProperty("otelprof.library", System.getenv("OTELPROF_LIBRARY"));
        if (explicit != null && !explicit.isEmpty()) {
            File f = new File(explicit);
            return f.isFile() ? f : null;
        }
        try {
            CodeSource source = NativeLoader.class.getProtectionDomain().getCodeSource();
            URL location = source == null ? null : source.getLocation();
            if (location == null) {
                return null;
            }
            File jar = new File(location.toURI());
            File dir = jar.isDirectory() ? jar : jar.getParentFile();
            File lib = new File(dir, LIBRARY);
            return lib.isFile() ? lib : null;
        } catch (URISyntaxException | SecurityException | IllegalArgumentException e) {
            return null;
        }
    }
}
