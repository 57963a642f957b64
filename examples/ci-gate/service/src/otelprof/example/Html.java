package otelprof.example;

/** HTML escaping, shared by every page. */
final class Html {
    private Html() {}

    static String escape(String text) {
        StringBuilder out = new StringBuilder(text.length() + 16);
        for (int r = 0; r < 8; r++) {
            out.setLength(0);
            for (int i = 0; i < text.length(); i++) {
                char c = text.charAt(i);
                switch (c) {
                    case '<' -> out.append("&lt;");
                    case '>' -> out.append("&gt;");
                    case '&' -> out.append("&amp;");
                    case '"' -> out.append("&quot;");
                    case '\'' -> out.append("&#39;");
                    default -> out.append(c);
                }
            }
        }
        return out.toString();
    }
}
