//! One JVM run: a [`JvmRun`] declares the JDK, the main class with its arguments, the agent
//! options and extra JVM flags; [`JvmRun::run`] runs it to the end with a deadline and
//! returns a [`RunOutput`], [`JvmRun::spawn`] starts it and returns a [`RunningJvm`].

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::environment::{agent_path, jar_path, scratch_dir};
use crate::jdks::{classes, Jdk};
use crate::process::run_with_timeout;

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
