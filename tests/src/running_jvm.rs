//! A JVM that keeps running while a test works on it (the attach tests), stopped on drop.
//!
//! Two ways to start one: [`JvmRun::spawn`] starts the JVM of a run and
//! returns at once; [`RunningJvm::start`] runs a command (a JVM, or a wrapper that ends
//! in one: `unshare`, `setpriv`), waits for the `ready <pid>` line of
//! `otelprof.tests.AttachTarget`, and finds the JVM's pid as seen from here (the wrapper's
//! descendant running `java`).

use crate::process::Tied as _;
use std::io::{BufRead as _, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::environment::scratch_dir;
use crate::jvm_run::{JvmRun, RunOutput};

/// A JVM started by [`JvmRun::spawn`] or [`RunningJvm::start`];
/// stopped on drop if still running (SIGTERM, then SIGKILL after 5 s).
pub struct RunningJvm {
    child: Option<Child>,
    /// The JVM's pid here.
    pub pid: u32,
    /// The pid the JVM knows itself by: 1 as the first process of its own pid namespace,
    /// else its pid here.
    pub own_pid: u32,
    /// The directory the JVM runs in; for [`JvmRun::spawn`] also where
    /// the agent writes (`out=`).
    pub out_dir: PathBuf,
    stdout: Collected,
    stderr: Collected,
    started: Instant,
}

/// What a program printed on one pipe so far, and the thread that reads it.
struct Collected {
    text: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Collected {
    /// Reads `pipe` on a thread of its own, a line at a time (bytes that are not UTF-8
    /// replaced), so that a chatty program never blocks on a full pipe.
    fn from(pipe: impl Read + Send + 'static) -> Collected {
        let text = Arc::new(Mutex::new(String::new()));
        let theirs = text.clone();
        let reader = std::thread::spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                theirs
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&line));
                line.clear();
            }
        });
        Collected {
            text,
            reader: Some(reader),
        }
    }

    fn now(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Everything, once the program closed the pipe.
    fn all(&mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.now()
    }
}

impl JvmRun {
    /// Starts the JVM and returns at once, for tests that act on it while it runs (attach).
    pub fn spawn(&self) -> RunningJvm {
        let out_dir = scratch_dir("run");
        RunningJvm::spawn(self.command(&out_dir), out_dir)
    }
}

impl RunningJvm {
    /// Starts `command` and waits (at most 60 s) for the JVM's `ready` line.
    pub fn start(command: Command) -> RunningJvm {
        let out_dir = command
            .get_current_dir()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let what = format!("{command:?}");
        let mut jvm = RunningJvm::spawn(command, out_dir);
        let start = Instant::now();
        jvm.own_pid = loop {
            let ready = jvm
                .stdout()
                .lines()
                .find_map(|l| l.strip_prefix("ready ")?.trim().parse::<u32>().ok());
            if let Some(pid) = ready {
                break pid;
            }
            if let Some(status) = jvm.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "{what} exited ({status}) before it was ready:\n{}\n{}",
                    jvm.stdout(),
                    jvm.stderr()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what} not ready within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        jvm.pid = java_descendant(jvm.pid)
            .unwrap_or_else(|| panic!("no java process under {what} (pid {})", jvm.pid));
        jvm
    }

    /// Starts `command` (in `out_dir`) with its output collected, and returns at once.
    pub(crate) fn spawn(mut command: Command, out_dir: PathBuf) -> RunningJvm {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn_tied()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let stdout = Collected::from(child.stdout.take().unwrap());
        let stderr = Collected::from(child.stderr.take().unwrap());
        let pid = child.id();
        RunningJvm {
            child: Some(child),
            pid,
            own_pid: pid,
            out_dir,
            stdout,
            stderr,
            started: Instant::now(),
        }
    }

    /// What the JVM printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.now()
    }

    pub fn stderr(&self) -> String {
        self.stderr.now()
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

    /// Whether the JVM still runs (not exited, not a zombie).
    pub fn alive(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .map(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("State:"))
                    .is_some_and(|st| !st.trim().starts_with('Z') && !st.trim().starts_with('X'))
            })
            .unwrap_or(false)
    }

    /// `/proc/PID/root`: the JVM's file system as it sees it.
    pub fn root(&self) -> PathBuf {
        Path::new("/proc").join(self.pid.to_string()).join("root")
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
        let stdout = self.stdout.all();
        let stderr = self.stderr.all();
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
        // Nothing to stop once waited for.
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SIGTERM first: the JVM's shutdown removes its attach socket. -Xrs JVMs die of it
        // without that, so whatever is left of ours is removed below.
        // SAFETY: kill has no memory-safety preconditions; the pid is the JVM we started
        // (or already gone, which kill reports).
        unsafe {
            libc::kill(self.pid as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        if self.own_pid == self.pid {
            // Our pid namespace, so (in these tests) our /tmp.
            let _ = std::fs::remove_file(format!("/tmp/.java_pid{}", self.pid));
        }
    }
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The processes whose parent is `pid` (from /proc; empty once it has none or is gone).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// `pid` itself if it runs `java`, else its first descendant that does.
fn java_descendant(pid: u32) -> Option<u32> {
    if comm(pid) == "java" {
        return Some(pid);
    }
    children(pid).into_iter().find_map(java_descendant)
}
