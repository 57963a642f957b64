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
 * <p>Seeded per thread: every run does the same work and prints the same checksum.
 *
 * <p>Usage: {@code AllocHeavy <threads> <requestsPerThread>}. Prints
 * {@code result=<checksum> threads=<n> requests=<n>}.
 */
public final class AllocHeavy {
    static final String[] NAMES = {
        "order", "invoice", "customer", "shipment", "payment", "refund", "cart", "item",
    };

    record Line(String name, long id, int[] values, List<Integer> tags) {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: AllocHeavy <threads> <requestsPerThread>");
            System.exit(2);
        }
        int threads = Integer.parseInt(args[0]);
        int requests = Integer.parseInt(args[1]);
        long[] sums = new long[threads];
        Thread[] running = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            int n = i;
            running[i] = new Thread(() -> sums[n] = work(0x9E3779B97F4A7C15L * (n + 1), requests), "alloc-work-" + i);
            running[i].start();
        }
        long checksum = 0;
        for (int i = 0; i < threads; i++) {
            running[i].join();
            checksum += sums[i];
        }
        System.out.println("result=" + Long.toHexString(checksum) + " threads=" + threads
                + " requests=" + requests);
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
