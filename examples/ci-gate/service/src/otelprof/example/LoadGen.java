package otelprof.example;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The load of the CI gate example, in a process of its own: {@code clients} threads alternate
 * {@code GET /products} and {@code GET /search} for {@code seconds}. Waits up to 30 s for the
 * service to answer first (it may still be starting). Exits non-zero if a request fails.
 *
 * <p>Usage: {@code LoadGen <base url> <seconds> <clients>}
 */
public final class LoadGen {
    private LoadGen() {}

    public static void main(String[] args) throws Exception {
        String base = args[0];
        double seconds = Double.parseDouble(args[1]);
        int clients = Integer.parseInt(args[2]);
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        HttpRequest products = HttpRequest.newBuilder(URI.create(base + "/products")).build();
        HttpRequest search = HttpRequest.newBuilder(URI.create(base + "/search?q=lamp")).build();
        long waitUntil = System.nanoTime() + 30_000_000_000L;
        while (true) {
            try {
                http.send(products, HttpResponse.BodyHandlers.discarding());
                break;
            } catch (java.io.IOException e) {
                if (System.nanoTime() > waitUntil) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        AtomicLong done = new AtomicLong();
        Thread[] threads = new Thread[clients];
        Throwable[] failure = new Throwable[1];
        for (int t = 0; t < clients; t++) {
            threads[t] = new Thread(() -> {
                try {
                    for (long n = 0; System.nanoTime() < deadline; n++) {
                        HttpResponse<Void> r = http.send(n % 2 == 0 ? products : search,
                                HttpResponse.BodyHandlers.discarding());
                        if (r.statusCode() != 200) {
                            throw new IllegalStateException("HTTP " + r.statusCode());
                        }
                        done.incrementAndGet();
                    }
                } catch (Throwable e) {
                    failure[0] = e;
                }
            });
            threads[t].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failure[0] != null) {
            throw new IllegalStateException("a request failed", failure[0]);
        }
        System.out.println("load: " + done.get() + " requests in " + seconds + " s");
    }
}
