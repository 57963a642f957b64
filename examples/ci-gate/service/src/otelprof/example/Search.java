package otelprof.example;

/** {@code GET /search?q=...}: every product scored against the query, the best listed. */
final class Search {
    private Search() {}

    static String run(Catalog catalog, String query) {
        int best = -1;
        long bestScore = Long.MIN_VALUE;
        for (int i = 0; i < catalog.names.length; i++) {
            long s = score(catalog.names[i], query);
            if (s > bestScore) {
                bestScore = s;
                best = i;
            }
        }
        return "<p>" + Html.escape(best < 0 ? "" : catalog.names[best]) + "</p>";
    }

    /** A similarity of two strings: the work of a search, in this method's own loop. */
    static long score(String name, String query) {
        long h = 0;
        for (int r = 0; r < 64; r++) {
            for (int i = 0; i < name.length(); i++) {
                h = h * 31 + (name.charAt(i) ^ (query.isEmpty() ? r : query.charAt((i + r) % query.length())));
            }
        }
        return h;
    }
}
