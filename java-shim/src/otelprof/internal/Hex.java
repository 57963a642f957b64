package otelprof.internal;

/** Hex conversions without allocation on the paths that run per context switch. */
public final class Hex {
    private Hex() {}

    /**
     * The 8 lowercase ASCII hex digits of {@code v}, packed big-endian into a long (the first
     * digit in the most significant byte). Branch-free: spread the nibbles into bytes, then add
     * '0' or 'a' - 10 per byte.
     */
    public static long asciiHex(int v) {
        long x = v & 0xffffffffL;
        x = ((x & 0xffff0000L) << 16) | (x & 0xffffL);
        x = ((x & 0x0000ff000000ff00L) << 8) | (x & 0x000000ff000000ffL);
        x = ((x & 0x00f000f000f000f0L) << 4) | (x & 0x000f000f000f000fL);
        long letters = ((x + 0x0606060606060606L) >>> 4) & 0x0101010101010101L;
        return x + 0x3030303030303030L + letters * ('a' - '0' - 10);
    }

    /**
     * Parses {@code len} (at most 16) hex digits of {@code s} starting at {@code from}.
     * Returns 0 for any non-hex character: ids of zero mean "none" everywhere.
     */
    public static long parse(CharSequence s, int from, int len) {
        long v = 0;
        for (int i = from; i < from + len; i++) {
            int d = digit(s.charAt(i));
            if (d < 0) {
                return 0;
            }
            v = (v << 4) | d;
        }
        return v;
    }

    private static int digit(char c) {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    }

    public static String toHex(long v) {
        String s = Long.toHexString(v);
        return s.length() == 16 ? s : "0".repeat(16 - s.length()) + s;
    }
}
