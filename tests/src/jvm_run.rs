//! One JVM run: a [`JvmRun`] declares the JDK, the main class with its arguments, the agent
//! options and extra JVM flags; [`JvmRun::run`] runs it to the end with a deadline and
//! returns a [`RunOutput`]; [`JvmRun::spawn`] starts it and returns a
//! [`RunningJvm`](crate::RunningJvm).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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
    /// A program (and its arguments) that runs the `java` command line given after them,
    /// e.g. `setpriv --reuid=nobody …` or a launcher that installs a seccomp filter first.
    pub launcher: Vec<String>,
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
    /// The number on the workload's `KEY NUMBER` line of standard output (the truths the test
    /// workloads print); panics naming the key when there is none.
    pub fn stdout_number(&self, key: &str) -> f64 {
        let line = self
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no '{key}' line:\n{}", self.stdout));
        line.trim()
            .parse()
            .unwrap_or_else(|e| panic!("'{key} {line}': {e}"))
    }

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
            launcher: Vec::new(),
        }
    }

    /// Runs `java` through `launcher` (see [`JvmRun::launcher`]).
    pub fn launcher(mut self, launcher: &[&str]) -> Self {
        self.launcher = launcher.iter().map(|s| s.to_string()).collect();
        self
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

    pub(crate) fn command(&self, out_dir: &Path) -> Command {
        let mut cmd = match self.launcher.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(self.jdk.java());
                c
            }
            None => Command::new(self.jdk.java()),
        };
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
