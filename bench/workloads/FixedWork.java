import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
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
 * <p>Usage: {@code FixedWork <threads> <requestsPerThread>}. Prints
 * {@code result=<checksum> threads=<n> requests=<n>}.
 */
public final class FixedWork {
    static final int PIPELINE_STAGES = 24;
    static final int CACHE_ENTRIES = 2048;
    static final String[] WORDS = {
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
        "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
    };

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: FixedWork <threads> <requestsPerThread>");
            System.exit(2);
        }
        int threads = Integer.parseInt(args[0]);
        int requests = Integer.parseInt(args[1]);
        Worker[] workers = new Worker[threads];
        Thread[] running = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = new Worker(0x9E3779B97F4A7C15L * (i + 1), requests);
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
                + " requests=" + requests);
    }

    /** One thread's share of the work, with its own state: no locks, no shared caches. */
    static final class Worker implements Runnable {
        final long seed;
        final int requests;
        long checksum;
        Throwable failure;

        Worker(long seed, int requests) {
            this.seed = seed;
            this.requests = requests;
        }

        @Override
        public void run() {
            try {
                SplittableRandom random = new SplittableRandom(seed);
                Context ctx = new Context();
                Stage pipeline = Pipeline.build(PIPELINE_STAGES, new Handler(ctx));
                long sum = 0;
                for (int i = 0; i < requests; i++) {
                    Request request = Request.random(random, i);
                    sum = sum * 31 + pipeline.handle(request);
                    if ((i & 255) == 255) {
                        sum ^= ctx.report();
                    }
                }
                checksum = sum;
            } catch (Throwable t) {
                failure = t;
            }
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
}
