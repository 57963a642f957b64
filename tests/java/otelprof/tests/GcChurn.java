package otelprof.tests;

import java.lang.management.ManagementFactory;
import java.util.SplittableRandom;

/**
 * An allocation-bound workload whose CPU goes mostly to the garbage collector: every worker
 * keeps a large live set (an array of short linked lists) and replaces random entries with
 * new ones. A new list lives until its slot is picked again, on average as long as it takes
 * to replace the whole array, which is far longer than a young collection: it is promoted,
 * then dies in the old generation. The collector therefore marks and copies a large live set
 * over and over, in its own threads, while the workers themselves do little.
 *
 * <p>The work is fixed (a number of replacements per worker), so a busy machine makes the run
 * longer, not different. At the end each worker prints its own CPU time ({@code worker_cpu_ms
 * NAME MS}); the process's CPU time is for the caller to read when the JVM has exited.
 *
 * <p>Usage: {@code GcChurn <workers> <replacementsPerWorker> <liveMegabytes>}
 */
public final class GcChurn {
    /** One link of a list: about 40 bytes, and 64 for its payload array (header included). */
    static final class Node {
        Node next;
        long a;
        long b;
        byte[] payload;

        Node(Node next, long a, int payloadBytes) {
            this.next = next;
            this.a = a;
            this.b = a * 31;
            this.payload = new byte[payloadBytes];
        }
    }

    static final int NODES_PER_LIST = 4;
    static final int PAYLOAD_BYTES = 48;
    /** Approximate bytes of one list: four nodes (40 bytes) and their payloads (16 + 48). */
    static final int LIST_BYTES = NODES_PER_LIST * (40 + 16 + PAYLOAD_BYTES);

    static volatile long sink;

    static Node list(long seed) {
        Node head = null;
        for (int i = 0; i < NODES_PER_LIST; i++) {
            head = new Node(head, seed + i, PAYLOAD_BYTES);
        }
        return head;
    }

    static void work(long replacements, int slots, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        Node[] live = new Node[slots];
        for (int i = 0; i < slots; i++) {
            live[i] = list(i);
        }
        long sum = 0;
        for (long r = 0; r < replacements; r++) {
            int at = random.nextInt(slots);
            Node old = live[at];
            sum += old.a + old.next.b;
            live[at] = list(r);
        }
        sink += sum;
    }

    public static void main(String[] args) throws Exception {
        int workers = Integer.parseInt(args[0]);
        long replacements = Long.parseLong(args[1]);
        long liveMb = Long.parseLong(args[2]);
        int slots = (int) (liveMb * 1024 * 1024 / LIST_BYTES / workers);
        Thread[] threads = new Thread[workers];
        long[] cpuMs = new long[workers];
        for (int t = 0; t < workers; t++) {
            final int me = t;
            threads[t] = new Thread(() -> {
                var mx = ManagementFactory.getThreadMXBean();
                long start = mx.getCurrentThreadCpuTime();
                work(replacements, slots, 42 + me);
                cpuMs[me] = (mx.getCurrentThreadCpuTime() - start) / 1_000_000;
            }, "churn-" + t);
            threads[t].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        for (int t = 0; t < workers; t++) {
            System.out.printf("worker_cpu_ms %s %d%n", threads[t].getName(), cpuMs[t]);
        }
    }
}
