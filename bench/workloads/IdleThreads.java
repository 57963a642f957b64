import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;

/**
 * Starts {@code threads} threads that block on a latch, waits {@code waitMillis} with all of
 * them idle, then reads this process's resident memory from /proc/self/status, for the memory
 * part of the overhead benchmark ({@code bench/overhead.py}). The agent keeps per-thread state
 * and a CPU timer per Java thread; idle threads take no samples, so what this shows is the
 * agent's fixed cost plus its per-thread cost.
 *
 * <p>Usage: {@code IdleThreads <threads> <waitMillis>}. Prints
 * {@code rss_kb=<VmRSS> hwm_kb=<VmHWM> threads=<Threads>} and then {@code result=ok}.
 */
public final class IdleThreads {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: IdleThreads <threads> <waitMillis>");
            System.exit(2);
        }
        int count = Integer.parseInt(args[0]);
        long waitMillis = Long.parseLong(args[1]);
        CountDownLatch started = new CountDownLatch(count);
        CountDownLatch release = new CountDownLatch(1);
        Thread[] threads = new Thread[count];
        for (int i = 0; i < count; i++) {
            threads[i] = new Thread(() -> {
                started.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "idle-" + i);
            threads[i].start();
        }
        started.await();
        Thread.sleep(waitMillis);
        String rss = null;
        String hwm = null;
        String osThreads = null;
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            String[] kv = line.split(":\\s+", 2);
            if (kv.length != 2) {
                continue;
            }
            switch (kv[0]) {
                case "VmRSS": rss = kv[1].replace(" kB", "").trim(); break;
                case "VmHWM": hwm = kv[1].replace(" kB", "").trim(); break;
                case "Threads": osThreads = kv[1].trim(); break;
                default: break;
            }
        }
        System.out.println("rss_kb=" + rss + " hwm_kb=" + hwm + " threads=" + osThreads);
        release.countDown();
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("result=ok");
    }
}
