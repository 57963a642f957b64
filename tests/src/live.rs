//! A JVM that keeps running while a test works on it (`otelprof attach`), killed on drop.
//!
//! [`LiveJvm::start`] runs a command (a JVM, or a wrapper that ends in one: `unshare`,
//! `setpriv`), waits for the `ready <pid>` line of `otelprof.tests.AttachTarget`, and finds
//! the JVM's pid as seen from here (the wrapper's descendant running `java`).

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct LiveJvm {
    child: Child,
    /// The JVM's pid here.
    pub pid: u32,
    /// The pid the JVM prints for itself (1 as the first process of its pid namespace).
    pub own_pid: u32,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl LiveJvm {
    /// Starts `command` and waits (at most 60 s) for the JVM's `ready` line.
    pub fn start(mut command: Command) -> LiveJvm {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = BufReader::new(child.stdout.take().unwrap());
        let sink = stdout.clone();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let start = Instant::now();
        let own_pid = loop {
            let ready = stdout
                .lock()
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("ready ")?.trim().parse::<u32>().ok());
            if let Some(pid) = ready {
                break pid;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "{command:?} exited ({status}) before it was ready:\n{}\n{}",
                    stdout.lock().unwrap(),
                    stderr.lock().unwrap()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{command:?} not ready within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let pid = java_descendant(child.id())
            .unwrap_or_else(|| panic!("no java process under {command:?} (pid {})", child.id()));
        LiveJvm {
            child,
            pid,
            own_pid,
            stdout,
            stderr,
        }
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
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
    pub fn root(&self) -> std::path::PathBuf {
        Path::new("/proc").join(self.pid.to_string()).join("root")
    }
}

impl Drop for LiveJvm {
    fn drop(&mut self) {
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
        let _ = self.child.kill();
        let _ = self.child.wait();
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

fn children(pid: u32) -> Vec<u32> {
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
