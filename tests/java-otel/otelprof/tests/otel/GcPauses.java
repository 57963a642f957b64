package otelprof.tests.otel;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import otelprof.ThreadContext;

/**
 * Garbage collection pauses that a request sits through: a worker thread ("worker") runs
 * inside a span and alternates 3 ms of computing with 3 ms of sleeping, while the main
 * thread holds a large set of small objects (slow to mark and compact) and every second
 * calls {@code System.gc()}, a stop-the-world full collection on G1 and Parallel, timing each
 * with System.nanoTime.
 *
 * <p>Prints {@code gc <nanos>} per collection, {@code gc_total <nanos>}, the collector beans'
 * {@code collections <count>} and {@code collection_ms <total>}, {@code span <traceIdHex>
 * <spanIdHex>}, {@code heap_after_gc <bytes>} (the heap pools' collection usage summed after
 * the last collection), {@code allocated <bytes>} (what the two threads allocated while
 * profiled), and {@code done}.
 *
 * <p>Usage: {@code GcPauses <live MiB> <collections>}.
 */
public final class GcPauses {
    static volatile long sink;
    static volatile boolean stop;
    static Object[] held;

    static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    /** Small linked objects: many to mark, all of them live. */
    static final class Node {
        Node next;
        long value;
    }

    static Object[] hold(long bytes) {
        int chains = 1024;
        Object[] roots = new Object[chains];
        long per = bytes / 24 / chains;
        for (int c = 0; c < chains; c++) {
            Node head = null;
            for (long i = 0; i < per; i++) {
                Node n = new Node();
                n.next = head;
                n.value = i;
                head = n;
            }
            roots[c] = head;
        }
        return roots;
    }

    static void compute() {
        long end = System.nanoTime() + 3_000_000L;
        long x = 0;
        while (System.nanoTime() < end) {
            x = x * 31 + 7;
        }
        sink += x;
    }

    static long[] work() throws InterruptedException {
        long hi = 0x5af7651916cd43ddL, lo = 0x8448eb211c80319cL, span = 0x0a0b0c0d0e0f1011L;
        ThreadContext.set(hi, lo, span, span, true);
        ThreadContext.setEndpoint(span, "pause /work");
        long before = THREADS.getCurrentThreadAllocatedBytes();
        while (!stop) {
            compute();
            Thread.sleep(3);
        }
        ThreadContext.clear();
        return new long[] {hi, lo, span, THREADS.getCurrentThreadAllocatedBytes() - before};
    }

    public static void main(String[] args) throws Exception {
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        long mainBefore = THREADS.getCurrentThreadAllocatedBytes();
        held = hold(Long.parseLong(args[0]) << 20);
        int collections = Integer.parseInt(args[1]);
        long[][] result = new long[1][];
        Thread worker =
                new Thread(
                        () -> {
                            try {
                                result[0] = work();
                            } catch (InterruptedException e) {
                                throw new RuntimeException(e);
                            }
                        },
                        "worker");
        worker.start();
        Thread.sleep(500);
        long total = 0;
        for (int i = 0; i < collections; i++) {
            long t0 = System.nanoTime();
            System.gc();
            long d = System.nanoTime() - t0;
            total += d;
            System.out.printf("gc %d%n", d);
            Thread.sleep(700);
        }
        stop = true;
        worker.join();
        long count = 0, millis = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            count += b.getCollectionCount();
            millis += b.getCollectionTime();
        }
        long used = 0;
        for (java.lang.management.MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
            if (p.getType() == java.lang.management.MemoryType.HEAP && p.getCollectionUsage() != null) {
                used += p.getCollectionUsage().getUsed();
            }
        }
        long allocated = THREADS.getCurrentThreadAllocatedBytes() - mainBefore + result[0][3];
        System.out.printf("gc_total %d%n", total);
        System.out.printf("collections %d%n", count);
        System.out.printf("collection_ms %d%n", millis);
        System.out.printf("heap_after_gc %d%n", used);
        System.out.printf("allocated %d%n", allocated);
        System.out.printf("span %016x%016x %016x%n", result[0][0], result[0][1], result[0][2]);
        System.out.println("done " + sink + " " + held.length);
        // Time for the agent to read the last collection's figures before it exports them.
        Thread.sleep(1500);
    }
}
