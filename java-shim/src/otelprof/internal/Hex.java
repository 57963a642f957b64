package otelprof.internal;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodType;

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

    private static final byte[] DIGITS = new byte[128];

    static {
        java.util.Arrays.fill(DIGITS, (byte) -1);
        for (int i = 0; i < 10; i++) {
            DIGITS['0' + i] = (byte) i;
        }
        for (int i = 0; i < 6; i++) {
            DIGITS['a' + i] = (byte) (10 + i);
            DIGITS['A' + i] = (byte) (10 + i);
        }
    }

    /**
     * Parses the 16 hex digits of {@code s} at {@code from} (W3C ids are 16 or 32 digits).
     * Returns 0 for anything else: ids of zero mean "none" everywhere. Two independent halves
     * and a table, so the CPU can work on both at once; no branch per digit.
     */
    public static long parse16(String s, int from) {
        if (s.length() < from + 16) {
            return 0;
        }
        long hi = 0, lo = 0;
        int bad = 0;
        for (int i = 0; i < 8; i++) {
            int a = s.charAt(from + i), b = s.charAt(from + 8 + i);
            int da = a < 128 ? DIGITS[a] : -1, db = b < 128 ? DIGITS[b] : -1;
            bad |= da | db;
            hi = (hi << 4) | (da & 15);
            lo = (lo << 4) | (db & 15);
        }
        return bad < 0 ? 0 : (hi << 32) | lo;
    }

    private static final java.lang.invoke.VarHandle BIG_ENDIAN_LONG =
            java.lang.invoke.MethodHandles.byteArrayViewVarHandle(long[].class, java.nio.ByteOrder.BIG_ENDIAN);

    /*
     * Direct reads of a Latin-1 String's bytes through Unsafe (see Unsafes: JDK 23 and
     * earlier): no copy and no view handle, which a profile of a span-heavy loop put at most of
     * a span's parse cost. The String layout (a byte[] "value" and a byte "coder", Latin-1 = 0)
     * is checked at start by parsing known ids; anything unexpected turns the path off.
     */
    private static final MethodHandle GET_REF = Unsafes.method("getObject",
            MethodType.methodType(Object.class, Object.class, long.class));
    private static final MethodHandle GET_LONG = Unsafes.method("getLong",
            MethodType.methodType(long.class, Object.class, long.class));
    private static final MethodHandle GET_BYTE = Unsafes.method("getByte",
            MethodType.methodType(byte.class, Object.class, long.class));
    private static final long VALUE = fieldOffset("value", byte[].class);
    private static final long CODER = fieldOffset("coder", byte.class);
    private static final long BYTES_BASE = byteArrayBase();
    private static final boolean LITTLE = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN;
    private static final boolean DIRECT = checkDirect();

    /** Whether ids are read in place from the strings (for tests). */
    public static boolean directReads() {
        return DIRECT;
    }

    private static long fieldOffset(String name, Class<?> type) {
        MethodHandle offset = Unsafes.method("objectFieldOffset",
                MethodType.methodType(long.class, java.lang.reflect.Field.class));
        try {
            java.lang.reflect.Field f = String.class.getDeclaredField(name);
            return offset == null || f.getType() != type ? -1 : (long) offset.invoke(f);
        } catch (Throwable e) {
            return -1;
        }
    }

    private static long byteArrayBase() {
        MethodHandle base = Unsafes.method("arrayBaseOffset", MethodType.methodType(int.class, Class.class));
        try {
            return base == null ? -1 : (int) base.invoke(byte[].class);
        } catch (Throwable e) {
            return -1;
        }
    }

    private static boolean checkDirect() {
        if (GET_REF == null || GET_LONG == null || GET_BYTE == null || VALUE < 0 || CODER < 0 || BYTES_BASE < 0) {
            return false;
        }
        try {
            String trace = new String("0af7651916cd43dd8448eb211c80319c".toCharArray());
            return latin1(trace)
                    && direct16(trace, 0) == 0x0af7651916cd43ddL && direct16(trace, 16) == 0x8448eb211c80319cL
                    && direct16(new String("ffffffffffffffff".toCharArray()), 0) == -1L;
        } catch (Throwable e) {
            return false;
        }
    }

    private static boolean latin1(String s) {
        try {
            return (byte) GET_BYTE.invokeExact((Object) s, CODER) == 0;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** 16 digits at {@code from} of a Latin-1 string with at least {@code from + 16} chars. */
    private static long direct16(String s, int from) {
        try {
            Object bytes = (Object) GET_REF.invokeExact((Object) s, VALUE);
            long at = BYTES_BASE + from;
            long hi = (long) GET_LONG.invokeExact(bytes, at);
            long lo = (long) GET_LONG.invokeExact(bytes, at + 8);
            return LITTLE
                    ? (swar8(Long.reverseBytes(hi)) << 32) | swar8(Long.reverseBytes(lo))
                    : (swar8(hi) << 32) | swar8(lo);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Like {@link #parse16}, for ids that are known to be well-formed lowercase hex (the
     * OpenTelemetry SDK's): decodes 8 digits at a time in a long (SWAR), reading the string's
     * bytes in place where allowed, else from a copy in {@code scratch}. Malformed input gives
     * a wrong id, never an exception.
     */
    @SuppressWarnings("deprecation") // String.getBytes(int, int, byte[], int): a plain Latin-1 copy
    public static long parse16Trusted(String s, int from, byte[] scratch) {
        if (s.length() < from + 16 || scratch.length < 16) {
            return 0;
        }
        if (DIRECT && latin1(s)) {
            return direct16(s, from);
        }
        s.getBytes(from, from + 16, scratch, 0);
        return (swar8((long) BIG_ENDIAN_LONG.get(scratch, 0)) << 32) | swar8((long) BIG_ENDIAN_LONG.get(scratch, 8));
    }

    /** 8 ASCII hex digits (first in the high byte) to their 32-bit value. */
    private static long swar8(long x) {
        long letter = (x & 0x4040404040404040L) >>> 6; // 1 in bytes holding a-f / A-F
        long v = (x & 0x0f0f0f0f0f0f0f0fL) + letter * 9;
        v = (v | (v >>> 4)) & 0x00ff00ff00ff00ffL;
        v = (v | (v >>> 8)) & 0x0000ffff0000ffffL;
        return (v | (v >>> 16)) & 0x00000000ffffffffL;
    }

    public static String toHex(long v) {
        String s = Long.toHexString(v);
        return s.length() == 16 ? s : "0".repeat(16 - s.length()) + s;
    }
}
