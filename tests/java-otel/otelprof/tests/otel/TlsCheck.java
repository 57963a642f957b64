package otelprof.tests.otel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import otelprof.ThreadContext;
import otelprof.internal.NativeBridge;
import otelprof.internal.ThreadRecord;

/**
 * Checks what an out-of-process reader of OTEP 4947 would see: {@code otel_thread_ctx_v1} of
 * this thread points at this thread's record, and the record holds the ids just set, in the
 * OTEP layout (trace id, span id, valid = 1, flags, attrs with the local root's hex id).
 * On JDK 21+ it also runs the check on a virtual thread, across a park (remount).
 * Needs {@code --add-exports java.base/sun.nio.ch=ALL-UNNAMED} to read the buffer's address.
 */
public final class TlsCheck {
    static String check(String where) throws Exception {
        ThreadContext.set(0x0af7651916cd43ddL, 0x8448eb211c80319cL, 0xb7ad6b7169203331L, 0x1122334455667788L, true);
        Thread.sleep(5); // a virtual thread unmounts here and may come back on another carrier
        ByteBuffer record = ThreadRecord.current().bufferForTests();
        // sun.nio.ch.DirectBuffer.address(), by reflection: javac --release cannot export it.
        long address = (long) Class.forName("sun.nio.ch.DirectBuffer").getMethod("address").invoke(record);
        long published = NativeBridge.publishedRecordAddress();
        record.order(ByteOrder.BIG_ENDIAN);
        String trace = Long.toHexString(record.getLong(0)) + "/" + Long.toHexString(record.getLong(8));
        String span = Long.toHexString(record.getLong(16));
        int valid = record.get(24), flags = record.get(25);
        int attrsSize = record.order(ByteOrder.nativeOrder()).getShort(26);
        byte[] attrs = new byte[attrsSize];
        record.get(28, attrs);
        String attrText = "key" + attrs[0] + "/len" + attrs[1] + "/" + new String(attrs, 2, attrs.length - 2, "US-ASCII");
        ThreadContext.clear();
        int afterClear = record.get(24);
        return where + " sequence=" + sequence(record) + " published=" + (published == address) + " trace=" + trace
                + " span=" + span + " valid=" + valid + " flags=" + flags + " attrs=" + attrText + " cleared=" + afterClear;
    }

    /** The record as a reader sees it: trace/span/valid/flags/local root (from the attrs). */
    static String state(ByteBuffer record) {
        ByteBuffer r = record.duplicate().order(ByteOrder.BIG_ENDIAN);
        byte[] root = new byte[16];
        r.get(30, root);
        return Long.toHexString(r.getLong(0)) + Long.toHexString(r.getLong(8)) + "/" + Long.toHexString(r.getLong(16))
                + "/" + r.get(24) + "/" + r.get(25) + "/" + new String(root, java.nio.charset.StandardCharsets.US_ASCII);
    }

    /**
     * A run of writes that takes every path of the writer (a new trace, a span switch within one
     * trace, a change of flags only, a set after clear), each checked against what it must
     * leave in the record. "ok", or the first step that differs.
     */
    static String sequence(ByteBuffer record) {
        long t1 = 0x1111111111111111L, t2 = 0x2222222222222222L;
        long[][] steps = {
            // traceHigh, traceLow, span, root, sampled (1/0); all zero: clear()
            {t1, t2, 0xa1L, 0x1000000000000001L, 1},
            {t1, t2, 0xa2L, 0x1000000000000001L, 1},
            {t1, t2, 0xa3L, 0x1000000000000001L, 0},
            {t1, t2, 0xa4L, 0x1000000000000001L, 0},
            {t2, t1, 0xb1L, 0x2000000000000002L, 1},
            {t2, t1, 0xb2L, 0x3000000000000003L, 1},
            {0, 0, 0, 0, 0},
            {t2, t1, 0xb3L, 0x3000000000000003L, 1},
            {t2, t1, 0xb4L, 0x3000000000000003L, 1},
            {0, 0, 0, 0, 0},
            {t1, t2, 0xa5L, 0x1000000000000001L, 1},
        };
        String last = null;
        for (int i = 0; i < steps.length; i++) {
            long[] s = steps[i];
            String want;
            if (s[0] == 0) {
                ThreadContext.clear();
                want = last.replaceFirst("/1/[01]/", "/0/0/"); // the header cleared, the ids untouched
            } else {
                ThreadContext.set(s[0], s[1], s[2], s[3], s[4] == 1);
                want = Long.toHexString(s[0]) + Long.toHexString(s[1]) + "/" + Long.toHexString(s[2]) + "/1/" + s[4]
                        + "/" + String.format("%016x", s[3]);
            }
            String got = state(record);
            if (!got.equals(want)) {
                return "step" + i + ":got:" + got + ":want:" + want;
            }
            last = got;
        }
        ThreadContext.clear();
        return "ok";
    }

    public static void main(String[] args) throws Exception {
        System.out.println(check("platform"));
        if (Runtime.version().feature() >= 21) {
            Thread vt = (Thread) Thread.class.getMethod("startVirtualThread", Runnable.class).invoke(null, (Runnable) () -> {
                try {
                    System.out.println(check("virtual"));
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            vt.join();
        }
    }
}
