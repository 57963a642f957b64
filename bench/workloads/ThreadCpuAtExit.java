import java.lang.reflect.Method;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;

/**
 * Runs another workload's {@code main}, then prints the CPU time each group of the process's
 * threads has used so far, for the start-up benchmark ({@code bench/startup_cost.py}): a
 * profiler's fixed cost is spread over the JVM's main thread (where an agent's
 * {@code Agent_OnLoad} and VMInit run), the agent's own threads, and the JIT compilers.
 *
 * <p>Usage: {@code ThreadCpuAtExit <MainClass> [args...]}. Prints one line,
 * {@code thread_cpu_ms group=ms ...}, with groups {@code main} (the thread named
 * {@code java}, which launches the JVM and runs its start-up), {@code otelprof} (every thread
 * whose name starts with {@code otelprof}), {@code jit} (C1 and C2 compiler threads),
 * {@code workload} (every other thread still alive). Each thread's CPU time is the first field
 * of {@code /proc/self/task/TID/schedstat}, in nanoseconds; threads that ended before the line
 * is printed are not in it (the process's own CPU time covers them).
 */
public final class ThreadCpuAtExit {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            throw new IllegalArgumentException("usage: ThreadCpuAtExit <MainClass> [args...]");
        }
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        main.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        Map<String, Long> byGroup = new TreeMap<>();
        for (String g : new String[] {"main", "otelprof", "jit", "workload"}) {
            byGroup.put(g, 0L);
        }
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path task : tasks) {
                String name;
                long ns;
                try {
                    name = Files.readString(task.resolve("comm")).trim();
                    ns = Long.parseLong(Files.readString(task.resolve("schedstat")).trim().split(" ")[0]);
                } catch (java.io.IOException | NumberFormatException e) {
                    continue; // ended while listed
                }
                byGroup.merge(group(name), ns, Long::sum);
            }
        }
        StringBuilder line = new StringBuilder("thread_cpu_ms");
        byGroup.forEach((g, ns) -> line.append(String.format(" %s=%.1f", g, ns / 1e6)));
        System.out.println(line);
    }

    private static String group(String name) {
        if (name.equals("java")) {
            return "main";
        }
        if (name.startsWith("otelprof")) {
            return "otelprof";
        }
        if (name.startsWith("C1 Compiler") || name.startsWith("C2 Compiler")) {
            return "jit";
        }
        return "workload";
    }
}
