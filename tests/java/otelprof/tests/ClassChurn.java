package otelprof.tests;

import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;

/**
 * Defines {@link Churned} in a new class loader over and over, runs it, drops the loader and
 * collects garbage now and then, so classes (and their jmethodIDs) are unloaded while the
 * profiler samples them.
 *
 * <p>Usage: {@code ClassChurn <seconds>}
 */
public final class ClassChurn {
    static volatile long sink;

    static final class OneClassLoader extends ClassLoader {
        private final byte[] bytes;

        OneClassLoader(byte[] bytes) {
            super(ClassChurn.class.getClassLoader());
            this.bytes = bytes;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.equals("otelprof.tests.Churned")) {
                synchronized (getClassLoadingLock(name)) {
                    Class<?> c = findLoadedClass(name);
                    return c != null ? c : defineClass(name, bytes, 0, bytes.length);
                }
            }
            return super.loadClass(name, resolve);
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        byte[] bytes;
        try (InputStream in = ClassChurn.class.getResourceAsStream("/otelprof/tests/Churned.class")) {
            bytes = in.readAllBytes();
        }
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        long loads = 0;
        while (System.nanoTime() < deadline) {
            Class<?> c = new OneClassLoader(bytes).loadClass("otelprof.tests.Churned");
            Method burn = c.getMethod("burn", int.class);
            sink += (long) burn.invoke(null, 200_000);
            if (++loads % 200 == 0) {
                System.gc();
            }
        }
        System.gc();
        long unloaded = ManagementFactory.getClassLoadingMXBean().getUnloadedClassCount();
        System.out.println("loads=" + loads + " unloaded=" + unloaded);
    }
}
