package otelprof.demo;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.math.BigDecimal;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The demo service: a small shop on the JDK's own HTTP server with four endpoints, spans set
 * through otelprof's direct Java API, and the HTTP server metrics exported over OTLP. Version
 * 2 carries one deliberate regression ({@link Catalog#findProduct}). Its load comes from
 * {@link LoadGen}, in another process.
 *
 * <p>Usage: {@code Shop --version 1|2 --metrics URL}. Prints the URL it listens on, serves
 * until its standard input closes, then prints how many requests each endpoint served and the
 * slowest trace.
 */
public final class Shop {
    private Shop() {}

    static Catalog catalog;
    static OtlpMetrics metrics;
    static final AtomicLong SERVED = new AtomicLong();
    static final AtomicLong ERRORS = new AtomicLong();

    private static final Object SLOWEST_LOCK = new Object();
    private static long slowestNanos;
    private static String slowest = "";

    interface Handler {
        byte[] handle(HttpExchange exchange) throws Exception;
    }

    // --- endpoints ---

    static byte[] product(HttpExchange ex) {
        String path = ex.getRequestURI().getPath();
        long id = Long.parseLong(path.substring(path.lastIndexOf('/') + 1));
        Catalog.Product p = catalog.findProduct(id);
        if (p == null) {
            return "{\"error\":\"no such product\"}".getBytes(StandardCharsets.UTF_8);
        }
        StringBuilder json = new StringBuilder(512);
        appendProduct(json.append("{\"product\":"), p).append(",\"related\":[");
        List<Catalog.Product> related = catalog.related(p, 4);
        for (int i = 0; i < related.size(); i++) {
            appendProduct(i == 0 ? json : json.append(','), related.get(i));
        }
        return json.append("]}").toString().getBytes(StandardCharsets.UTF_8);
    }

    static StringBuilder appendProduct(StringBuilder json, Catalog.Product p) {
        return json.append("{\"id\":").append(p.id).append(",\"name\":\"").append(p.name)
                .append("\",\"category\":\"").append(p.category).append("\",\"price\":")
                .append(p.priceCents / 100).append('.').append(p.priceCents % 100).append('}');
    }

    static final class Cart {
        final List<Catalog.Product> items = new ArrayList<>();
        int[] quantities;
    }

    static Cart loadCart(long seed, int size) {
        Cart c = new Cart();
        c.quantities = new int[size];
        for (int i = 0; i < size; i++) {
            Catalog.Product p = catalog.findProduct(catalog.idAt((int) (seed * 31 + i * 977)));
            c.items.add(p);
            c.quantities[i] = 1 + (int) ((seed + i) % 4);
        }
        return c;
    }

    static byte[] cart(HttpExchange ex) {
        long user = ThreadLocalRandom.current().nextInt(10_000);
        Cart c = loadCart(user, 12);
        BigDecimal total = Pricing.total(c.items, c.quantities);
        StringBuilder json = new StringBuilder(1024).append("{\"items\":[");
        for (int i = 0; i < c.items.size(); i++) {
            appendProduct(i == 0 ? json : json.append(','), c.items.get(i));
        }
        return json.append("],\"total\":\"").append(total).append("\"}").toString().getBytes(StandardCharsets.UTF_8);
    }

    static byte[] checkout(HttpExchange ex) throws Exception {
        byte[] body = ex.getRequestBody().readAllBytes();
        long user = body.length + ThreadLocalRandom.current().nextInt(10_000);
        Cart c = loadCart(user, 12);

        Tracer.Span pricing = Tracer.startChild("pricing");
        BigDecimal total;
        try {
            total = Pricing.total(c.items, c.quantities);
        } finally {
            Tracer.end(pricing);
        }

        Tracer.Span inventory = Tracer.startChild("inventory");
        try {
            for (int i = 0; i < c.items.size(); i++) {
                Catalog.Product p = catalog.findProduct(c.items.get(i).id);
                synchronized (p) {
                    p.stock = p.stock > c.quantities[i] ? p.stock - c.quantities[i] : p.stock + 100;
                }
            }
        } finally {
            Tracer.end(inventory);
        }

        Tracer.Span payment = Tracer.startChild("payment");
        String receipt;
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            byte[] digest = (user + ":" + total).getBytes(StandardCharsets.UTF_8);
            for (int i = 0; i < 200; i++) {
                digest = sha.digest(digest);
            }
            StringBuilder hex = new StringBuilder();
            for (int i = 0; i < 8; i++) {
                hex.append(String.format("%02x", digest[i]));
            }
            receipt = hex.toString();
        } finally {
            Tracer.end(payment);
        }
        return ("{\"order\":\"" + receipt + "\",\"total\":\"" + total + "\"}").getBytes(StandardCharsets.UTF_8);
    }

    static byte[] report(HttpExchange ex) {
        Tracer.Span load = Tracer.startChild("load sales");
        List<Catalog.Product> all;
        try {
            all = new ArrayList<>(catalog.products.length);
            for (Catalog.Product p : catalog.products) {
                all.add(p);
            }
        } finally {
            Tracer.end(load);
        }
        Tracer.Span aggregate = Tracer.startChild("aggregate");
        Map<String, long[]> byCategory = new TreeMap<>();
        try {
            for (int round = 0; round < 3; round++) {
                final int weight = round + 1;
                all.sort(Comparator.comparingLong((Catalog.Product p) -> p.priceCents * (p.stock + weight))
                        .thenComparing(p -> p.name));
            }
            for (Catalog.Product p : all) {
                long[] acc = byCategory.computeIfAbsent(p.category, k -> new long[2]);
                acc[0] += p.priceCents * p.stock;
                acc[1]++;
            }
        } finally {
            Tracer.end(aggregate);
        }
        Tracer.Span render = Tracer.startChild("render");
        try {
            StringBuilder csv = new StringBuilder(1 << 20).append("category,revenue,items\n");
            for (Map.Entry<String, long[]> e : byCategory.entrySet()) {
                csv.append(e.getKey()).append(',').append(e.getValue()[0]).append(',').append(e.getValue()[1]).append('\n');
            }
            for (Catalog.Product p : all) {
                csv.append(p.id).append(',').append(p.name).append(',').append(p.priceCents).append('\n');
            }
            return csv.toString().getBytes(StandardCharsets.UTF_8);
        } finally {
            Tracer.end(render);
        }
    }

    // --- plumbing ---

    static void route(HttpServer server, String prefix, String method, String route, Handler handler) {
        OtlpMetrics.Route histogram = metrics.route(method, route);
        String endpoint = method + " " + route;
        server.createContext(prefix, ex -> {
            long start = System.nanoTime();
            Tracer.Span span = Tracer.startRoot(endpoint);
            int status = 200;
            try {
                byte[] body;
                try {
                    body = handler.handle(ex);
                } catch (Exception e) {
                    status = 500;
                    body = e.toString().getBytes(StandardCharsets.UTF_8);
                }
                ex.getResponseHeaders().set("traceparent", "00-" + span.traceId() + "-" + span.spanIdHex() + "-01");
                ex.sendResponseHeaders(status, body.length);
                ex.getResponseBody().write(body);
            } finally {
                ex.close();
                Tracer.end(span);
            }
            histogram.record((System.nanoTime() - start) / 1e9);
            (status == 200 ? SERVED : ERRORS).incrementAndGet();
            synchronized (SLOWEST_LOCK) {
                if (span.durationNanos > slowestNanos) {
                    slowestNanos = span.durationNanos;
                    slowest = String.format("trace=%s span=%s endpoint=%s ms=%.1f",
                            span.traceId(), span.spanIdHex(), endpoint.replace(' ', '_'), span.durationNanos / 1e6);
                }
            }
        });
    }

    static String arg(String[] args, String name, String dflt) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        return dflt;
    }

    public static void main(String[] args) throws Exception {
        int version = Integer.parseInt(arg(args, "--version", "1"));
        metrics = new OtlpMetrics(arg(args, "--metrics", ""));
        catalog = new Catalog(20_000, version >= 2);

        // Without TCP_NODELAY the JDK's server waits for the client's delayed ACK (40 ms)
        // between the response headers and the body of every keep-alive response.
        System.setProperty("sun.net.httpserver.nodelay", "true");
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 256);
        AtomicInteger workers = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(4, r -> {
            Thread t = new Thread(r, "http-worker-" + workers.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        server.setExecutor(pool);
        route(server, "/products/", "GET", "/products/{id}", Shop::product);
        route(server, "/cart", "GET", "/cart", Shop::cart);
        route(server, "/checkout", "POST", "/checkout", Shop::checkout);
        route(server, "/report", "GET", "/report", Shop::report);
        server.start();
        String base = "http://127.0.0.1:" + server.getAddress().getPort();
        System.out.println("shop " + version + ": listening on " + base);
        System.out.flush();

        long started = System.nanoTime();
        Thread exporter = new Thread(() -> {
            while (true) {
                try {
                    // Every 2 s: a demo's load lasts seconds, and a time range only gets
                    // request counts where an export falls inside it.
                    Thread.sleep(2_000);
                } catch (InterruptedException e) {
                    return;
                }
                metrics.export();
            }
        }, "metrics-export");
        exporter.setDaemon(true);
        exporter.start();
        // Serve until the demo closes our standard input (it does when the load is done).
        while (System.in.read() >= 0) {
            // Nothing is expected on it.
        }
        exporter.interrupt();
        metrics.export();
        server.stop(0);
        pool.shutdownNow();
        System.out.printf("shop %d: served %d requests in %.1f s (%d errors)%n", version, SERVED.get(),
                (System.nanoTime() - started) / 1e9, ERRORS.get());
        for (OtlpMetrics.Route r : metrics.routes.values()) {
            System.out.println("endpoint " + r.method + "_" + r.route + " " + r.count());
        }
        synchronized (SLOWEST_LOCK) {
            System.out.println("slowest " + slowest);
        }
    }
}
