package otelprof.demo;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The demo's load: clients calling the shop's four endpoints in a fixed mix, in a process of
 * their own, so that the profiled service spends its CPU on requests, not on making them.
 *
 * <p>Usage: {@code LoadGen BASE_URL SECONDS CLIENTS}. Prints how many requests it sent.
 */
public final class LoadGen {
    private LoadGen() {}

    static volatile long sink;

    public static void main(String[] args) throws Exception {
        String base = args[0];
        double seconds = Double.parseDouble(args[1]);
        int clients = Integer.parseInt(args[2]);
        // The same product ids as the shop's catalogue (ids depend on the index only).
        Catalog catalog = new Catalog(20_000, false);
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        AtomicLong sent = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        List<Thread> load = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            Thread t = new Thread(() -> {
                ThreadLocalRandom r = ThreadLocalRandom.current();
                while (System.nanoTime() < deadline) {
                    int dice = r.nextInt(1000);
                    HttpRequest.Builder b;
                    if (dice < 500) {
                        b = HttpRequest.newBuilder(URI.create(base + "/products/" + catalog.idAt(r.nextInt(20_000))));
                    } else if (dice < 800) {
                        b = HttpRequest.newBuilder(URI.create(base + "/cart"));
                    } else if (dice < 995) {
                        b = HttpRequest.newBuilder(URI.create(base + "/checkout"))
                                .POST(HttpRequest.BodyPublishers.ofString("user=" + r.nextInt(10_000)));
                    } else {
                        b = HttpRequest.newBuilder(URI.create(base + "/report"));
                    }
                    try {
                        HttpResponse<byte[]> resp = client.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
                        sink += resp.body().length;
                        sent.incrementAndGet();
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                }
            }, "load-" + c);
            t.start();
            load.add(t);
        }
        for (Thread t : load) {
            t.join();
        }
        System.out.printf("load: sent %d requests in %.1f s (%d failed to send)%n", sent.get(), seconds, failed.get());
    }
}
