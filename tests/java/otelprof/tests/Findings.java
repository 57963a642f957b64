package otelprof.tests;

import java.io.OutputStream;
import java.lang.reflect.Method;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import java.util.logging.StreamHandler;

/**
 * Request loops that each plant one known performance pattern, for the findings tests, and
 * one that plants none (a pure computation). Every request does the same arithmetic
 * ({@link #compute}); the pattern is what it does besides:
 *
 * <ul>
 *   <li>{@code exceptions}: {@code OrderService.parse} parses a quantity with
 *       {@code Integer.parseInt} and catches the {@code NumberFormatException} of the half of
 *       the inputs that are not numbers;
 *   <li>{@code stacktraces}: {@code AuditLog.record} logs each request with java.util.logging
 *       and a formatter that prints the source class and method (found from the stack);
 *   <li>{@code regex}: {@code Validator.check} uses {@code String.matches} and
 *       {@code replaceAll}, which compile their pattern on every call;
 *   <li>{@code locks}: {@code SessionCache.touch} updates a
 *       {@code Collections.synchronizedMap} from every worker, computing inside the lock;
 *   <li>{@code reflection}: {@code Dispatcher.call} looks up the class and method by name and
 *       invokes it on each request;
 *   <li>{@code compute}: nothing else.
 * </ul>
 *
 * <p>Usage: {@code Findings <pattern>[+<pattern>…] <threads> <seconds>}: several patterns
 * joined by {@code +} are all planted, each request doing each in turn.
 */
public final class Findings {
    static volatile long sink;

    static long compute(long x, int n) {
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        return x;
    }

    static final class OrderService {
        static int parse(String quantity) {
            try {
                return Integer.parseInt(quantity);
            } catch (NumberFormatException e) {
                return 1;
            }
        }
    }

    static final class AuditLog {
        final Logger logger;

        AuditLog(String name) {
            logger = Logger.getLogger("audit." + name);
            logger.setUseParentHandlers(false);
            StreamHandler h = new StreamHandler(OutputStream.nullOutputStream(), new SimpleFormatter());
            logger.addHandler(h);
        }

        void record(long i) {
            logger.info("request " + i);
        }
    }

    static final class Validator {
        static boolean check(String s) {
            return s.matches("[a-z]+-[0-9]+") && !s.replaceAll("\\s+", " ").isEmpty();
        }
    }

    static final Map<Long, Long> SESSIONS = Collections.synchronizedMap(new HashMap<>());

    static final class SessionCache {
        static void touch(long key) {
            SESSIONS.merge(key % 64, key, (a, b) -> compute(a + b, 500_000));
        }
    }

    public static final class Target {
        public long handle(long x) {
            return x + 1;
        }
    }

    static final class Dispatcher {
        static long call(long x) throws Exception {
            Class<?> c = Class.forName("otelprof.tests.Findings$Target");
            Method m = c.getMethod("handle", long.class);
            return (Long) m.invoke(c.getDeclaredConstructor().newInstance(), x);
        }
    }

    static long request(String pattern, long i, AuditLog log) throws Exception {
        long x = compute(i, 2_000);
        switch (pattern) {
            case "exceptions":
                x += OrderService.parse((i & 1) == 0 ? Long.toString(i % 100) : "n/a");
                break;
            case "stacktraces":
                log.record(i);
                break;
            case "regex":
                x += Validator.check("order-" + i) ? 1 : 0;
                break;
            case "locks":
                SessionCache.touch(i);
                break;
            case "reflection":
                x += Dispatcher.call(i);
                break;
            case "compute":
                x = compute(x, 2_000);
                break;
            default:
                throw new IllegalArgumentException("no pattern " + pattern);
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        String[] patterns = args[0].split("\\+");
        int threads = Integer.parseInt(args[1]);
        long end = System.currentTimeMillis() + Long.parseLong(args[2]) * 1000L;
        Thread[] workers = new Thread[threads];
        long[] requests = new long[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            AuditLog log = new AuditLog("worker-" + t);
            workers[t] = new Thread(() -> {
                long x = 0;
                long i = 0;
                try {
                    while (System.currentTimeMillis() < end) {
                        for (String pattern : patterns) {
                            x += request(pattern, i, log);
                        }
                        i++;
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                requests[id] = i;
                sink += x;
            }, "worker-" + t);
            workers[t].start();
        }
        long total = 0;
        for (int t = 0; t < threads; t++) {
            workers[t].join();
            total += requests[t];
        }
        System.out.println("requests " + total);
    }
}
