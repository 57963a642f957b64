package otelprof.tests.otel;

import java.lang.management.ManagementFactory;
import java.util.SplittableRandom;
import otelprof.ThreadContext;

/**
 * Allocation truth: two methods allocate in a 3:1 ratio of bytes, and the JVM's own per-thread
 * allocation counter (com.sun.management.ThreadMXBean, the bytes the thread's TLABs and
 * direct allocations really took) measures how much each allocated:
 *
 * <ul>
 *   <li>{@code allocateArrays}: byte[] of 64 bytes to 24 KiB (small, medium and larger than
 *       what a TLAB usually fits), three quarters of the bytes;
 *   <li>{@code allocateObjects}: small objects ({@code long[2]}, {@code Object}), one quarter.
 * </ul>
 *
 * Objects are stored in a ring so that no allocation is optimised away. The work runs in a
 * span (otelprof direct API). Prints {@code alloc <method> <bytes> <objects>} per method,
 * {@code span <traceIdHex> <spanIdHex>}, and {@code done}.
 *
 * <p>Usage: {@code AllocSplit <megabytes in total>}.
 */
public final class AllocSplit {
    static final Object[] RING = new Object[4096];
    static int next;
    static volatile long sink;

    static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    static void keep(Object o) {
        RING[next] = o;
        next = (next + 1) & (RING.length - 1);
    }

    /** About {@code bytes} bytes of byte arrays; returns the number of arrays. */
    static long allocateArrays(long bytes, SplittableRandom r) {
        long n = 0;
        for (long done = 0; done < bytes; n++) {
            int size = r.nextInt(4) == 0 ? 1024 + r.nextInt(23 * 1024) : 64 + r.nextInt(960);
            byte[] a = new byte[size];
            a[size - 1] = 1;
            keep(a);
            done += size + 16;
        }
        return n;
    }

    /** About {@code bytes} bytes of small objects; returns the number of objects. */
    static long allocateObjects(long bytes, SplittableRandom r) {
        long n = 0;
        for (long done = 0; done < bytes; n++) {
            if (r.nextBoolean()) {
                long[] l = new long[2];
                l[1] = n;
                keep(l);
                done += 32;
            } else {
                keep(new Object());
                done += 16;
            }
        }
        return n;
    }

    public static void main(String[] args) {
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        long total = Long.parseLong(args[0]) << 20;
        SplittableRandom r = new SplittableRandom(42);
        long chunk = 4 << 20;
        long arraysBytes = 0, objectsBytes = 0, arrays = 0, objects = 0;
        long hi = 0x0af7651916cd43ddL, lo = 0x8448eb211c80319cL, span = 0x00f067aa0ba902b7L;
        ThreadContext.set(hi, lo, span, span, true);
        ThreadContext.setEndpoint(span, "alloc /split");
        for (long done = 0; done < total; done += 4 * chunk) {
            long b0 = THREADS.getCurrentThreadAllocatedBytes();
            arrays += allocateArrays(3 * chunk, r);
            long b1 = THREADS.getCurrentThreadAllocatedBytes();
            objects += allocateObjects(chunk, r);
            long b2 = THREADS.getCurrentThreadAllocatedBytes();
            arraysBytes += b1 - b0;
            objectsBytes += b2 - b1;
        }
        ThreadContext.clear();
        System.out.printf("alloc allocateArrays %d %d%n", arraysBytes, arrays);
        System.out.printf("alloc allocateObjects %d %d%n", objectsBytes, objects);
        System.out.printf("span %016x%016x %016x%n", hi, lo, span);
        System.out.println("done " + sink);
    }
}
