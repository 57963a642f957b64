import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.zip.CRC32;

/**
 * A fixed amount of allocation-heavy work on a fixed number of threads, for the profile-type
 * overhead benchmark ({@code bench/types_overhead.py}). Where {@code FixedWork} mostly
 * computes, this mostly allocates: every request builds short-lived records (strings, boxed
 * and primitive arrays, lists, a map), renders them as text, splits the text again and hashes
 * it, about 40 KB of garbage per request and well over 1 GB/s of allocation on two threads.
 * That is the case where allocation sampling costs the most.
 *
 * <p>The {@code arrays} kind is the steadier variant: each request, {@link #ARRAYS_DEPTH} frames
 * down a recursive call chain, allocates {@link #ARRAYS_PER_REQUEST} arrays ({@code long[]}
 * filled from a seeded generator, and {@code Object[]}; 64 B to 4 KB, sizes from the same
 * generator) and keeps each in a ring of the last {@link #RING} (so none is optimised away and
 * the live set stays fixed). Its
 * time is memory zeroing and young collections, which vary little from JVM to JVM, where the
 * records kind's JIT-compiled code (collections, streams, string building) differs from run to
 * run by more than the few percent the benchmark tries to resolve.
 *
 * <p>Seeded per thread: every run does the same work and prints the same checksum.
 *
 * <p>Usage: {@code AllocHeavy <threads> <requestsPerThread> [records|arrays]} (default records).
 * Prints {@code result=<checksum> threads=<n> requests=<n> kind=<kind>}.
 */
public final class AllocHeavy {
    static final String[] NAMES = {
        "order", "invoice", "customer", "shipment", "payment", "refund", "cart", "item",
    };

    record Line(String name, long id, int[] values, List<Integer> tags) {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 2 || args.length > 3 || (args.length == 3 && !List.of("records", "arrays").contains(args[2]))) {
            System.err.println("usage: AllocHeavy <threads> <requestsPerThread> [records|arrays]");
            System.exit(2);
        }
        int threads = Integer.parseInt(args[0]);
        int requests = Integer.parseInt(args[1]);
        boolean arrays = args.length == 3 && args[2].equals("arrays");
        long[] sums = new long[threads];
        Thread[] running = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            int n = i;
            long seed = 0x9E3779B97F4A7C15L * (n + 1);
            running[i] = new Thread(() -> sums[n] = arrays ? arrays(seed, requests) : work(seed, requests),
                    "alloc-work-" + i);
            running[i].start();
        }
        long checksum = 0;
        for (int i = 0; i < threads; i++) {
            running[i].join();
            checksum += sums[i];
        }
        System.out.println("result=" + Long.toHexString(checksum) + " threads=" + threads
                + " requests=" + requests + " kind=" + (arrays ? "arrays" : "records"));
    }

    static final int ARRAYS_DEPTH = 24;
    static final int ARRAYS_PER_REQUEST = 16;
    static final int RING = 4096;
    /** Generator steps per long filled: sets the allocation rate (about 1.5 GB/s on two threads here). */
    static final int FILL_STEPS = 8;

    static long arrays(long seed, int requests) {
        Object[] ring = new Object[RING];
        long sum = 0;
        long x = seed;
        for (int r = 0; r < requests; r++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            sum += descend(ARRAYS_DEPTH, x, ring, r);
        }
        return sum;
    }

    /** {@code depth} frames of recursion, then a request's allocations. */
    static long descend(int depth, long x, Object[] ring, int request) {
        if (depth > 0) {
            return descend(depth - 1, x ^ depth, ring, request) + 1;
        }
        long sum = 0;
        for (int k = 0; k < ARRAYS_PER_REQUEST; k++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            int slots = 8 + (int) ((x >>> 40) & 511); // 8..519 slots: 64 B to about 4 KB
            Object a;
            if ((k & 3) == 0) {
                Object[] refs = new Object[slots];
                refs[0] = ring;
                a = refs;
            } else {
                long[] longs = new long[slots];
                for (int i = 0; i < slots; i++) {
                    for (int j = 0; j < FILL_STEPS; j++) {
                        x = x * 6364136223846793005L + 1442695040888963407L;
                    }
                    longs[i] = x;
                }
                a = longs;
            }
            ring[(request * ARRAYS_PER_REQUEST + k) & (RING - 1)] = a;
            sum += slots;
        }
        return sum;
    }

    static long work(long seed, int requests) {
        SplittableRandom random = new SplittableRandom(seed);
        long sum = 0;
        for (int r = 0; r < requests; r++) {
            sum += request(random);
        }
        return sum;
    }

    static long request(SplittableRandom random) {
        List<Line> lines = new ArrayList<>();
        int count = 20 + random.nextInt(20);
        for (int i = 0; i < count; i++) {
            lines.add(line(random));
        }
        Map<String, List<Line>> byName = new HashMap<>();
        for (Line l : lines) {
            byName.computeIfAbsent(l.name(), k -> new ArrayList<>()).add(l);
        }
        String text = render(byName);
        String[] tokens = text.split("[,;]");
        CRC32 crc = new CRC32();
        for (String t : tokens) {
            crc.update(t.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }
        return crc.getValue() + tokens.length;
    }

    static Line line(SplittableRandom random) {
        int[] values = new int[8 + random.nextInt(56)];
        for (int i = 0; i < values.length; i++) {
            values[i] = random.nextInt(1000);
        }
        List<Integer> tags = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            tags.add(random.nextInt(100_000));
        }
        String name = NAMES[random.nextInt(NAMES.length)] + "-" + random.nextInt(16);
        return new Line(name, random.nextLong(), values, tags);
    }

    static String render(Map<String, List<Line>> byName) {
        StringBuilder sb = new StringBuilder();
        byName.keySet().stream().sorted().forEach(name -> {
            sb.append(name).append(';');
            for (Line l : byName.get(name)) {
                sb.append(l.id()).append(',');
                for (int v : l.values()) {
                    sb.append(v).append(',');
                }
                sb.append(l.tags()).append(';');
            }
        });
        return sb.toString();
    }
}
