package otelprof.internal;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * The reply of the jar's {@code agentmain}, in the format of the native agent's attach replies
 * (docs/attach.md): line 1 {@code ok} or {@code error: <reason>}, then {@code key: value}
 * lines, written to the file the caller created ({@code reply=<path>}), which is opened for
 * writing without following a link and never created; without one, logged.
 */
public final class ReplyFile {
    private ReplyFile() {}

    /** A reply being made. */
    public static final class Reply {
        final String error;
        final List<String[]> lines = new ArrayList<>();

        private Reply(String error) {
            this.error = error;
        }

        public static Reply ok() {
            return new Reply(null);
        }

        public static Reply error(String reason) {
            return new Reply(reason == null ? "unknown" : reason);
        }

        public Reply with(String key, String value) {
            lines.add(new String[] {key, value});
            return this;
        }

        String text() {
            StringBuilder b = new StringBuilder(error == null ? "ok" : "error: " + oneLine(error)).append('\n');
            for (String[] kv : lines) {
                b.append(oneLine(kv[0])).append(": ").append(oneLine(kv[1])).append('\n');
            }
            return b.toString();
        }
    }

    private static String oneLine(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            b.append(Character.isISOControl(c) ? ' ' : c);
        }
        return b.toString();
    }

    /** The reply file named in the agent argument ({@code reply=<absolute path>}), or null. */
    public static String replyPath(String args) {
        String path = null;
        for (String item : items(args)) {
            if (item.startsWith("reply=/")) {
                path = item.substring("reply=".length());
            }
        }
        return path;
    }

    /** Why the agent argument is not just {@code reply=<absolute path>}, or null. */
    public static String argumentProblem(String args) {
        for (String item : items(args)) {
            if (!item.startsWith("reply=/")) {
                return "unknown argument '" + item
                        + "': loaded into a running JVM the jar takes only reply=<absolute path>"
                        + " (the native agent is started with otelprof attach PID start)";
            }
        }
        return null;
    }

    private static List<String> items(String args) {
        List<String> out = new ArrayList<>();
        if (args != null) {
            for (String item : args.split(",")) {
                if (!item.trim().isEmpty()) {
                    out.add(item.trim());
                }
            }
        }
        return out;
    }

    /** Writes {@code reply} to {@code path} (see the class docs), or logs it. */
    public static void deliver(Reply reply, String path) {
        String text = reply.text();
        if (path == null) {
            for (String line : text.split("\n")) {
                Log.warn("attach: " + line);
            }
            return;
        }
        Path p = Path.of(path);
        try {
            if (!Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
                throw new IOException("not a regular file");
            }
            try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING, LinkOption.NOFOLLOW_LINKS)) {
                ByteBuffer bytes = ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
                while (bytes.hasRemaining()) {
                    ch.write(bytes);
                }
                ch.force(true);
            }
        } catch (IOException | RuntimeException e) {
            Log.warn("cannot write the attach reply to " + path + ": " + e + "; it was: " + text.replace('\n', '|'));
        }
    }
}
