//! Harness for the cross-component tests: real JVMs with the real agent, read back with
//! independent tools (`go tool pprof`).
//!
//! A test declares, in one [`JvmRun`], the JDK, the main class with its arguments, the agent
//! options and extra JVM flags; [`JvmRun::run`] compiles the Java workloads once, runs the
//! JVM with a deadline (killing it on timeout), and returns what it printed and the profiles
//! it wrote. [`pprof_top`] reads those profiles with `go tool pprof -top`.
//!
//! Prerequisites, installed by `scripts/test.sh`: `cargo build --release` (the agent and CLI),
//! Debian `golang-go`, OpenJDK 17 and Temurin 25. A missing prerequisite fails the test with a
//! message saying what to install; nothing is skipped.

pub mod attach;
pub mod live;
pub mod receive;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `target/release`, where `cargo build --release` puts the agent and the CLI.
pub fn release_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    dir.join("release")
}

pub fn agent_path() -> PathBuf {
    let p = release_dir().join("libotelprof.so");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release` first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// `target/release/otelprof.jar`, built by `cargo build --release` (native/build.rs).
pub fn jar_path() -> PathBuf {
    let p = release_dir().join("otelprof.jar");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release` with a JDK on the PATH",
        p.display()
    );
    p
}

/// The real OpenTelemetry Java SDK 1.30.1 (scripts/fetch-otel-java.sh fetches and caches it).
pub fn otel_sdk_jar() -> &'static Path {
    static JAR: OnceLock<PathBuf> = OnceLock::new();
    JAR.get_or_init(|| {
        if let Some(p) = std::env::var_os("OTELPROF_OTEL_JAR") {
            return PathBuf::from(p);
        }
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/fetch-otel-java.sh"))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "scripts/fetch-otel-java.sh failed");
        let p = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        assert!(p.is_file(), "{} missing", p.display());
        p
    })
}

/// Compiles `tests/java-otel` against the real OpenTelemetry SDK and otelprof.jar (for the
/// direct API), once per test process.
pub fn otel_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = scratch_dir("otel-classes");
        let mut sources = Vec::new();
        collect_java(&repo_root().join("tests/java-otel"), &mut sources);
        let cp = std::env::join_paths([otel_sdk_jar().to_path_buf(), jar_path()]).unwrap();
        let status = Command::new(jdk17().home.join("bin/javac"))
            .args(["--release", "17", "-g", "-cp"])
            .arg(cp)
            .arg("-d")
            .arg(&out)
            .args(&sources)
            .status()
            .unwrap();
        assert!(status.success(), "javac of tests/java-otel failed");
        out
    })
}

pub fn cli_path() -> PathBuf {
    let p = release_dir().join("otelprof");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release` first",
        p.display()
    );
    p
}

/// Runs `otelprof ARGS`: exit code (-1 when killed by a signal), stdout, stderr.
pub fn otelprof(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cli_path()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A JDK the tests run on.
#[derive(Clone, Debug)]
pub struct Jdk {
    pub name: &'static str,
    pub home: PathBuf,
}

impl Jdk {
    pub fn java(&self) -> PathBuf {
        self.home.join("bin/java")
    }

    pub fn feature(&self) -> u32 {
        let out = Command::new(self.java()).arg("-version").output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        let v = text.split('"').nth(1).unwrap_or("0");
        v.split('.').next().unwrap().parse().unwrap()
    }
}

fn jdk_at(name: &'static str, env: &str, candidates: &[&str]) -> Jdk {
    let home = std::env::var_os(env)
        .map(PathBuf::from)
        .or_else(|| {
            candidates
                .iter()
                .map(PathBuf::from)
                .find(|p| p.join("bin/java").is_file())
        })
        .unwrap_or_else(|| {
            panic!("{name} not found: set {env} to its home (looked in {candidates:?})")
        });
    assert!(
        home.join("bin/java").is_file(),
        "{}: no bin/java",
        home.display()
    );
    Jdk { name, home }
}

pub fn jdk17() -> Jdk {
    jdk_at(
        "OpenJDK 17",
        "OTELPROF_JDK17",
        &[
            "/usr/lib/jvm/java-17-openjdk-amd64",
            "/usr/lib/jvm/temurin-17-jdk-amd64",
        ],
    )
}

pub fn jdk25() -> Jdk {
    jdk_at(
        "Temurin 25",
        "OTELPROF_JDK25",
        &["/usr/lib/jvm/temurin-25-jdk-amd64"],
    )
}

/// Both JDKs the product supports and the tests must pass on.
pub fn all_jdks() -> Vec<Jdk> {
    vec![jdk17(), jdk25()]
}

/// Compiles `examples/workloads` and `tests/java` once per test process (with JDK 17's javac,
/// `--release 17`, so the classes run on every supported JDK) and returns the class directory.
pub fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = scratch_dir("classes");
        let mut sources = Vec::new();
        for dir in ["examples/workloads", "tests/java"] {
            collect_java(&repo_root().join(dir), &mut sources);
        }
        assert!(!sources.is_empty(), "no Java sources found");
        let javac = jdk17().home.join("bin/javac");
        let status = Command::new(javac)
            .args(["--release", "17", "-g", "-d"])
            .arg(&out)
            .args(&sources)
            .status()
            .unwrap();
        assert!(status.success(), "javac failed");
        out
    })
}

fn collect_java(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_java(&p, out);
        } else if p.extension().is_some_and(|x| x == "java") {
            out.push(p);
        }
    }
}

/// A fresh directory under `target/otelprof-tests/`, unique per call.
pub fn scratch_dir(what: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = release_dir()
        .parent()
        .unwrap()
        .join("otelprof-tests")
        .join(format!("{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Flags that remove safepoint polls from counted int loops: a safepoint-biased profiler
/// cannot see inside such loops.
pub const NO_LOOP_SAFEPOINTS: &[&str] = &[
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:-UseCountedLoopSafepoints",
    "-XX:LoopStripMiningIter=0",
];

/// One JVM run: what to run and how to profile it.
#[derive(Clone, Debug)]
pub struct JvmRun {
    pub jdk: Jdk,
    pub main_class: String,
    pub args: Vec<String>,
    /// Agent options without `out=` (added by the harness); `None` runs without the agent.
    pub agent_options: Option<String>,
    /// Whether the harness adds `out=<fresh dir>` to the agent options.
    pub add_out_dir: bool,
    pub jvm_flags: Vec<String>,
    pub timeout: Duration,
    /// How the agent is loaded.
    pub agent_mode: AgentMode,
    /// Class path entries after the compiled workloads (e.g. the OpenTelemetry SDK).
    pub classpath: Vec<PathBuf>,
    /// Extra environment variables for the JVM.
    pub env: Vec<(String, String)>,
}

/// How a [`JvmRun`] loads otelprof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentMode {
    /// `-agentpath:libotelprof.so=<options>`
    AgentPath,
    /// `-javaagent:otelprof.jar=<options>` (the jar finds libotelprof.so beside it)
    JavaAgent,
}

#[derive(Debug)]
pub struct RunOutput {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub out_dir: PathBuf,
    pub elapsed: Duration,
}

impl RunOutput {
    /// The pprof files the agent wrote, sorted by name (= by time).
    pub fn profiles(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.out_dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| p.to_string_lossy().ends_with(".pb.gz"));
        v.sort();
        v
    }

    /// The pprof files of one profile type (`cpu`, `wall`, `alloc`, `lock`): the agent names
    /// each file after its type.
    pub fn profiles_of(&self, kind: &str) -> Vec<PathBuf> {
        let prefix = format!("{kind}-");
        self.profiles()
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            })
            .collect()
    }

    /// Lines the agent printed (`otelprof: ...`).
    pub fn agent_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("otelprof:"))
            .collect()
    }

    /// The counters of the agent's final `stopped;` line, e.g. `samples` -> 123.
    pub fn agent_counters(&self) -> BTreeMap<String, u64> {
        let line = self
            .agent_lines()
            .into_iter()
            .find(|l| l.contains("stopped;"))
            .unwrap_or_else(|| panic!("no 'otelprof: stopped;' line in stderr:\n{}", self.stderr));
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_owned(), v.trim_end_matches(';').parse().ok()?)))
            .collect()
    }

    pub fn assert_clean_exit(&self) {
        assert_eq!(
            self.exit_code,
            Some(0),
            "JVM failed.\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert!(
            !self.stderr.contains("A fatal error has been detected"),
            "JVM crashed:\n{}",
            self.stderr
        );
    }
}

impl JvmRun {
    pub fn new(jdk: Jdk, main_class: &str) -> JvmRun {
        JvmRun {
            jdk,
            main_class: main_class.to_owned(),
            args: Vec::new(),
            agent_options: Some(String::new()),
            add_out_dir: true,
            jvm_flags: Vec::new(),
            timeout: Duration::from_secs(120),
            agent_mode: AgentMode::AgentPath,
            classpath: Vec::new(),
            env: Vec::new(),
        }
    }

    pub fn javaagent(mut self) -> Self {
        self.agent_mode = AgentMode::JavaAgent;
        self
    }

    pub fn classpath(mut self, entries: &[&Path]) -> Self {
        self.classpath
            .extend(entries.iter().map(|p| p.to_path_buf()));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn agent(mut self, options: &str) -> Self {
        self.agent_options = Some(options.to_owned());
        self
    }

    pub fn no_agent(mut self) -> Self {
        self.agent_options = None;
        self
    }

    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.jvm_flags.extend(flags.iter().map(|s| s.to_string()));
        self
    }

    pub fn run(&self) -> RunOutput {
        let out_dir = scratch_dir("run");
        let cmd = self.command(&out_dir);
        let (exit_code, stdout, stderr, elapsed) = run_with_timeout(cmd, self.timeout);
        RunOutput {
            exit_code,
            stdout,
            stderr,
            out_dir,
            elapsed,
        }
    }

    fn command(&self, out_dir: &Path) -> Command {
        let mut cmd = Command::new(self.jdk.java());
        cmd.current_dir(out_dir);
        if let Some(opts) = &self.agent_options {
            let mut opts = opts.clone();
            if self.add_out_dir {
                if !opts.is_empty() {
                    opts.push(',');
                }
                opts.push_str(&format!("out={}", out_dir.display()));
            }
            match self.agent_mode {
                AgentMode::AgentPath => {
                    cmd.arg(format!("-agentpath:{}={}", agent_path().display(), opts))
                }
                AgentMode::JavaAgent => {
                    cmd.arg(format!("-javaagent:{}={}", jar_path().display(), opts))
                }
            };
        }
        let mut cp = vec![classes().to_path_buf()];
        cp.extend(self.classpath.iter().cloned());
        let cp = std::env::join_paths(cp).unwrap();
        cmd.args(&self.jvm_flags)
            .arg("-cp")
            .arg(cp)
            .arg(&self.main_class)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }
}

impl JvmRun {
    /// Starts the JVM and returns at once, for tests that act on it while it runs (attach).
    pub fn spawn(&self) -> RunningJvm {
        let out_dir = scratch_dir("run");
        let mut cmd = self.command(&out_dir);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let collect = |pipe: Box<dyn Read + Send>| {
            let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let theirs = text.clone();
            let handle = std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(pipe);
                let mut line = String::new();
                while std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) > 0 {
                    theirs.lock().unwrap().push_str(&line);
                    line.clear();
                }
            });
            (text, handle)
        };
        let stdout = collect(Box::new(child.stdout.take().unwrap()));
        let stderr = collect(Box::new(child.stderr.take().unwrap()));
        RunningJvm {
            jdk: self.jdk.clone(),
            pid: child.id(),
            child: Some(child),
            out_dir,
            stdout,
            stderr,
            started: Instant::now(),
        }
    }
}

type Collected = (
    std::sync::Arc<std::sync::Mutex<String>>,
    std::thread::JoinHandle<()>,
);

/// A JVM started by [`JvmRun::spawn`]; killed on drop if still running.
pub struct RunningJvm {
    pub jdk: Jdk,
    pub pid: u32,
    child: Option<std::process::Child>,
    pub out_dir: PathBuf,
    stdout: Collected,
    stderr: Collected,
    started: Instant,
}

impl RunningJvm {
    /// What the JVM printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.0.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.0.lock().unwrap().clone()
    }

    /// Waits until stdout has a line containing `needle`.
    pub fn wait_for_stdout(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.stdout().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "no {needle:?} on stdout within {timeout:?}:\n{}\n{}",
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Resident set size of the JVM now (VmRSS), in bytes.
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        kb * 1024
    }

    /// Names of the JVM's threads now (`/proc/PID/task/*/comm`).
    pub fn thread_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) {
            for t in tasks.flatten() {
                if let Ok(n) = std::fs::read_to_string(t.path().join("comm")) {
                    names.push(n.trim_end().to_owned());
                }
            }
        }
        names
    }

    /// Waits for the JVM to exit (killing it after `timeout`) and returns what it did.
    pub fn wait(mut self, timeout: Duration) -> RunOutput {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let elapsed = self.started.elapsed();
        let take = |c: &mut Collected| {
            let handle = std::mem::replace(&mut c.1, std::thread::spawn(|| {}));
            let _ = handle.join();
            c.0.lock().unwrap().clone()
        };
        let stdout = take(&mut self.stdout);
        let stderr = take(&mut self.stderr);
        assert!(
            status.is_some(),
            "the JVM did not finish within {timeout:?} (killed).\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        RunOutput {
            exit_code: status.and_then(|s| s.code()),
            stdout,
            stderr,
            out_dir: self.out_dir.clone(),
            elapsed,
        }
    }
}

impl Drop for RunningJvm {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A reply to an attach request: `ok` or `error: ...`, then `key: value` lines.
#[derive(Clone, Debug, Default)]
pub struct AttachReply {
    pub error: Option<String>,
    pub lines: Vec<(String, String)>,
    /// The whole text, for messages.
    pub text: String,
}

impl AttachReply {
    pub fn parse(text: &str) -> AttachReply {
        let mut lines = text.lines();
        let first = lines.next().unwrap_or("");
        let error = match first {
            "ok" => None,
            other => Some(
                other
                    .strip_prefix("error: ")
                    .unwrap_or_else(|| panic!("a reply starts with ok or error: {text:?}"))
                    .to_owned(),
            ),
        };
        AttachReply {
            error,
            lines: lines
                .map(|l| {
                    let (k, v) = l
                        .split_once(": ")
                        .unwrap_or_else(|| panic!("not a key: value line: {l:?} in {text:?}"));
                    (k.to_owned(), v.to_owned())
                })
                .collect(),
            text: text.to_owned(),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn assert_ok(&self) -> &Self {
        assert!(self.is_ok(), "attach failed: {}", self.text);
        self
    }
}

/// Loads `library` into the running JVM with `args` (`VERB[,key=value...]` for
/// libotelprof.so, the agent argument for otelprof.jar) plus `reply=<file>`, and returns the
/// reply: the `JVMTI.agent_load` diagnostic command (the dynamic attach protocol's `load`, as
/// `otelprof attach start|stop|…` sends it, but with any library path and argument a test
/// needs), sent by `otelprof attach PID jcmd`. The reply file is made as the CLI makes it:
/// empty, mode 0600, under /tmp.
pub fn attach_load(jvm: &RunningJvm, library: &Path, args: &str) -> AttachReply {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let reply = PathBuf::from(format!("/tmp/otelprof-reply-{}-{n}", std::process::id()));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&reply);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&reply)
            .unwrap();
    }
    let full = if args.is_empty() {
        format!("reply={}", reply.display())
    } else {
        format!("{args},reply={}", reply.display())
    };
    // Through otelprof's own attach client (`otelprof attach PID jcmd`, no JDK tool), which
    // sends the diagnostic command as jcmd does. Its parser reads `key=value` words as named
    // arguments: the agent's argument string is quoted to reach the agent whole.
    let out = Command::new(cli_path())
        .arg("attach")
        .arg(jvm.pid.to_string())
        .arg("jcmd")
        .arg("JVMTI.agent_load")
        .arg(library)
        .arg(format!("\"{full}\""))
        .output()
        .unwrap();
    let jcmd = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = std::fs::read_to_string(&reply).unwrap_or_default();
    let _ = std::fs::remove_file(&reply);
    assert!(
        out.status.success() && jcmd.contains("return code: 0"),
        "otelprof attach jcmd JVMTI.agent_load {} {full:?} failed: {jcmd} {}\nreply: {text}",
        library.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.is_empty(),
        "no reply to {full:?} (jcmd said: {jcmd})\nJVM stderr:\n{}",
        jvm.stderr()
    );
    AttachReply::parse(&text)
}

/// Runs `cmd`, killing it if it outlives `timeout`. Returns exit code, stdout, stderr, time.
pub fn run_with_timeout(
    mut cmd: Command,
    timeout: Duration,
) -> (Option<i32>, String, String, Duration) {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let stdout = t_out.join().unwrap();
    let stderr = t_err.join().unwrap();
    assert!(
        status.is_some(),
        "{cmd:?} did not finish within {timeout:?} (killed).\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (status.and_then(|s| s.code()), stdout, stderr, elapsed)
}

/// One row of `go tool pprof -top`.
#[derive(Clone, Debug, PartialEq)]
pub struct TopRow {
    pub flat: f64,
    pub cum: f64,
    pub name: String,
}

/// What `go tool pprof -top` printed.
#[derive(Clone, Debug, Default)]
pub struct Top {
    /// The profile total (`... of <total> total`), after any focus filter.
    pub total: f64,
    /// Rows keyed by function name.
    pub rows: BTreeMap<String, TopRow>,
}

impl Top {
    /// Cumulative value of `function` (0 when absent).
    pub fn cum(&self, function: &str) -> f64 {
        self.rows.get(function).map_or(0.0, |r| r.cum)
    }

    pub fn flat(&self, function: &str) -> f64 {
        self.rows.get(function).map_or(0.0, |r| r.flat)
    }
}

/// The `-unit` that makes `go tool pprof` print `sample_index` values as plain numbers in one
/// unit: milliseconds for time (`cpu`, `wall`, `delay`), bytes for `alloc_space`.
fn unit_flag(sample_index: &str) -> Option<&'static str> {
    match sample_index {
        "cpu" | "wall" | "delay" => Some("-unit=ms"),
        "alloc_space" => Some("-unit=B"),
        _ => None,
    }
}

/// `go tool pprof -top` over `files` for `sample_index` (values in ms for `cpu`, `wall` and
/// `delay`, bytes for `alloc_space`, plain counts otherwise). Every node is kept (no node or
/// edge pruning). `extra` is passed through, e.g. `-tagfocus=thread_name=worker-.*`.
pub fn pprof_top(files: &[PathBuf], sample_index: &str, extra: &[&str]) -> Top {
    assert!(!files.is_empty(), "no profiles to read");
    let go = which("go").unwrap_or_else(|| {
        panic!("`go` not found: install Debian golang-go (scripts/test.sh does)")
    });
    let mut cmd = Command::new(go);
    cmd.args([
        "tool",
        "pprof",
        "-top",
        "-nodecount=1000000",
        "-nodefraction=0",
        "-edgefraction=0",
        &format!("-sample_index={sample_index}"),
    ]);
    cmd.args(unit_flag(sample_index));
    cmd.args(extra).args(files);
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_pprof_top(&text)
}

/// Parses the output of `go tool pprof -top`: the total from the `Showing nodes accounting
/// for ...` line and the table (`flat flat% sum% cum cum% name`).
pub fn parse_pprof_top(text: &str) -> Top {
    let mut rows = BTreeMap::new();
    let mut total = 0.0;
    let mut in_table = false;
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("Showing nodes accounting for") {
            if let Some(t) = rest.split(" of ").nth(1) {
                total = parse_quantity(t.split_whitespace().next().unwrap_or("0"));
            }
        }
        if line.trim_start().starts_with("flat") && line.contains("cum%") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(flat), Some(_), Some(_), Some(cum), Some(_)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            continue;
        };
        let name = parts.collect::<Vec<_>>().join(" ");
        rows.insert(
            name.clone(),
            TopRow {
                flat: parse_quantity(flat),
                cum: parse_quantity(cum),
                name,
            },
        );
    }
    Top { total, rows }
}

/// `1234ms`, `0`, `12.5ms`, `3` -> number (the unit is fixed by `-unit`).
fn parse_quantity(s: &str) -> f64 {
    let digits: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("not a pprof quantity: {s:?}"))
}

/// One sample as `go tool pprof -traces` prints it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceSample {
    pub labels: BTreeMap<String, String>,
    /// In the unit [`pprof_traces`] asks for (ms for time, bytes for `alloc_space`).
    pub value: f64,
    /// Leaf first.
    pub frames: Vec<String>,
}

impl TraceSample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// Whether some frame is `function` or ends with `.function`.
    pub fn has_frame(&self, function: &str) -> bool {
        self.frames
            .iter()
            .any(|f| f == function || f.ends_with(&format!(".{function}")))
    }
}

/// Every sample of `files` via `go tool pprof -traces`, with labels and leaf-first stacks.
pub fn pprof_traces(files: &[PathBuf], sample_index: &str) -> Vec<TraceSample> {
    assert!(!files.is_empty(), "no profiles to read");
    let go = which("go").unwrap_or_else(|| panic!("`go` not found: install Debian golang-go"));
    let mut cmd = Command::new(go);
    cmd.args([
        "tool",
        "pprof",
        "-traces",
        &format!("-sample_index={sample_index}"),
    ]);
    cmd.args(unit_flag(sample_index));
    let out = cmd.args(files).output().unwrap();
    assert!(
        out.status.success(),
        "go tool pprof -traces failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_pprof_traces(&String::from_utf8_lossy(&out.stdout))
}

/// Parses `go tool pprof -traces`: blocks separated by `-----------+---...` lines, each with
/// `key:  value` label lines, then `<value>   <leaf frame>` and one caller frame per line.
pub fn parse_pprof_traces(text: &str) -> Vec<TraceSample> {
    let mut samples = Vec::new();
    for block in text.split("-----------+").skip(1) {
        let mut s = TraceSample::default();
        for line in block.lines().skip(1) {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if s.frames.is_empty() {
                if let Some((key, value)) = trimmed.split_once(":  ") {
                    if !key.contains(' ') {
                        s.labels.insert(key.to_owned(), value.trim().to_owned());
                        continue;
                    }
                }
                let mut parts = trimmed.splitn(2, char::is_whitespace);
                let value = parts.next().unwrap_or("0");
                s.value = parse_quantity(value);
                s.frames.push(parts.next().unwrap_or("").trim().to_owned());
            } else {
                s.frames.push(trimmed.to_owned());
            }
        }
        if !s.frames.is_empty() {
            samples.push(s);
        }
    }
    samples
}

pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pprof_traces() {
        let text = "Type: cpu\n-----------+-------------------------------------------------------\n   span_id:  3606ba2694007a29\n span_name:  GET /a\nthread_name:  worker-1\n       2ms   a.B.burn\n             a.B.work\n-----------+-------------------------------------------------------\n      10ms   a.B.main\n";
        let s = parse_pprof_traces(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label("span_id"), Some("3606ba2694007a29"));
        assert_eq!(s[0].label("span_name"), Some("GET /a"));
        assert_eq!(s[0].value, 2.0);
        assert_eq!(s[0].frames, vec!["a.B.burn", "a.B.work"]);
        assert!(s[0].has_frame("work"));
        assert!(!s[0].has_frame("or"));
        assert_eq!(s[1].value, 10.0);
        assert!(s[1].labels.is_empty());
    }

    #[test]
    fn parses_pprof_top() {
        let text = "Type: cpu\nShowing nodes accounting for 11713ms, 99.61% of 11759ms total\n      flat  flat%   sum%        cum   cum%\n   11684ms 99.36% 99.36%    11684ms 99.36%  a.B.spin\n         0     0% 99.61%    7088.5ms 60.28%  a.B$$Lambda.run\n";
        let top = parse_pprof_top(text);
        assert_eq!(top.total, 11759.0);
        assert_eq!(top.flat("a.B.spin"), 11684.0);
        assert_eq!(top.cum("a.B$$Lambda.run"), 7088.5);
        assert_eq!(top.rows.len(), 2);
    }
}

/// The Python interpreter of the test venv (PyPI `opentelemetry-proto`, `grpcio`, `PyYAML`,
/// pinned in `tests/python/requirements.txt`), made by `scripts/test.sh`, or
/// `OTELPROF_PYTHON`.
pub fn python() -> PathBuf {
    let p = std::env::var_os("OTELPROF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| release_dir().parent().unwrap().join("otlp-venv/bin/python"));
    assert!(
        p.is_file(),
        "{} is missing: run scripts/test.sh (it creates the venv with the official OTLP classes)",
        p.display()
    );
    p
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// OTLP transport a [`Receiver`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpProtocol {
    Grpc,
    Http,
}

impl OtlpProtocol {
    /// The agent's `protocol=` value.
    pub fn agent_name(&self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::Http => "http/protobuf",
        }
    }
}

/// An independent OTLP receiver (`tests/python/otlp_receiver.py`, written with the official
/// generated classes) that saves what it receives; killed on drop.
pub struct Receiver {
    pub protocol: OtlpProtocol,
    pub port: u16,
    pub dir: PathBuf,
    child: std::process::Child,
}

impl Receiver {
    pub fn start(protocol: OtlpProtocol) -> Receiver {
        Receiver::start_with(protocol, 0, "")
    }

    /// `port` 0 picks a free one; `script` scripts the first answers (see the receiver).
    pub fn start_with(protocol: OtlpProtocol, port: u16, script: &str) -> Receiver {
        let dir = scratch_dir("receiver");
        let ready = dir.join("ready");
        let out = dir.join("received");
        let child = Command::new(python())
            .arg(repo_root().join("tests/python/otlp_receiver.py"))
            .args([
                "--protocol",
                match protocol {
                    OtlpProtocol::Grpc => "grpc",
                    OtlpProtocol::Http => "http",
                },
                "--port",
                &port.to_string(),
                "--script",
                script,
            ])
            .arg("--out")
            .arg(&out)
            .arg("--ready")
            .arg(&ready)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut r = Receiver {
            protocol,
            port: 0,
            dir: out,
            child,
        };
        let start = Instant::now();
        while !ready.is_file() {
            if let Ok(Some(status)) = r.child.try_wait() {
                panic!("the OTLP receiver exited at start: {status}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the OTLP receiver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        r.port = std::fs::read_to_string(&ready)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        r
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Agent options that export to this receiver.
    pub fn agent_options(&self) -> String {
        format!(
            "endpoint={},protocol={}",
            self.endpoint(),
            self.protocol.agent_name()
        )
    }

    /// `tests/python/otlp_check.py` over everything received: the rule violations and a
    /// summary (resource, functions with files and lines, threads, links, metrics, …).
    pub fn check(&self) -> serde_json::Value {
        let out = Command::new(python())
            .arg(repo_root().join("tests/python/otlp_check.py"))
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "otlp_check.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The receiver's request log: one JSON object per request received.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("requests.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Profile requests received (any answer).
    pub fn profile_requests(&self) -> Vec<serde_json::Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["signal"] == "profiles")
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
