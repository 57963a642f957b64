package otelprof.tests.otel;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import otelprof.ThreadContext;

/**
 * Requests that wait for a pool. Request threads each run a loop of spans ("GET /orders"):
 * a little work of their own, then one of three things, by the first argument:
 *
 * <ul>
 *   <li>{@code executor}: submit a 20 ms computation to a pool of ONE worker thread and wait
 *       for its {@code Future}; with four requesters the task mostly waits in the pool's queue
 *       (a starved pool);
 *   <li>{@code connections}: take a "connection" from a pool of one (an {@code
 *       ArrayBlockingQueue}), compute 10 ms holding it, give it back: the others wait in
 *       {@code take};
 *   <li>{@code fanout}: the executor case with as many workers as requesters: requests still wait
 *       for their futures, but only as long as their tasks run, so no pool is starved.
 * </ul>
 *
 * <p>The pool's workers run each task in the request's span, as OpenTelemetry's context
 * propagation does. Usage: {@code PoolStarvation <executor|connections|fanout> <requesters>
 * <seconds>}.
 */
public final class PoolStarvation {
    static volatile long sink;

    static void spin(long nanos) {
        long end = System.nanoTime() + nanos;
        long x = 1;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        sink += x;
    }

    /** The task a pool runs for a request: 20 ms of work in the request's span. */
    static final class PriceQuote {
        static long quote(long hi, long lo, long span) {
            ThreadContext.set(hi, lo, span, span, true);
            try {
                spin(20_000_000L);
                return sink;
            } finally {
                ThreadContext.clear();
            }
        }
    }

    /** A pool of one connection, as a blocking queue. */
    static final class ConnectionPool {
        final ArrayBlockingQueue<Object> free = new ArrayBlockingQueue<>(1);

        ConnectionPool() {
            free.add(new Object());
        }

        Object borrow() throws InterruptedException {
            return free.take();
        }

        void giveBack(Object c) {
            free.add(c);
        }
    }

    /** A request handler: its own work, then the pooled part. */
    static final class OrderService {
        final ExecutorService pool;
        final ConnectionPool connections;

        OrderService(ExecutorService pool, ConnectionPool connections) {
            this.pool = pool;
            this.connections = connections;
        }

        void handle(long hi, long lo, long span) throws Exception {
            spin(2_000_000L);
            if (pool != null) {
                Future<Long> f = pool.submit(() -> PriceQuote.quote(hi, lo, span));
                sink += f.get();
            } else {
                Object c = connections.borrow();
                try {
                    spin(10_000_000L);
                } finally {
                    connections.giveBack(c);
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        int requesters = Integer.parseInt(args[1]);
        double seconds = Double.parseDouble(args[2]);
        if (!ThreadContext.isActive()) {
            throw new IllegalStateException("the otelprof agent is not active");
        }
        ExecutorService pool = null;
        ConnectionPool connections = null;
        switch (mode) {
            case "executor" -> pool = Executors.newFixedThreadPool(1);
            case "fanout" -> pool = Executors.newFixedThreadPool(requesters);
            case "connections" -> connections = new ConnectionPool();
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
        OrderService service = new OrderService(pool, connections);
        long endAt = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] threads = new Thread[requesters];
        long[] done = new long[requesters];
        for (int t = 0; t < requesters; t++) {
            final int id = t;
            threads[t] = new Thread(() -> {
                long n = 0;
                while (System.nanoTime() < endAt) {
                    long hi = 0x2000 + n, lo = Thread.currentThread().getId();
                    long span = (n << 20) | lo | 1;
                    ThreadContext.set(hi, lo, span, span, true);
                    ThreadContext.setEndpoint(span, "GET /orders");
                    try {
                        service.handle(hi, lo, span);
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    } finally {
                        ThreadContext.clear();
                    }
                    n++;
                }
                done[id] = n;
            }, "request-" + t);
            threads[t].start();
        }
        long total = 0;
        for (int t = 0; t < requesters; t++) {
            threads[t].join();
            total += done[t];
        }
        if (pool != null) {
            pool.shutdown();
        }
        System.out.println("requests " + total);
    }
}
