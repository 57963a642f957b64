package otelprof.example;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

/**
 * The service the CI gate example measures: a JDK-only HTTP server with two endpoints that burn
 * CPU the way a page renderer and a search do. {@code GET /products} renders the catalogue as
 * HTML, escaping every name ({@link Pages#render}); {@code GET /search} scores every product
 * against a query ({@link Search#score}).
 *
 * <p>Usage: {@code Storefront <port>}; runs until the JVM is stopped.
 */
public final class Storefront {
    private Storefront() {}

    static final Catalog CATALOG = new Catalog(400);

    static void respond(HttpExchange exchange, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "text/html; charset=utf-8");
        exchange.sendResponseHeaders(200, bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[0]);
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 64);
        server.createContext("/products", ex -> respond(ex, Pages.render(CATALOG)));
        server.createContext("/search", ex -> {
            String q = ex.getRequestURI().getQuery();
            respond(ex, Search.run(CATALOG, q == null ? "" : q));
        });
        server.setExecutor(Executors.newFixedThreadPool(2));
        server.start();
        System.out.println("storefront listening on " + port);
    }
}
