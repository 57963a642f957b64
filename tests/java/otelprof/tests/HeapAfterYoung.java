package otelprof.tests;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;
import java.util.ArrayList;
import java.util.List;

/**
 * A heap that grows while only young collections run: the main thread holds {@code <MiB>}
 * MiB in 1 MiB arrays (on G1 with 1 MiB regions, humongous: allocated straight in the old
 * generation), then allocates short-lived arrays until the young collector has run three
 * more times, and waits 1.5 s for the agent to read the beans.
 *
 * <p>Prints {@code held <bytes>}, {@code after_gc <bytes>} (the heap pools' usage after the
 * collection that ended last, from its {@code GcInfo}), {@code collection_usage <bytes>} (the
 * heap pools' {@code getCollectionUsage()} summed, which G1 updates for its old generation
 * only at full and mixed collections), {@code full_collections <n>} and {@code done}.
 *
 * <p>Usage: {@code HeapAfterYoung <MiB>}.
 */
public final class HeapAfterYoung {
    static volatile long sink;

    static long collections() {
        long n = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            n += b.getCollectionCount();
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        int mib = Integer.parseInt(args[0]);
        List<byte[]> held = new ArrayList<>();
        for (int i = 0; i < mib; i++) {
            held.add(new byte[1 << 20]);
        }
        long start = collections();
        while (collections() < start + 3) {
            for (int i = 0; i < 1000; i++) {
                sink += new byte[1024].length;
            }
        }
        Thread.sleep(1500);
        long end = 0, afterGc = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            com.sun.management.GcInfo info =
                    ((com.sun.management.GarbageCollectorMXBean) b).getLastGcInfo();
            if (info == null || info.getEndTime() <= end) {
                continue;
            }
            end = info.getEndTime();
            afterGc = 0;
            for (MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
                MemoryUsage u = info.getMemoryUsageAfterGc().get(p.getName());
                if (p.getType() == MemoryType.HEAP && u != null) {
                    afterGc += u.getUsed();
                }
            }
        }
        long collectionUsage = 0;
        for (MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
            if (p.getType() == MemoryType.HEAP && p.getCollectionUsage() != null) {
                collectionUsage += p.getCollectionUsage().getUsed();
            }
        }
        long full = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (b.getName().contains("Old")) {
                full += b.getCollectionCount();
            }
        }
        System.out.printf("held %d%n", (long) held.size() << 20);
        System.out.printf("after_gc %d%n", afterGc);
        System.out.printf("collection_usage %d%n", collectionUsage);
        System.out.printf("full_collections %d%n", full);
        System.out.println("done " + sink);
    }
}
