package otelprof.example;

import java.util.Random;

/** The products: names with characters a page must escape. */
final class Catalog {
    final String[] names;

    Catalog(int size) {
        Random random = new Random(1);
        names = new String[size];
        String[] words = {"garden <hose>", "kitchen & bath", "\"quoted\" lamp", "toy's box", "tools"};
        for (int i = 0; i < size; i++) {
            names[i] = words[random.nextInt(words.length)] + " #" + i;
        }
    }
}
