package otelprof.tests.otel;

import java.util.SplittableRandom;
import otelprof.internal.Hex;

/**
 * Checks the shim's id parsing against {@link Long#parseUnsignedLong}: random ids, ids at an
 * offset in a trace id, strings that are not Latin-1 inside (those take the copying path), and
 * the validating parser on malformed input. Prints {@code direct=<bool> checked=<n>
 * failures=<n>} and a line per failure.
 */
public final class HexCheck {
    private static int failures;
    private static int checked;

    private static void expect(String what, long got, long want) {
        checked++;
        if (got != want) {
            failures++;
            if (failures <= 20) {
                System.out.printf("FAIL %s: got %016x, want %016x%n", what, got, want);
            }
        }
    }

    public static void main(String[] args) {
        SplittableRandom random = new SplittableRandom(42);
        byte[] scratch = new byte[16];
        for (int i = 0; i < 200_000; i++) {
            long hi = random.nextLong(), lo = random.nextLong();
            if (i % 7 == 0) {
                hi &= 0x00ff00ff00ff00ffL; // many zero digits
            }
            String a = String.format("%016x", hi), b = String.format("%016x", lo);
            String trace = a + b;
            expect("span " + a, Hex.parse16Trusted(a, 0, scratch), Long.parseUnsignedLong(a, 16));
            expect("trace high " + trace, Hex.parse16Trusted(trace, 0, scratch), hi);
            expect("trace low " + trace, Hex.parse16Trusted(trace, 16, scratch), lo);
            expect("validating " + a, Hex.parse16(a, 0), hi);
            expect("validating upper " + a, Hex.parse16(a.toUpperCase(), 0), hi);
            // Not Latin-1: a UTF-16 string whose first 16 chars are the id.
            String wide = a + "\u20ac";
            expect("utf16 " + wide, Hex.parse16Trusted(wide, 0, scratch), hi);
        }
        expect("short", Hex.parse16Trusted("abc", 0, scratch), 0);
        expect("short at offset", Hex.parse16Trusted("0123456789abcdef", 8, scratch), 0);
        expect("malformed", Hex.parse16("0123456789abcdeg", 0), 0);
        expect("malformed wide", Hex.parse16("0123456789abcde\u20ac", 0), 0);
        System.out.printf("direct=%s checked=%d failures=%d%n", Hex.directReads(), checked, failures);
    }
}
