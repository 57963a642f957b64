//! Running a program with a deadline, its output collected as it runs; and starting
//! programs so that they end when the test binary ends, however it ends.
//!
//! # Children that end with the tests
//!
//! Every program a test starts goes through [`Tied`]: the child asks the kernel for SIGTERM
//! when its parent dies (`PR_SET_PDEATHSIG`), so a test binary that passes, fails, panics or
//! is killed by a timeout leaves nothing running — not a receiver kept in a `static` that is
//! never dropped, not a JVM whose test panicked before its kill. SIGTERM, not SIGKILL, so that
//! what the child started ends with it too: `otelprof run` passes it on to its JVM, a JVM
//! runs its shutdown hooks.
//!
//! The kernel sends that signal when the *thread* that forked the child ends, not the
//! process, and every test runs on a thread of its own; a child shared by several tests (a
//! receiver in a `static`) would die with the first test's thread. So children are forked by
//! one spawner thread that lives as long as the process.

use std::io::{self, Read};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A command to start, and where to send it back with its child.
type SpawnRequest = (Command, mpsc::Sender<(Command, io::Result<Child>)>);

/// Starting a [`Command`] so that the child ends when the test binary ends.
pub trait Tied {
    /// [`Command::spawn`], tied to the test binary's life.
    fn spawn_tied(&mut self) -> io::Result<Child>;
    /// [`Command::output`], tied: stdout and stderr collected.
    fn output_tied(&mut self) -> io::Result<Output>;
    /// [`Command::status`], tied.
    fn status_tied(&mut self) -> io::Result<ExitStatus>;
}

impl Tied for Command {
    fn spawn_tied(&mut self) -> io::Result<Child> {
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec and calls only prctl and
        // getppid, which are async-signal-safe; it touches no memory of the parent.
        unsafe {
            self.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent died before the request was made: nobody would signal us.
                if libc::getppid() as u32 != parent {
                    return Err(io::Error::other("the test binary is gone"));
                }
                Ok(())
            });
        }
        let command = std::mem::replace(self, Command::new(""));
        let (reply, answer) = mpsc::channel();
        let sent = spawner()
            .lock()
            .map_err(|_| io::Error::other("spawner lock poisoned"))?
            .send((command, reply));
        if sent.is_err() {
            return Err(io::Error::other("the spawner thread is gone"));
        }
        let (command, child) = answer
            .recv()
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
        *self = command;
        child
    }

    fn output_tied(&mut self) -> io::Result<Output> {
        self.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.spawn_tied()?.wait_with_output()
    }

    fn status_tied(&mut self) -> io::Result<ExitStatus> {
        self.spawn_tied()?.wait()
    }
}

/// The thread that forks every tied child, started on first use and alive until the process
/// exits.
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("tied-spawner".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let child = command.spawn();
                    let _ = reply.send((command, child));
                }
            })
            .expect("cannot start the spawner thread");
        Mutex::new(requests)
    })
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
        .spawn_tied()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Set for the copy of this test binary that [`a_tied_child_ends_with_the_test_binary`]
    /// starts: that copy starts a tied `sleep`, prints its pid and exits without waiting.
    const HELPER: &str = "OTELPROF_TIED_HELPER";

    #[test]
    fn tied_helper() {
        if std::env::var_os(HELPER).is_none() {
            return;
        }
        // Its output not on our pipes, which would keep the caller reading until it ends.
        // Not waited for: leaving it behind is the point.
        #[allow(clippy::zombie_processes)]
        let child = Command::new("sleep")
            .arg("60")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn_tied()
            .unwrap();
        println!("sleep pid {}", child.id());
    }

    #[test]
    fn a_tied_child_ends_with_the_test_binary() {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "process::tests::tied_helper", "--nocapture"])
            .env(HELPER, "1")
            .output_tied()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        let pid: u32 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("sleep pid "))
            .unwrap_or_else(|| panic!("no pid in:\n{stdout}"))
            .parse()
            .unwrap();
        // Its parent has exited: the kernel sent it SIGTERM; it is gone (or a zombie of
        // init, reaped at once) within moments, long before its 60 s.
        let proc = format!("/proc/{pid}/stat");
        let start = Instant::now();
        while let Ok(stat) = std::fs::read_to_string(&proc) {
            if stat.contains(") Z ") {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "sleep {pid} outlived the binary that started it"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn tied_commands_run_and_report_as_untied_ones_do() {
        let out = Command::new("sh")
            .args(["-c", "echo $PPID; echo err >&2"])
            .output_tied()
            .unwrap();
        assert!(out.status.success());
        let ppid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_eq!(ppid, std::process::id());
        assert_eq!(out.stderr, b"err\n");
        assert!(Command::new("true").status_tied().unwrap().success());
        assert!(!Command::new("false").status_tied().unwrap().success());
        // A command that cannot start says so, and the Command is handed back whole.
        let mut missing = Command::new("/nonexistent/program");
        missing.arg("x");
        assert!(missing.spawn_tied().is_err());
        assert_eq!(missing.get_program(), "/nonexistent/program");
    }
}
