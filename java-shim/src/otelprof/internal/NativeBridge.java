package otelprof.internal;

import java.nio.ByteBuffer;

/**
 * The native methods of libotelprof.so. They bind either because the library was loaded by
 * the JVM as an agent ({@code -agentpath}: HotSpot also looks up natives in agent libraries)
 * or because {@link NativeLoader} loaded it into this class's loader.
 */
public final class NativeBridge {
    private NativeBridge() {}

    /** Whether the agent is sampling; false when the library is not there at all. */
    static native boolean active0();

    /**
     * {@code size << 32 | localRootOffset << 16 | samplesOffset}, to check the record layout
     * (docs/context-protocol.md, "Record layout").
     */
    static native long layout0();

    /** This thread's context record, or null when it is not sampled. */
    static native ByteBuffer registerThread0();

    /**
     * The calling virtual thread's own record (it follows the thread across carriers; see
     * docs/context-protocol.md, "Virtual threads").
     */
    static native ByteBuffer registerVirtualThread0();

    static native void reportEndpoint0(long localRootSpanId, String name);

    /** The agent's sample counter (8 bytes, native order), incremented by its signal handler. */
    static native ByteBuffer sampleCounter0();

    /** The agent's count of profiling sessions started (8 bytes, native order). */
    static native ByteBuffer sessionCounter0();

    /** The address of a direct buffer made by the agent (0 if not direct). */
    static native long bufferAddress0(ByteBuffer buffer);

    /** Starts the agent in a running JVM; null on success, else why profiling is off. */
    static native String start0(String options);

    /** Address {@code otel_thread_ctx_v1} holds on this thread (for tests). */
    static native long publishedRecordAddress0();

    private static volatile int linked; // 0 unknown, 1 yes, -1 no

    /** True when the native methods are bound (the agent library is loaded). */
    public static boolean linked() {
        int l = linked;
        if (l == 0) {
            try {
                layout0();
                l = 1;
            } catch (UnsatisfiedLinkError e) {
                l = -1;
            }
            linked = l;
        }
        return l > 0;
    }

    public static boolean active() {
        return linked() && active0();
    }

    static void resetLinkState() {
        linked = 0;
    }

    public static void reportEndpoint(long localRootSpanId, String name) {
        if (linked() && localRootSpanId != 0 && name != null) {
            reportEndpoint0(localRootSpanId, name);
        }
    }

    public static String start(String options) {
        return start0(options == null ? "" : options);
    }

    public static long publishedRecordAddress() {
        return linked() ? publishedRecordAddress0() : 0;
    }

    static long layout() {
        return layout0();
    }

    static ByteBuffer registerThread() {
        return VirtualThreads.isVirtual(Thread.currentThread()) ? registerVirtualThread0() : registerThread0();
    }
}
