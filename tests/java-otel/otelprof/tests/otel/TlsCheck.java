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
        return where + " published=" + (published == address) + " trace=" + trace + " span=" + span + " valid=" + valid
                + " flags=" + flags + " attrs=" + attrText + " cleared=" + afterClear;
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
