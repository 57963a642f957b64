//! Hostile input against the real `otelprof` binary and the real agent, on the command line,
//! in the files they read and in the options they echo:
//!
//! - a closed pipe behind every command (`otelprof top | head -1`);
//! - terminal escape sequences in function, thread, endpoint and resource names of a profile
//!   crafted with the official OTLP Python classes, and in file names;
//! - FIFOs, sockets and devices in a store directory and given as files, `/dev/zero`, a file
//!   larger than the read limit, names that are not UTF-8, a symbolic-link cycle;
//! - long and hostile values echoed in errors, by the CLI and by the agent;
//! - a full disk under the agent's `out=` directory (a real JVM).
//!
//! Every reading command runs under a deadline and with its address space capped (4 GiB): a
//! regression that reads forever or without bound fails the test instead of the machine.

use otelprof_tests::Tied as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use otelprof_tests::{
    agent_path, cli_path, free_port, jdk17, python, run_with_timeout, scratch_dir, JvmRun,
};

/// Writes OTLP requests with the official Python classes: `evil` (names carrying terminal
/// controls) or `big` (4,000 functions: far more output than a pipe buffers).
const CRAFT: &str = r#"
import sys
from opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2 import ExportProfilesServiceRequest
from opentelemetry.proto.profiles.v1development import profiles_pb2 as P

ESC = "\x1b"
EVIL = {
    "function": "app.Evil." + ESC + "]0;pwned\x07" + ESC + "[2J" + ESC + "[31mred\u202egnp.exe",
    "file": "Evil" + ESC + "[7m.java",
    "thread": "worker\r" + ESC + "[1Afake\u0085c1\u2066iso",
    "endpoint": "GET /x" + ESC + "[8mhidden\u009b31m",
    "service": "shop" + ESC + "[5mblink",
}
kind, out = sys.argv[1], sys.argv[2]
req = ExportProfilesServiceRequest()
d = req.dictionary
strings = ["", "cpu", "nanoseconds", "thread.name", "span_name", "Main.java", "app.Main.main"]
for t in ("mapping_table", "location_table", "function_table", "link_table", "attribute_table", "stack_table"):
    getattr(d, t).add()
def s(text):
    strings.append(text)
    return len(strings) - 1
def attr(key, value):
    a = d.attribute_table.add(key_strindex=key)
    a.value.string_value = value
    return len(d.attribute_table) - 1
rp = req.resource_profiles.add()
p = rp.scope_profiles.add().profiles.add()
p.sample_type.type_strindex = 1; p.sample_type.unit_strindex = 2
p.period_type.type_strindex = 1; p.period_type.unit_strindex = 2
p.period = 10_000_000
p.time_unix_nano = 1_700_000_000_000_000_000
p.duration_nano = 60_000_000_000
p.profile_id = bytes(range(1, 17))
d.function_table.add(name_strindex=6, filename_strindex=5)
main = d.location_table.add(); main.lines.add(function_index=1, line=3)
if kind == "evil":
    rp.resource.attributes.add(key="service.name").value.string_value = EVIL["service"]
    d.function_table.add(name_strindex=s(EVIL["function"]), filename_strindex=s(EVIL["file"]))
    leaf = d.location_table.add(); leaf.lines.add(function_index=2, line=7)
    d.stack_table.add(location_indices=[2, 1])
    attrs = [attr(3, EVIL["thread"]), attr(4, EVIL["endpoint"])]
    p.samples.add(stack_index=1, attribute_indices=attrs, values=[50_000_000])
else:
    rp.resource.attributes.add(key="service.name").value.string_value = "big"
    endpoint = attr(4, "GET /big")
    for i in range(4000):
        name = s("com.example.generated.deeply.nested.Class%05d.aRatherLongMethodName" % i)
        d.function_table.add(name_strindex=name, filename_strindex=5)
        loc = d.location_table.add(); loc.lines.add(function_index=i + 2, line=i)
        d.stack_table.add(location_indices=[i + 2, 1])
        thread = attr(3, "worker-%05d" % i)
        p.samples.add(stack_index=i + 1, attribute_indices=[endpoint, thread], values=[10_000_000 * (1 + i % 7)])
d.string_table.extend(strings)
open(out, "wb").write(req.SerializeToString())
"#;

/// What `evil` names are shown as: escaped, visibly.
const EVIL_FUNCTION_SHOWN: &str = r"app.Evil.\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u{202e}gnp.exe";
const EVIL_THREAD_SHOWN: &str = r"worker\r\x1b[1Afake\u{85}c1\u{2066}iso";
const EVIL_ENDPOINT: &str = "GET /x\x1b[8mhidden\u{9b}31m";
const EVIL_ENDPOINT_SHOWN: &str = r"GET /x\x1b[8mhidden\u{9b}31m";

/// Exit status of a command whose stdout reader went away (128 + SIGPIPE).
const CLOSED_PIPE: i32 = 141;

fn craft(dir: &Path, kind: &str) -> PathBuf {
    let out = dir.join(format!("{kind}.otlp.pb"));
    let status = Command::new(python())
        .args(["-c", CRAFT, kind])
        .arg(&out)
        .status_tied()
        .unwrap();
    assert!(status.success(), "crafting the {kind} profile failed");
    out
}

/// Characters a terminal acts on instead of drawing (the rule of `primitives/src/escape.rs`), bar
/// the line break.
fn is_terminal_control(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// The start of `text`, for failure messages about inputs of 100,000 characters.
fn short(text: &str) -> String {
    match text.char_indices().nth(400) {
        Some((i, _)) => format!("{}… ({} bytes)", &text[..i], text.len()),
        None => text.to_owned(),
    }
}

fn assert_inert(what: &str, text: &str) {
    let bad: Vec<char> = text.chars().filter(|c| is_terminal_control(*c)).collect();
    assert!(
        bad.is_empty(),
        "{what}: {bad:?} reached the terminal:\n{text}"
    );
}

/// `otelprof ARGS` with its address space capped, as configured by `setup`.
fn otelprof_command(args: &[&std::ffi::OsStr]) -> Command {
    let mut cmd = Command::new(cli_path());
    cmd.args(args);
    // SAFETY: the closure runs in the child between fork and exec and calls only setrlimit,
    // which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let cap = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(std::ffi::OsString::from).collect()
}

/// Runs `otelprof` (deadline 120 s): exit code, stdout, stderr.
fn otelprof(args: &[std::ffi::OsString]) -> (i32, String, String) {
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let (code, out, err, _) = run_with_timeout(otelprof_command(&refs), Duration::from_secs(120));
    (code.unwrap_or(-1), out, err)
}

/// Runs `otelprof` with stdout (and, when `stderr_too`, stderr) on a pipe whose reader is
/// gone before the command starts: every write to it fails with EPIPE.
fn otelprof_into_closed_pipe(args: &[std::ffi::OsString], stderr_too: bool) -> (i32, String) {
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = otelprof_command(&refs);
    cmd.stdin(Stdio::null());
    if stderr_too {
        cmd.stderr(writer.try_clone().unwrap());
    } else {
        cmd.stderr(Stdio::piped());
    }
    let child = cmd.stdout(writer).spawn_tied().unwrap();
    drop(cmd); // the parent's copies of the write end
    let out = wait_with_deadline(child, Duration::from_secs(120));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_with_deadline(child: std::process::Child, deadline: Duration) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(deadline) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("otelprof (pid {pid}) did not finish within {deadline:?}");
        }
    }
}

#[test]
fn a_closed_pipe_stops_every_command_quietly() {
    let dir = scratch_dir("hostile-pipe");
    let big = craft(&dir, "big");
    let big = big.to_str().unwrap();
    let svg = dir.join("out.svg");
    let svg_arg = svg.to_str().unwrap();
    for args in [
        vec!["top", "--limit", "0", big],
        vec!["top", "--by-thread", "--limit", "0", big],
        vec!["top", "--by", "span_name", big],
        vec!["drilldown", "--endpoint", "GET /big", "--limit", "0", big],
        vec![
            "diff",
            "--base",
            "service.name=big",
            "--head",
            "service.name=big",
            big,
        ],
        vec!["flame", "-o", svg_arg, big],
    ] {
        let (code, stderr) = otelprof_into_closed_pipe(&os(&args), false);
        assert_eq!(code, CLOSED_PIPE, "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?} must stop quietly");
    }
    // `flame` wrote its file before the line that says so.
    assert!(std::fs::metadata(&svg).unwrap().len() > 1000);

    // Stdout and stderr on the same dead pipe (`2>&1 | head`), with a line for stderr too.
    let (code, _) = otelprof_into_closed_pipe(&os(&["top", "/nonexistent", big]), true);
    assert_eq!(code, CLOSED_PIPE);
    // Only stderr dead: the error cannot be told, the status still says it.
    let mut cmd = otelprof_command(&[std::ffi::OsStr::new("top"), "/nonexistent".as_ref()]);
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = cmd
        .stderr(writer)
        .stdout(Stdio::piped())
        .spawn_tied()
        .unwrap();
    drop(cmd);
    assert_eq!(
        wait_with_deadline(child, Duration::from_secs(60))
            .status
            .code(),
        Some(1)
    );

    // As people meet it: `otelprof top … | head -1`.
    let mut child = otelprof_command(&[
        "top".as_ref(),
        "--limit".as_ref(),
        "0".as_ref(),
        big.as_ref(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn_tied()
    .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("Type: cpu"), "{first}");
    let out = wait_with_deadline(child, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(CLOSED_PIPE));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A stdout that fails for another reason is an error, not a success and not a panic.
    let devfull = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = otelprof_command(&["top".as_ref(), big.as_ref()])
        .stdout(devfull)
        .stderr(Stdio::piped())
        .spawn_tied()
        .and_then(|child| child.wait_with_output())
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("otelprof: cannot write to standard output: No space left on device"),
        "{err}"
    );
}

#[test]
fn names_from_a_profile_cannot_steer_the_terminal() {
    let dir = scratch_dir("hostile-names");
    let evil = craft(&dir, "evil");
    let e = evil.to_str().unwrap();
    for (args, shown) in [
        (vec!["top", e], EVIL_FUNCTION_SHOWN),
        (vec!["top", "--by-thread", e], EVIL_THREAD_SHOWN),
        (vec!["top", "--by", "span_name", e], EVIL_ENDPOINT_SHOWN),
        (vec!["top", "--by", "service.name", e], r"shop\x1b[5mblink"),
        (
            vec!["drilldown", "--endpoint", EVIL_ENDPOINT, e],
            EVIL_FUNCTION_SHOWN,
        ),
    ] {
        let (code, out, err) = otelprof(&os(&args));
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_inert(&format!("{args:?} stdout"), &out);
        assert_inert(&format!("{args:?} stderr"), &err);
        assert!(out.contains(shown), "{args:?} must show {shown}:\n{out}");
    }
    // An error that quotes what was asked for.
    let (code, out, err) = otelprof(&os(&["drilldown", "--endpoint", "GET /\x1b[2Jnope", e]));
    assert_eq!(code, 1);
    assert_inert("drilldown error", &format!("{out}{err}"));
    assert!(err.contains(r"span_name=GET /\x1b[2Jnope"), "{err}");
    // An error that quotes attribute values from the store.
    let (code, out, err) = otelprof(&os(&["top", "--where", "service.name=nope", e]));
    assert_eq!(code, 1);
    assert_inert("--where error", &format!("{out}{err}"));
    assert!(err.contains(r"service.name has: shop\x1b[5mblink"), "{err}");
    // A file name that carries an escape sequence, in a `skipped` line.
    let named = dir.join("named");
    std::fs::create_dir_all(&named).unwrap();
    std::fs::copy(&evil, named.join("good.otlp.pb")).unwrap();
    std::fs::write(named.join("\x1b[31mbad\x1b[0m.otlp.pb"), b"x").unwrap();
    let (code, out, err) = otelprof(&["top".into(), named.clone().into_os_string()]);
    assert_eq!(code, 0, "{err}");
    assert_inert("skipped line", &format!("{out}{err}"));
    assert!(
        err.contains(r"\x1b[31mbad\x1b[0m.otlp.pb: not OTLP profiles"),
        "{err}"
    );
    // The SVG flame graph stays well-formed XML (XML 1.0 cannot carry ESC at all).
    let svg = dir.join("evil.svg");
    let (code, _, err) = otelprof(&[
        "flame".into(),
        "-o".into(),
        svg.clone().into_os_string(),
        evil.clone().into_os_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let parsed = Command::new(python())
        .args([
            "-c",
            "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])",
        ])
        .arg(&svg)
        .output_tied()
        .unwrap();
    assert!(
        parsed.status.success(),
        "the SVG is not XML: {}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains(r"\x1b[31mred"), "names are shown escaped");
}

#[test]
fn only_regular_files_are_read_and_only_so_much() {
    let dir = scratch_dir("hostile-files");
    let evil = craft(&dir, "evil");
    let store = dir.join("store");
    std::fs::create_dir_all(store.join("profiles/2025-01-01")).unwrap();
    std::fs::copy(&evil, store.join("profiles/2025-01-01/good.otlp.pb")).unwrap();
    let fifo = store.join("profiles/2025-01-01/stuck.otlp.pb");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status_tied()
        .unwrap()
        .success());
    let _socket =
        std::os::unix::net::UnixListener::bind(store.join("profiles/sock.otlp.pb")).unwrap();
    // Sparse: 600 MiB on paper, nothing on disk.
    let huge = store.join("profiles/huge.otlp.pb");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(600 << 20)
        .unwrap();

    // In a directory: reported, never opened (a FIFO would block), the good file still read.
    let (code, out, err) = otelprof(&["top".into(), store.clone().into_os_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("app.Main.main"), "{out}");
    for (name, reason) in [
        ("stuck.otlp.pb", "a FIFO, not a regular file: never opened"),
        ("sock.otlp.pb", "a socket, not a regular file: never opened"),
        (
            "huge.otlp.pb",
            "larger than 512 MiB, the most a profile file is read",
        ),
    ] {
        assert!(
            err.lines()
                .any(|l| l.starts_with("otelprof: skipped ")
                    && l.contains(&format!("{name}: {reason}"))),
            "{name}: {err}"
        );
    }

    // Given by name: refused with the reason.
    for (path, reason) in [
        (fifo.clone(), "a FIFO, not a regular file"),
        (
            PathBuf::from("/dev/zero"),
            "a character device, not a regular file",
        ),
        (
            PathBuf::from("/dev/null"),
            "a character device, not a regular file",
        ),
    ] {
        let started = Instant::now();
        let (code, _, err) = otelprof(&["top".into(), path.clone().into_os_string()]);
        assert_eq!(code, 1, "{}: {err}", path.display());
        assert!(
            err.starts_with(&format!("otelprof: skipped {}: {reason}", path.display())),
            "{err}"
        );
        assert!(err.contains("otelprof: no profile could be read"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}

#[test]
fn names_that_are_not_utf8_are_read_and_shown_escaped() {
    let dir = scratch_dir("hostile-latin1");
    let evil = craft(&dir, "evil");
    let store = dir.join("latin1");
    std::fs::create_dir_all(&store).unwrap();
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.otlp.pb");
    std::fs::copy(&evil, store.join(latin1)).unwrap();
    let broken = std::ffi::OsStr::from_bytes(b"\xff\xfe.pb.gz");
    std::fs::write(store.join(broken), b"not gzip").unwrap();
    let (code, out, err) = otelprof(&["top".into(), store.clone().into_os_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 samples") && out.contains("app.Main.main"),
        "{out}"
    );
    assert_inert("latin1 names", &format!("{out}{err}"));
    assert!(
        err.contains(&format!(
            "otelprof: skipped {}/\\xff\\xfe.pb.gz: not a pprof profile",
            store.display()
        )),
        "{err}"
    );
}

#[test]
fn a_symbolic_link_cycle_is_walked_once() {
    let dir = scratch_dir("hostile-cycle");
    let evil = craft(&dir, "evil");
    let store = dir.join("cycle");
    std::fs::create_dir_all(store.join("a/b")).unwrap();
    std::fs::copy(&evil, store.join("a/b/p.otlp.pb")).unwrap();
    std::os::unix::fs::symlink("../..", store.join("a/b/up")).unwrap();
    std::os::unix::fs::symlink("loop", store.join("loop")).unwrap();
    let (code, out, err) = otelprof(&["top".into(), store.clone().into_os_string()]);
    assert_eq!(code, 0, "{err}");
    // Read once, not once per way round the loop.
    assert!(
        out.contains("1 profile,") && out.contains("1 samples"),
        "{out}"
    );
    assert_eq!(
        err,
        format!(
            "otelprof: skipped {}/a/b/up: already read through another path (a symbolic link \
             leads back to it)\n",
            store.display()
        )
    );
    // A link to itself, given by name.
    let (code, _, err) = otelprof(&["top".into(), store.join("loop").into_os_string()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("loop: cannot read: Too many levels of symbolic links"),
        "{err}"
    );
}

#[test]
fn values_quoted_in_errors_are_short_and_inert() {
    let hostile = format!("\x1b]0;pwned\x07{}", "9".repeat(100_000));
    let (code, out, err) = otelprof(&os(&[
        "receive",
        "--store",
        "/nonexistent/store",
        "--grpc",
        &hostile,
    ]));
    assert_eq!(code, 1);
    assert_inert("receive error", &format!("{out}{err}"));
    assert!(
        err.starts_with(r#"otelprof: --grpc "\x1b]0;pwned\x0799999"#),
        "{}",
        short(&err)
    );
    assert!(err.len() < 300, "{} bytes: {}", err.len(), short(&err));
    // Errors made by the library quote in full; the line still stays readable.
    let (code, _, err) = otelprof(&os(&["top", "--where", &hostile, "/nonexistent"]));
    assert_eq!(code, 1);
    assert_inert("--where error", &err);
    assert!(err.len() < 1200, "{} bytes", err.len());
    assert!(err.contains("characters cut"), "{}", short(&err));
}

/// The agent's side: option values and sizes in its log lines.
#[test]
fn the_agent_echoes_options_short_and_says_sizes_in_units() {
    let hold = hold_program();
    let long = "9".repeat(10_000);
    for (options, expect) in [
        (
            format!("cpu={long}ms"),
            format!("option 'cpu={}…'", "9".repeat(64)),
        ),
        (
            "cpu=\x1b[31mred".to_owned(),
            r"option 'cpu=\x1b[31mred': not a duration".to_owned(),
        ),
        (
            format!("{long}=1"),
            format!("unknown option '{}…'", "9".repeat(64)),
        ),
    ] {
        let run = JvmRun::new(jdk17(), hold.to_str().unwrap())
            .agent(&options)
            .args(&["1"])
            .run();
        run.assert_clean_exit();
        let lines = run.agent_lines();
        assert_eq!(lines.len(), 1, "{}", short(&lines.join("\n")));
        assert!(lines[0].contains(&expect), "{}", short(&lines.join("\n")));
        assert!(
            lines[0].ends_with("; profiling is off"),
            "{}",
            short(&lines.join("\n"))
        );
        assert!(lines[0].len() < 400, "{}", lines[0].len());
        assert_inert("agent option error", lines[0]);
    }
    // queue=64k: 64 KiB wherever the queue is named (it used to be "0 MiB").
    let port = free_port(); // nothing listens there
    let run = JvmRun::new(jdk17(), hold.to_str().unwrap())
        .agent(&format!(
            "endpoint=http://user:secret@127.0.0.1:{port},queue=64k,period=1s"
        ))
        .args(&["2500"])
        .run();
    run.assert_clean_exit();
    let text = run.agent_lines().join("\n");
    assert!(
        text.contains("(http/protobuf, gzip, queue 64 KiB)"),
        "start line: {text}"
    );
    assert!(text.contains("keeping at most 64 KiB"), "{text}");
    assert!(
        !text.contains("0 MiB") && !text.contains("secret"),
        "{text}"
    );
}

/// `Hold.java`, run by the source launcher: sleeps `ms` milliseconds, or with `stdin`, until
/// its standard input ends.
fn hold_program() -> PathBuf {
    let dir = scratch_dir("hold");
    let src = dir.join("Hold.java");
    std::fs::write(
        &src,
        "public class Hold { public static void main(String[] a) throws Exception {\n\
         if (a[0].equals(\"stdin\")) { while (System.in.read() != -1) {} }\n\
         else { Thread.sleep(Long.parseLong(a[0])); } } }\n",
    )
    .unwrap();
    src
}

/// Makes `dir` fail writes and heals it. As root, a tmpfs of 256 KiB filled to the last block
/// (the real thing: ENOSPC); elsewhere the directory is moved away and a file put in its place
/// (ENOTDIR), which needs no privilege.
enum Breakage {
    Tmpfs { dir: PathBuf, fill: PathBuf },
    Moved { dir: PathBuf, away: PathBuf },
}

impl Breakage {
    fn prepare(dir: &Path) -> Option<Breakage> {
        std::fs::create_dir_all(dir).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status_tied()
            .is_ok_and(|s| s.success());
        mounted.then(|| Breakage::Tmpfs {
            dir: dir.to_path_buf(),
            fill: dir.join("fill"),
        })
    }

    fn break_it(&mut self) {
        match self {
            Breakage::Tmpfs { fill, .. } => {
                let mut f = std::fs::File::create(&*fill).unwrap();
                let block = vec![0u8; 4096];
                while f.write_all(&block).is_ok() {}
                let _ = f.sync_all();
            }
            Breakage::Moved { dir, away } => {
                std::fs::rename(&*dir, &*away).unwrap();
                std::fs::write(&*dir, b"not a directory").unwrap();
            }
        }
    }

    fn heal(&mut self) {
        match self {
            Breakage::Tmpfs { fill, .. } => std::fs::remove_file(&*fill).unwrap(),
            Breakage::Moved { dir, away } => {
                std::fs::remove_file(&*dir).unwrap();
                std::fs::rename(&*away, &*dir).unwrap();
            }
        }
    }
}

impl Drop for Breakage {
    fn drop(&mut self) {
        if let Breakage::Tmpfs { dir, .. } = self {
            let _ = Command::new("umount").arg(&*dir).status_tied();
        }
    }
}

fn profiles_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |rd| {
        rd.flatten()
            .filter(|e| e.file_name().as_bytes().ends_with(b".pb.gz"))
            .count()
    })
}

/// Waits for a line that `accept`s, keeping every line seen.
fn wait_for_line(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    deadline: Duration,
    accept: impl Fn(&str) -> bool,
) -> String {
    let until = Instant::now() + deadline;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if accept(&line) {
                    return line;
                }
            }
            Err(_) => panic!(
                "no such line within {deadline:?}; the agent said:\n{}",
                seen.join("\n")
            ),
        }
    }
}

#[test]
fn a_failing_output_directory_is_logged_once_then_counted() {
    let root = scratch_dir("hostile-disk");
    let out = root.join("out");
    let mut breakage = Breakage::prepare(&out).unwrap_or_else(|| Breakage::Moved {
        dir: out.clone(),
        away: root.join("out.away"),
    });
    let full_disk = matches!(breakage, Breakage::Tmpfs { .. });
    eprintln!(
        "failing writes by {}",
        if full_disk {
            "a full tmpfs (ENOSPC)"
        } else {
            "a file in place of the directory (ENOTDIR): mounting a tmpfs needs root"
        }
    );
    let hold = hold_program();
    let mut child = Command::new(jdk17().java())
        .arg(format!(
            "-agentpath:{}=out={},period=1s,wall=50ms",
            agent_path().display(),
            out.display()
        ))
        .arg(&hold)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_tied()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let minute = Duration::from_secs(60);
    // The agent names the directory as it resolved it.
    let resolved = std::fs::canonicalize(&out).unwrap();
    let subject = format!("otelprof: writing pprof files to {}", resolved.display());

    // Writes work first: wait for a profile, then break the directory.
    let started = Instant::now();
    while profiles_in(&out) == 0 {
        assert!(
            started.elapsed() < minute,
            "no profile written within a minute"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    breakage.break_it();
    let first = wait_for_line(&lines, &mut seen, minute, |l| l.starts_with(&subject));
    let reason = if full_disk {
        "No space left on device"
    } else {
        "Not a directory"
    };
    assert!(
        first.starts_with(&format!("{subject} failed: {reason}")),
        "{first}"
    );
    assert!(
        first.contains("reported at most once every 1 min"),
        "{first}"
    );

    // Five more periods of failures: nothing more is said about them.
    let quiet_until = Instant::now() + Duration::from_secs(5);
    while let Ok(line) = lines.recv_timeout(quiet_until.saturating_duration_since(Instant::now())) {
        seen.push(line);
    }
    breakage.heal();
    let back = wait_for_line(&lines, &mut seen, minute, |l| l.starts_with(&subject));
    let failures: u64 = back
        .strip_prefix(&format!("{subject} works again, after "))
        .and_then(|rest| rest.strip_suffix(" failures"))
        .unwrap_or_else(|| panic!("not a recovery line: {back}"))
        .parse()
        .unwrap();
    // At least two profile types in each of the failed periods (the first one and the five).
    assert!(failures >= 4, "{back}");
    let before = profiles_in(&out);
    while profiles_in(&out) == before {
        assert!(
            started.elapsed() < 3 * minute,
            "no profile after the disk healed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    drop(child.stdin.take()); // Hold ends
    let status = child.wait().unwrap();
    reader.join().unwrap();
    seen.extend(lines.try_iter());
    assert!(status.success(), "{status}: {}", seen.join("\n"));
    let about_writes: Vec<&String> = seen.iter().filter(|l| l.starts_with(&subject)).collect();
    assert_eq!(
        about_writes.len(),
        2,
        "one line to say it, one to say it ended: {seen:#?}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("cannot write profile")),
        "{seen:#?}"
    );
    // The count in the log is the agent's own count.
    let stop = seen
        .iter()
        .find(|l| l.contains("stopped;"))
        .unwrap_or_else(|| panic!("no stop line: {seen:#?}"));
    assert!(
        stop.contains(&format!(" write_errors={failures} ")),
        "{failures} failures told, but: {stop}"
    );
}
