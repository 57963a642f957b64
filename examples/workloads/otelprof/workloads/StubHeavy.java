package otelprof.workloads;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;

/**
 * Work that spends much of its time where a JVM's stack walker cannot place the top frame:
 * megamorphic interface calls (dispatched through frameless itable stubs), many tiny
 * compiled methods (so signals often land in prologues and epilogues), array copies and
 * string building (copy stubs and intrinsics). A sampler that gives up on such signals loses
 * several percent of the CPU time to "unknown" frames; the caller is always a method of this
 * class.
 *
 * <p>Usage: {@code StubHeavy <threads> <cpuSeconds>}
 */
public final class StubHeavy {
    static volatile long sink;

    interface Op {
        long apply(long x);
    }

    static final class Add implements Op {
        public long apply(long x) {
            return x + 7;
        }
    }

    static final class Mul implements Op {
        public long apply(long x) {
            return x * 3;
        }
    }

    static final class Xor implements Op {
        public long apply(long x) {
            return x ^ 0x5bd1e995L;
        }
    }

    static final class Rot implements Op {
        public long apply(long x) {
            return Long.rotateLeft(x, 5);
        }
    }

    static final class Neg implements Op {
        public long apply(long x) {
            return -x;
        }
    }

    static final Op[] OPS = {new Add(), new Mul(), new Xor(), new Rot(), new Neg()};

    static long dispatch(long x, int rounds) {
        for (int i = 0; i < rounds; i++) {
            x = OPS[i % OPS.length].apply(x);
        }
        return x;
    }

    static long copy(int[] src, int[] dst, int rounds) {
        long x = 0;
        for (int i = 0; i < rounds; i++) {
            System.arraycopy(src, i & 7, dst, 0, 48);
            int[] c = Arrays.copyOf(dst, 40 + (i & 15));
            x += c[c.length - 1];
        }
        return x;
    }

    static long strings(int rounds) {
        long x = 0;
        for (int i = 0; i < rounds; i++) {
            String s = "item-" + i + "/" + (i * 31L);
            x += s.hashCode() + s.indexOf('/');
        }
        return x;
    }

    static long cpuNanos(ThreadMXBean mx) {
        return mx.getCurrentThreadCpuTime();
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long cpuNanos = (long) (Double.parseDouble(args[1]) * 1e9);
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            workers[t] = new Thread(() -> {
                int[] src = new int[64];
                int[] dst = new int[64];
                Arrays.fill(src, 3);
                long x = 0;
                while (cpuNanos(mx) < cpuNanos) {
                    x += dispatch(x, 20_000);
                    x += copy(src, dst, 2_000);
                    x += strings(1_000);
                }
                sink = x;
            }, "worker-" + t);
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        System.out.println("done " + sink);
    }
}
