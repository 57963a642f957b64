package otelprof.tests;

import java.io.FileOutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Native code with a known share of each thread's CPU, for the mixed-stack tests:
 *
 * <ul>
 *   <li>{@code jni-N} threads alternate between {@link #burnJava} (Java arithmetic) and
 *       {@code burnC} (the same kind of arithmetic in a C function reached through JNI,
 *       {@code tests/c/native_mix.c}); each half is measured with the thread's own CPU clock
 *       (the Java half with ThreadMXBean around the call, the C half by the C code around its
 *       loop) and printed as {@code truth thread=jni-N java_ns=… c_ns=…};
 *   <li>a {@code writer} thread writes 64 bytes to /dev/null in a loop (write(2) through
 *       FileOutputStream), and prints its user and system CPU from
 *       {@code /proc/thread-self/stat} as {@code writer utime_ticks=… stime_ticks=…}.
 * </ul>
 *
 * <p>Each JNI thread works until it has used {@code cpuSeconds} of CPU (a busy machine makes
 * the run longer, not the sample smaller); the writer writes until they are done.
 *
 * <p>Usage: {@code NativeMix <jni threads> <cpuSeconds>}; needs {@code libnativemix.so} on
 * {@code java.library.path}.
 */
public final class NativeMix {
    static {
        System.loadLibrary("nativemix");
    }

    static native long burnC(long iterations);

    static volatile long sink;

    static long burnJava(long iterations) {
        long x = iterations;
        for (long i = 0; i < iterations; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        return x;
    }

    static volatile boolean done;

    /** Works until this thread has used {@code cpuNanos} of CPU. */
    static void jni(long cpuNanos) {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long javaNs = 0, cNs = 0;
        long start = mx.getCurrentThreadCpuTime();
        // Phases of random length, so that a periodic sampler (the timers' 4 ms tick) cannot
        // alias with the rhythm of the loop.
        java.util.SplittableRandom random = new java.util.SplittableRandom(42);
        while (mx.getCurrentThreadCpuTime() - start < cpuNanos) {
            long before = mx.getCurrentThreadCpuTime();
            sink += burnJava(random.nextLong(1_000_000, 5_000_000));
            javaNs += mx.getCurrentThreadCpuTime() - before;
            cNs += burnC(random.nextLong(700_000, 3_300_000));
        }
        System.out.println("truth thread=" + Thread.currentThread().getName()
                + " java_ns=" + javaNs + " c_ns=" + cNs);
    }

    /** Writes until the JNI threads are done. */
    static void writer() throws Exception {
        byte[] small = new byte[64];
        try (FileOutputStream out = new FileOutputStream("/dev/null")) {
            while (!done) {
                for (int i = 0; i < 1000; i++) {
                    out.write(small);
                }
            }
        }
        // Fields 14 and 15 of /proc/thread-self/stat, after the command name in parentheses.
        String stat = Files.readString(Path.of("/proc/thread-self/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        System.out.println("writer utime_ticks=" + f[11] + " stime_ticks=" + f[12]);
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long cpuNanos = (long) (Double.parseDouble(args[1]) * 1e9);
        List<Thread> jni = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            jni.add(new Thread(() -> jni(cpuNanos), "jni-" + i));
        }
        Thread writer = new Thread(() -> {
            try {
                writer();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "writer");
        writer.start();
        for (Thread t : jni) {
            t.start();
        }
        for (Thread t : jni) {
            t.join();
        }
        done = true;
        writer.join();
        System.out.println("done " + sink);
    }
}
