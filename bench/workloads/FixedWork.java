import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import java.util.zip.CRC32;

/**
 * A fixed amount of CPU work on a fixed number of threads, for the overhead benchmark
 * ({@code bench/overhead.py}). Fixed work, not fixed time: a profiler's overhead shows up as a
 * longer wall time (and more CPU time) for the same work.
 *
 * <p>Each thread serves {@code requestsPerThread} synthetic requests. A request is built as a
 * string, then passes through a pipeline of {@link #PIPELINE_STAGES} middleware stages (distinct
 * frames, virtual calls), whose innermost handler parses a nested JSON-like body with a recursive
 * descent parser, hashes strings, allocates, and keeps a bounded LRU cache. Java stacks are
 * about 30 to 45 frames deep, the shape a sampler walks in a typical service.
 *
 * <p>Everything is seeded per thread, so every run does exactly the same work and prints the
 * same checksum; the harness checks this, which proves the runs it compares did identical work.
 *
 * <p>The {@code compute} kind replaces the service-like request with a steadier one: a chain of
 * {@link #CHAIN_DEPTH} virtual calls (8 step classes, each frame doing a little arithmetic) over
 * an arithmetic leaf loop, no allocation, no collections. Its JIT-compiled code comes out the
 * same in every run, where the service request's does not: identical runs of the service kind
 * differ by up to ±30 % in steady-state CPU time on the benchmark machine, which buries a 1 %
 * effect; the compute kind's stacks are as deep, so a sampler does the same work per sample.
 *
 * <p>Usage: {@code FixedWork <threads> <requestsPerThread> [<warmupPerThread> [service|compute]]}. Prints
 * {@code result=<checksum> threads=<n> requests=<n>}, and {@code window cpu_s=<s> wall_s=<s>}:
 * the whole process's CPU time and the wall time from the moment every thread has finished its
 * warm-up requests (default none) to the moment every thread has finished all its requests. With
 * a warm-up long enough for JIT compilation to be over, the window measures the steady state,
 * without the run-to-run spread of the JIT's own CPU time.
 */
public final class FixedWork {
    static final int PIPELINE_STAGES = 24;
    static final int CHAIN_DEPTH = 28;
    static final int LEAF_ITERATIONS = 2000;
    static final java.util.List<String> KINDS = java.util.List.of("service", "compute");
    static final int CACHE_ENTRIES = 2048;
    static final String[] WORDS = {
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
        "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
    };

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 2 || args.length > 4 || (args.length == 4 && !KINDS.contains(args[3]))) {
            System.err.println("usage: FixedWork <threads> <requestsPerThread> [<warmupPerThread> [service|compute]]");
            System.exit(2);
        }
        int threads = Integer.parseInt(args[0]);
        int requests = Integer.parseInt(args[1]);
        int warmup = args.length >= 3 ? Integer.parseInt(args[2]) : 0;
        boolean compute = args.length == 4 && args[3].equals("compute");
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long[] marks = new long[4]; // cpu, wall at the window's start; cpu, wall at its end
        int[] trips = {0};
        CyclicBarrier window = new CyclicBarrier(threads, () -> {
            marks[2 * trips[0]] = os.getProcessCpuTime();
            marks[2 * trips[0] + 1] = System.nanoTime();
            trips[0]++;
        });
        Worker[] workers = new Worker[threads];
        Thread[] running = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = new Worker(0x9E3779B97F4A7C15L * (i + 1), warmup, requests, window, compute);
            running[i] = new Thread(workers[i], "fixed-work-" + i);
            running[i].start();
        }
        long checksum = 0;
        for (int i = 0; i < threads; i++) {
            running[i].join();
            if (workers[i].failure != null) {
                throw new IllegalStateException("worker " + i + " failed", workers[i].failure);
            }
            // Addition commutes: the checksum does not depend on which thread finishes first.
            checksum += workers[i].checksum;
        }
        System.out.println("result=" + Long.toHexString(checksum) + " threads=" + threads
                + " requests=" + requests + " warmup=" + warmup + " kind=" + (compute ? "compute" : "service"));
        System.out.printf("window cpu_s=%.4f wall_s=%.4f%n", (marks[2] - marks[0]) / 1e9, (marks[3] - marks[1]) / 1e9);
    }

    /** One thread's share of the work, with its own state: no locks, no shared caches. */
    static final class Worker implements Runnable {
        final long seed;
        final int warmup;
        final int requests;
        final CyclicBarrier window;
        final boolean compute;
        long checksum;
        Throwable failure;

        Worker(long seed, int warmup, int requests, CyclicBarrier window, boolean compute) {
            this.seed = seed;
            this.warmup = warmup;
            this.requests = requests;
            this.window = window;
            this.compute = compute;
        }

        @Override
        public void run() {
            try {
                long sum;
                if (compute) {
                    Step[] chain = Step.chain(new SplittableRandom(seed));
                    sum = Step.serve(chain, seed, 0, warmup, 0);
                    window.await();
                    sum = Step.serve(chain, seed, warmup, warmup + requests, sum);
                } else {
                    SplittableRandom random = new SplittableRandom(seed);
                    Context ctx = new Context();
                    Stage pipeline = Pipeline.build(PIPELINE_STAGES, new Handler(ctx));
                    sum = serve(random, ctx, pipeline, 0, warmup, 0);
                    window.await();
                    sum = serve(random, ctx, pipeline, warmup, warmup + requests, sum);
                }
                window.await();
                checksum = sum;
            } catch (Throwable t) {
                failure = t;
                window.reset(); // the other threads stop waiting (BrokenBarrierException)
            }
        }

        static long serve(SplittableRandom random, Context ctx, Stage pipeline, int from, int to, long sum) {
            for (int i = from; i < to; i++) {
                Request request = Request.random(random, i);
                sum = sum * 31 + pipeline.handle(request);
                if ((i & 255) == 255) {
                    sum ^= ctx.report();
                }
            }
            return sum;
        }
    }

    /** A synthetic request: a path, a tenant, headers and a nested body to parse. */
    static final class Request {
        final String path;
        final String tenant;
        final String[] headers;
        final String body;
        String route = "";
        int attributes;

        Request(String path, String tenant, String[] headers, String body) {
            this.path = path;
            this.tenant = tenant;
            this.headers = headers;
            this.body = body;
        }

        static Request random(SplittableRandom random, int sequence) {
            String path = "/api/v" + (1 + random.nextInt(3)) + "/" + WORDS[random.nextInt(WORDS.length)]
                    + "/" + random.nextInt(5000);
            String tenant = WORDS[random.nextInt(WORDS.length)] + "-" + random.nextInt(64);
            String[] headers = new String[4 + random.nextInt(5)];
            for (int i = 0; i < headers.length; i++) {
                headers[i] = "x-" + WORDS[random.nextInt(WORDS.length)] + ": " + Long.toHexString(random.nextLong());
            }
            StringBuilder body = new StringBuilder(256);
            writeValue(body, random, 2 + random.nextInt(7));
            return new Request(path, tenant, headers, body.toString());
        }

        /** Writes a JSON-like value nested at most {@code depth} levels: the parser recurses as deep. */
        static void writeValue(StringBuilder out, SplittableRandom random, int depth) {
            int kind = depth <= 0 ? random.nextInt(2) : random.nextInt(4);
            switch (kind) {
                case 0:
                    out.append(random.nextInt(100000));
                    break;
                case 1:
                    out.append('"').append(WORDS[random.nextInt(WORDS.length)]).append('"');
                    break;
                case 2: {
                    out.append('[');
                    int n = 1 + random.nextInt(4);
                    for (int i = 0; i < n; i++) {
                        if (i > 0) {
                            out.append(',');
                        }
                        writeValue(out, random, depth - 1);
                    }
                    out.append(']');
                    break;
                }
                default: {
                    out.append('{');
                    int n = 1 + random.nextInt(3);
                    for (int i = 0; i < n; i++) {
                        if (i > 0) {
                            out.append(',');
                        }
                        out.append('"').append(WORDS[random.nextInt(WORDS.length)]).append("\":");
                        writeValue(out, random, depth - 1);
                    }
                    out.append('}');
                    break;
                }
            }
        }
    }

    /** Per-thread state the stages update: counters and an LRU cache of responses. */
    static final class Context {
        final Map<String, Integer> routeHits = new HashMap<>();
        final Map<String, Long> tenantBytes = new HashMap<>();
        final LinkedHashMap<String, String> responses = new LinkedHashMap<>(CACHE_ENTRIES, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
                return size() > CACHE_ENTRIES;
            }
        };
        final List<String> audit = new ArrayList<>();

        /** Sorts the recent audit records and folds them into a number, then forgets them. */
        long report() {
            String[] records = audit.toArray(new String[0]);
            Arrays.sort(records);
            long h = 17;
            for (String r : records) {
                h = h * 1_000_003 + r.hashCode();
            }
            audit.clear();
            return h ^ routeHits.size() ^ tenantBytes.size();
        }
    }

    /** A middleware stage; each calls the next one, so a request's stack holds all of them. */
    abstract static class Stage {
        final Stage next;

        Stage(Stage next) {
            this.next = next;
        }

        abstract long handle(Request request);
    }

    static final class Pipeline {
        /** Chains {@code n} stages of eight kinds in front of {@code last}. */
        static Stage build(int n, Stage last) {
            Stage s = last;
            for (int i = n - 1; i >= 0; i--) {
                switch (i % 8) {
                    case 0: s = new Authenticate(s); break;
                    case 1: s = new Route(s); break;
                    case 2: s = new RateLimit(s); break;
                    case 3: s = new Decompress(s); break;
                    case 4: s = new Trace(s); break;
                    case 5: s = new Validate(s); break;
                    case 6: s = new Meter(s); break;
                    default: s = new Annotate(s); break;
                }
            }
            return s;
        }
    }

    static final class Authenticate extends Stage {
        Authenticate(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            int token = 0;
            for (String h : r.headers) {
                token = token * 31 + h.hashCode();
            }
            return next.handle(r) ^ token;
        }
    }

    static final class Route extends Stage {
        Route(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            int slash = r.path.lastIndexOf('/');
            r.route = r.path.substring(0, slash);
            return next.handle(r) + r.route.length();
        }
    }

    static final class RateLimit extends Stage {
        long tokens = 1_000_000;

        RateLimit(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            tokens -= r.body.length();
            if (tokens < 0) {
                tokens += 1_000_000;
            }
            return next.handle(r) + (tokens & 7);
        }
    }

    static final class Decompress extends Stage {
        final CRC32 crc = new CRC32();

        Decompress(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            crc.reset();
            for (int i = 0; i < r.tenant.length(); i++) {
                crc.update(r.tenant.charAt(i));
            }
            return next.handle(r) * 3 + crc.getValue();
        }
    }

    static final class Trace extends Stage {
        long spans;

        Trace(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            spans++;
            long result = next.handle(r);
            return result ^ (spans << 7);
        }
    }

    static final class Validate extends Stage {
        Validate(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            char first = r.body.charAt(0);
            if (first != '[' && first != '{' && first != '"' && !Character.isDigit(first)) {
                throw new IllegalArgumentException("bad body: " + r.body);
            }
            return next.handle(r) + first;
        }
    }

    static final class Meter extends Stage {
        final long[] histogram = new long[32];

        Meter(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            histogram[Integer.numberOfLeadingZeros(r.body.length())]++;
            return next.handle(r) - histogram[r.headers.length];
        }
    }

    static final class Annotate extends Stage {
        Annotate(Stage next) { super(next); }

        @Override
        long handle(Request r) {
            r.attributes++;
            return next.handle(r) * 7 + r.attributes;
        }
    }

    /** The innermost stage: parses the body, hashes, caches and records. */
    static final class Handler extends Stage {
        final Context ctx;

        Handler(Context ctx) {
            super(null);
            this.ctx = ctx;
        }

        @Override
        long handle(Request r) {
            Parser parser = new Parser(r.body);
            long value = parser.parseValue();
            if (parser.pos != r.body.length()) {
                throw new IllegalStateException("trailing input at " + parser.pos + ": " + r.body);
            }
            ctx.routeHits.merge(r.route, 1, Integer::sum);
            ctx.tenantBytes.merge(r.tenant, (long) r.body.length(), Long::sum);
            String key = r.tenant + '|' + r.path;
            String response = ctx.responses.get(key);
            if (response == null) {
                response = render(r, value);
                ctx.responses.put(key, response);
            }
            if ((value & 3) == 0) {
                ctx.audit.add(r.tenant + ' ' + r.route + ' ' + value);
            }
            return fnv1a(response) + value;
        }

        static String render(Request r, long value) {
            StringBuilder sb = new StringBuilder(128);
            sb.append("{\"route\":\"").append(r.route).append("\",\"tenant\":\"").append(r.tenant)
                    .append("\",\"value\":").append(value).append(",\"headers\":[");
            for (int i = 0; i < r.headers.length; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                sb.append(r.headers[i].length());
            }
            return sb.append("]}").toString();
        }

        static long fnv1a(String s) {
            long h = 0xcbf29ce484222325L;
            for (int i = 0; i < s.length(); i++) {
                h ^= s.charAt(i);
                h *= 0x100000001b3L;
            }
            return h;
        }
    }

    /** Recursive descent over the body; one Java frame pair per nesting level. */
    static final class Parser {
        final String s;
        int pos;

        Parser(String s) {
            this.s = s;
        }

        long parseValue() {
            char c = s.charAt(pos);
            if (c == '[') {
                return parseArray();
            } else if (c == '{') {
                return parseObject();
            } else if (c == '"') {
                return parseString().hashCode();
            } else {
                return parseNumber();
            }
        }

        long parseArray() {
            pos++;
            List<Long> items = new ArrayList<>();
            while (true) {
                items.add(parseValue());
                char c = s.charAt(pos++);
                if (c == ']') {
                    break;
                }
            }
            long h = items.size();
            for (long v : items) {
                h = h * 31 + v;
            }
            return h;
        }

        long parseObject() {
            pos++;
            Map<String, Long> fields = new HashMap<>();
            while (true) {
                String name = parseString();
                pos++; // ':'
                fields.merge(name, parseValue(), Long::sum);
                char c = s.charAt(pos++);
                if (c == '}') {
                    break;
                }
            }
            long h = 0;
            for (Map.Entry<String, Long> e : fields.entrySet()) {
                h += e.getKey().hashCode() * 17L + e.getValue();
            }
            return h;
        }

        String parseString() {
            int end = s.indexOf('"', pos + 1);
            String v = s.substring(pos + 1, end);
            pos = end + 1;
            return v;
        }

        long parseNumber() {
            long v = 0;
            while (pos < s.length() && Character.isDigit(s.charAt(pos))) {
                v = v * 10 + (s.charAt(pos++) - '0');
            }
            return v;
        }
    }
    /**
     * One frame of the compute kind's call chain: a little arithmetic, then the next step (a
     * virtual call through 8 classes: megamorphic, so every step stays a real frame), or the
     * leaf loop at the end of the chain.
     */
    abstract static class Step {
        abstract long run(Step[] chain, int at, long x);

        final long next(Step[] chain, int at, long x) {
            return at + 1 < chain.length ? chain[at + 1].run(chain, at + 1, x) : leaf(x);
        }

        static long leaf(long x) {
            for (int i = 0; i < LEAF_ITERATIONS; i++) {
                x = (x ^ (x >>> 29)) * 0xBF58476D1CE4E5B9L + i;
            }
            return x;
        }

        static Step[] chain(SplittableRandom random) {
            Step[] kinds = {new S0(), new S1(), new S2(), new S3(), new S4(), new S5(), new S6(), new S7()};
            Step[] chain = new Step[CHAIN_DEPTH];
            for (int i = 0; i < chain.length; i++) {
                chain[i] = kinds[random.nextInt(kinds.length)];
            }
            return chain;
        }

        static long serve(Step[] chain, long seed, int from, int to, long sum) {
            for (int i = from; i < to; i++) {
                sum = sum * 31 + chain[0].run(chain, 0, seed + i);
            }
            return sum;
        }
    }

    static final class S0 extends Step {
        long run(Step[] c, int at, long x) {
            return next(c, at, x * 3 + 1) ^ at;
        }
    }

    static final class S1 extends Step {
        long run(Step[] c, int at, long x) {
            return next(c, at, Long.rotateLeft(x, 7)) + 1;
        }
    }

    static final class S2 extends Step {
        long run(Step[] c, int at, long x) {
            return next(c, at, x ^ 0x5DEECE66DL) * 5;
        }
    }

    static final class S3 extends Step {
        long run(Step[] c, int at, long x) {
            return next(c, at, x + at) - 3;
        }
    }

    static final class S4 extends Step {
        long run(Step[] c, int at, long x) {
            return Long.rotateRight(next(c, at, x * 7), 3);
        }
    }

    static final class S5 extends Step {
        long run(Step[] c, int at, long x) {
            return next(c, at, x - 11) ^ 0xABCDL;
        }
    }

    static final class S6 extends Step {
        long run(Step[] c, int at, long x) {
            return next(c, at, ~x) + at;
        }
    }

    static final class S7 extends Step {
        long run(Step[] c, int at, long x) {
            return next(c, at, x >>> 1 | x << 63) * 9;
        }
    }
}
