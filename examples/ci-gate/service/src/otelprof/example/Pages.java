package otelprof.example;

/** HTML for {@code GET /products}. */
final class Pages {
    private Pages() {}

    /**
     * How many times each name goes through the escaper. Version 1 escapes it once; a careless
     * change that escapes it again in every layout pass (say 4: double escaping, and slower)
     * makes {@code render} slower without a line of its own growing: its time is in
     * {@link Html#escape}, which search shares.
     */
    static final int ESCAPE_PASSES = 1;

    static String render(Catalog catalog) {
        StringBuilder page = new StringBuilder(64 * 1024).append("<ul>");
        for (String name : catalog.names) {
            String escaped = name;
            for (int pass = 0; pass < ESCAPE_PASSES; pass++) {
                escaped = Html.escape(escaped);
            }
            page.append("<li>").append(escaped).append("</li>");
        }
        return page.append("</ul>").toString();
    }
}
