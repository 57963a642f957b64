package otelprof.demo;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/** The shop's products. */
final class Catalog {
    static final class Product {
        final long id;
        final String name;
        final String category;
        final long priceCents;
        int stock;

        Product(long id, String name, String category, long priceCents, int stock) {
            this.id = id;
            this.name = name;
            this.category = category;
            this.priceCents = priceCents;
            this.stock = stock;
        }
    }

    static final String[] CATEGORIES = {"books", "garden", "kitchen", "music", "sports", "toys", "tools"};

    final Product[] products;
    private final Map<Long, Product> byId = new HashMap<>();
    /** Version 2 "simplified" the lookup: see {@link #findProduct}. */
    private final boolean linearLookup;

    Catalog(int size, boolean linearLookup) {
        this.linearLookup = linearLookup;
        Random r = new Random(42);
        products = new Product[size];
        for (int i = 0; i < size; i++) {
            long id = 100_000 + i * 7L;
            String category = CATEGORIES[r.nextInt(CATEGORIES.length)];
            products[i] = new Product(id, category + " item " + i, category, 199 + r.nextInt(20_000), 50 + r.nextInt(500));
            byId.put(id, products[i]);
        }
    }

    long idAt(int index) {
        return products[Math.floorMod(index, products.length)].id;
    }

    /**
     * The product with this id. Version 1 looks it up in a hash map; version 2 scans the
     * array (the deliberate regression of the demo: O(n) per lookup).
     */
    Product findProduct(long id) {
        if (!linearLookup) {
            return byId.get(id);
        }
        Product[] all = products;
        for (int i = 0; i < all.length; i++) {
            if (all[i].id == id) {
                return all[i];
            }
        }
        return null;
    }

    List<Product> related(Product p, int n) {
        List<Product> out = new ArrayList<>(n);
        long base = p.id;
        for (int i = 1; out.size() < n && i < 4 * n; i++) {
            Product q = findProduct(base + 7L * i * 13);
            if (q != null && q.category.equals(p.category)) {
                out.add(q);
            }
        }
        return out;
    }
}
