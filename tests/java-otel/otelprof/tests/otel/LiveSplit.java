package otelprof.tests.otel;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.util.SplittableRandom;
import otelprof.ThreadContext;

/**
 * Live heap truth: three sites retain a steady live set in the ratio 60:30:10 of bytes while
 * two others churn several times that set per second in objects that die at once.
 *
 * <ul>
 *   <li>{@code retainA}, {@code retainB}, {@code retainC}: byte arrays of 512 B to 16 KiB,
 *       each site's held in one array of its own (allocated by the site too). Every second
 *       about 2 % of each site's arrays are replaced by new ones of the same size, so the set
 *       stays steady while its objects turn over.
 *   <li>{@code churnArrays}, {@code churnStrings}: temporary arrays and strings, dropped at
 *       once, at {@code churn} times the live set per second.
 * </ul>
 *
 * The work runs in a span (otelprof direct API) named {@code live /split}. After the churn
 * phase the churn stops, {@code System.gc()} runs twice, and the truth is printed: {@code
 * truth <A|B|C> <bytes> <objects>} per site, its arrays and its holder (exact sizes on 64-bit
 * HotSpot with compressed class pointers and oops: an array of n bytes takes align8(16 + n),
 * an array of n references align8(16 + 4n)), {@code allocated <bytes>} (what this thread
 * allocated while profiled, from the JVM's own per-thread counter),
 * {@code heap_used <bytes>} (MemoryMXBean, right after the collection), {@code heap_after_gc
 * <bytes>} (the heap pools' collection usage summed), {@code baseline <bytes>} (the same before
 * the live set was built), {@code span <traceIdHex> <spanIdHex>}, and {@code done}. Then it
 * sleeps {@code linger} seconds, so that a period ends after the collection.
 *
 * <p>Usage: {@code LiveSplit <live MiB> <churn seconds> <churn multiple> <linger seconds>}.
 */
public final class LiveSplit {
    static final int MIN = 512, MAX = 16 * 1024;

    /** One retaining site: its arrays, and the array holding them. */
    static final class Site {
        byte[][] held;
        long bytes;
    }

    static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    static final Site A = new Site(), B = new Site(), C = new Site();
    static volatile long sink;

    static long arrayBytes(long length, long elementSize) {
        return (16 + length * elementSize + 7) & ~7L;
    }

    static int size(SplittableRandom r) {
        return MIN + r.nextInt(MAX - MIN + 1);
    }

    // The three sites: each allocates its own arrays (the stacks the profile attributes).
    static byte[] retainA(int n) {
        return new byte[n];
    }

    static byte[] retainB(int n) {
        return new byte[n];
    }

    static byte[] retainC(int n) {
        return new byte[n];
    }

    static byte[][] holderA(int n) {
        return new byte[n][];
    }

    static byte[][] holderB(int n) {
        return new byte[n][];
    }

    static byte[][] holderC(int n) {
        return new byte[n][];
    }

    static byte[] retain(Site s, int n) {
        return s == A ? retainA(n) : s == B ? retainB(n) : retainC(n);
    }

    /** Fills `s` with about `bytes` bytes of arrays. */
    static void build(Site s, long bytes, SplittableRandom r) {
        int count = (int) (bytes / ((MIN + MAX) / 2 + 16));
        s.held = s == A ? holderA(count) : s == B ? holderB(count) : holderC(count);
        s.bytes = arrayBytes(count, 4);
        for (int i = 0; i < count; i++) {
            byte[] a = retain(s, size(r));
            s.held[i] = a;
            s.bytes += arrayBytes(a.length, 1);
        }
    }

    /** Replaces `fraction` of the site's arrays by new arrays of the same sizes. */
    static void turnOver(Site s, double fraction, SplittableRandom r) {
        int n = (int) (s.held.length * fraction);
        for (int k = 0; k < n; k++) {
            int i = r.nextInt(s.held.length);
            s.held[i] = retain(s, s.held[i].length);
        }
    }

    /** About `bytes` bytes of arrays that die at once. */
    static void churnArrays(long bytes, SplittableRandom r) {
        for (long done = 0; done < bytes; ) {
            byte[] a = new byte[64 + r.nextInt(8 * 1024)];
            a[a.length - 1] = 1;
            sink += a.length;
            done += a.length + 16;
        }
    }

    /** About `bytes` bytes of strings that die at once. */
    static void churnStrings(long bytes, SplittableRandom r) {
        for (long done = 0; done < bytes; ) {
            String s = Long.toHexString(r.nextLong()) + "/" + done;
            sink += s.length();
            done += 80;
        }
    }

    static long collectionUsage() {
        long sum = 0;
        for (MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
            if (p.getType() == MemoryType.HEAP && p.getCollectionUsage() != null) {
                sum += p.getCollectionUsage().getUsed();
            }
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        long live = Long.parseLong(args[0]) << 20;
        long seconds = Long.parseLong(args[1]);
        double churn = Double.parseDouble(args[2]);
        long linger = Long.parseLong(args[3]);
        System.gc();
        long baseline = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
        SplittableRandom r = new SplittableRandom(42);
        long allocatedBefore = THREADS.getCurrentThreadAllocatedBytes();
        long hi = 0x4bf92f3577b34da6L, lo = 0xa3ce929d0e0e4736L, span = 0x00f067aa0ba902b7L;
        ThreadContext.set(hi, lo, span, span, true);
        ThreadContext.setEndpoint(span, "live /split");
        build(A, live * 6 / 10, r);
        build(B, live * 3 / 10, r);
        build(C, live / 10, r);
        long perSlice = (long) (churn * live / 10);
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        int slice = 0;
        long next = System.nanoTime();
        while (next < end) {
            // A tenth of a second's churn, and every tenth slice a second's turnover; paced,
            // so the rate is the one asked for (a slow machine churns less, never faster).
            churnArrays(perSlice / 2, r);
            churnStrings(perSlice / 2, r);
            if (++slice % 10 == 0) {
                turnOver(A, 0.02, r);
                turnOver(B, 0.02, r);
                turnOver(C, 0.02, r);
            }
            next += 100_000_000L;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
        }
        System.out.printf("churned %d slices of %d bytes%n", slice, perSlice);
        ThreadContext.clear();
        long allocated = THREADS.getCurrentThreadAllocatedBytes() - allocatedBefore;
        System.gc();
        System.gc();
        long used = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
        System.out.printf("truth A %d %d%n", A.bytes, A.held.length + 1);
        System.out.printf("truth B %d %d%n", B.bytes, B.held.length + 1);
        System.out.printf("truth C %d %d%n", C.bytes, C.held.length + 1);
        System.out.printf("allocated %d%n", allocated);
        System.out.printf("heap_used %d%n", used);
        System.out.printf("heap_after_gc %d%n", collectionUsage());
        System.out.printf("baseline %d%n", baseline);
        System.out.printf("span %016x%016x %016x%n", hi, lo, span);
        System.out.println("done " + sink);
        System.out.flush();
        Thread.sleep(linger * 1000);
        // Still held: the sites are live until the JVM exits.
        sink += A.held.length + B.held.length + C.held.length;
    }
}
