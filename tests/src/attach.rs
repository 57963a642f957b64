//! What the `otelprof attach` tests share: running `otelprof attach`, the JVM it attaches to
//! (`otelprof.tests.AttachTarget`) as root, in its own namespaces or as nobody, and the checks
//! that nothing is left behind.

use crate::process::Tied as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::environment::cli_path;
use crate::jdks::{classes, Jdk};
use crate::running_jvm::RunningJvm;

pub const MAIN: &str = "otelprof.tests.AttachTarget";

/// Runs `otelprof ARGS` (or `program ARGS`): exit code, stdout, stderr.
pub fn run(program: &Path, args: &[&str]) -> (i32, String, String) {
    run_as(&[], program, args)
}

/// Runs `program ARGS` behind `prefix` (e.g. `setpriv …`).
pub fn run_as(prefix: &[&str], program: &Path, args: &[&str]) -> (i32, String, String) {
    run_in(None, prefix, program, args)
}

/// Pids of the `otelprof` processes this test process ran: the files they may have left
/// carry them in their names (other tests on the machine make files like them).
static CLI_PIDS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Runs `program ARGS` behind `prefix`, in `cwd` when given: exit code, stdout, stderr.
pub fn run_in(
    cwd: Option<&Path>,
    prefix: &[&str],
    program: &Path,
    args: &[&str],
) -> (i32, String, String) {
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(program);
            c
        }
        None => Command::new(program),
    };
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_tied()
        .unwrap();
    // `setpriv` and `sh -c exec` keep the pid.
    CLI_PIDS.lock().unwrap().push(child.id());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `otelprof attach PID ARGS` (the `otelprof` of `target/release`).
pub fn attach(pid: u32, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["attach".to_owned(), pid.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    run(&cli_path(), &all)
}

/// A refusal: exit 1, nothing on stdout, exactly one `otelprof:` line on stderr holding
/// `expected`.
#[track_caller]
pub fn assert_refused(result: &(i32, String, String), expected: &str) {
    let (code, stdout, stderr) = result;
    assert_eq!(*code, 1, "exit code\nstdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "", "stdout\nstderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {stderr}");
    assert!(lines[0].starts_with("otelprof: "), "{stderr}");
    assert!(lines[0].contains(expected), "{expected:?} not in {stderr}");
}

/// `jcmd VM.version` answered by the JVM of `jdk`.
#[track_caller]
pub fn assert_version(result: &(i32, String, String), jdk: &Jdk) {
    let (code, stdout, stderr) = result;
    assert_eq!(*code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stdout.contains(&format!("JDK {}.", jdk.feature())),
        "{}: {stdout}",
        jdk.name
    );
    assert_eq!(stderr, "");
}

/// Names in `dir` starting with `prefix`.
pub fn names(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// No attach trigger for this JVM, and no reply or dump file of an `otelprof` this test
/// process ran, left in the JVM's working directory or /tmp (which other tests share).
#[track_caller]
pub fn assert_no_leftovers(jvm: &RunningJvm, cwd: &Path) {
    let pids = CLI_PIDS.lock().unwrap().clone();
    let ours = |name: &str| {
        name == format!(".attach_pid{}", jvm.own_pid)
            || ["otelprof-reply-", "otelprof-dump-"].iter().any(|prefix| {
                name.strip_prefix(prefix)
                    .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok())
                    .is_some_and(|pid| pids.contains(&pid))
            })
    };
    for dir in [cwd.to_path_buf(), jvm.root().join("tmp")] {
        let left: Vec<String> = names(&dir, "").into_iter().filter(|n| ours(n)).collect();
        assert!(left.is_empty(), "left in {}: {left:?}", dir.display());
    }
}

/// `java FLAGS -cp <classes> AttachTarget`, in `cwd`.
pub fn java(jdk: &Jdk, cwd: &Path, flags: &[&str]) -> Command {
    let mut cmd = Command::new(jdk.java());
    cmd.current_dir(cwd)
        .args(flags)
        .arg("-cp")
        .arg(classes())
        .arg(MAIN);
    cmd
}

/// A directory under /var/tmp (outside the private /tmp of [`java_in_namespaces`]) that every
/// user may read, with AttachTarget's class, this `otelprof` and the agent beside it (hard
/// links, or copies): what a JVM and an `otelprof` running as nobody can reach wherever the
/// repository is checked out. Removed on drop.
pub struct Staged(pub PathBuf);

impl Staged {
    pub fn create() -> Staged {
        let dir = PathBuf::from(format!(
            "/var/tmp/otelprof-attach-test-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let class_dir = dir.join("classes/otelprof/tests");
        std::fs::create_dir_all(&class_dir).unwrap();
        std::fs::copy(
            classes().join("otelprof/tests/AttachTarget.class"),
            class_dir.join("AttachTarget.class"),
        )
        .unwrap();
        let release = cli_path().parent().unwrap().to_path_buf();
        for file in ["otelprof", "libotelprof.so", "otelprof.jar"] {
            let from = release.join(file);
            if std::fs::hard_link(&from, dir.join(file)).is_err() {
                std::fs::copy(&from, dir.join(file)).unwrap();
            }
        }
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                }
            }
        }
        Staged(dir)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory removed when dropped (also when the test fails).
pub struct RemovedOnDrop(pub PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub const AS_NOBODY: [&str; 4] = [
    "setpriv",
    "--reuid=nobody",
    "--regid=nogroup",
    "--clear-groups",
];

pub fn nobody_ids() -> (u32, u32) {
    let out = Command::new("setpriv")
        .args(&AS_NOBODY[1..])
        .args(["sh", "-c", "id -u; id -g"])
        .output_tied()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut ids = text.lines().map(|l| l.trim().parse::<u32>().unwrap());
    (ids.next().unwrap(), ids.next().unwrap())
}

/// This test process's effective uid.
pub fn euid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap()
}

/// The first 16 hex digits of the SHA-256 of `path` (the name of otelprof's copies).
pub fn short_sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output_tied().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()[..16].to_owned()
}

/// Whether the JVM has `path` mapped (it loaded that library).
pub fn maps_hold(pid: u32, path: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .any(|l| l.ends_with(path))
}

/// The library paths of `libotelprof.so` copies the JVM has mapped.
pub fn mapped_agents(pid: u32) -> Vec<String> {
    let mut paths: Vec<String> = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.ends_with("/libotelprof.so"))
        .map(str::to_owned)
        .collect();
    paths.dedup();
    paths
}

/// `java -cp <classes> AttachTarget` in its own mount and pid namespaces with a private /tmp
/// (`unshare`, as a container has them), in `cwd`, behind `wrapper` inside (e.g. `setpriv
/// …` to run as another user) when given.
pub fn java_in_namespaces(jdk: &Jdk, cwd: &Path, wrapper: &[&str], classes: &Path) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.current_dir(cwd)
        .args(["--mount", "--pid", "--fork", "--mount-proc", "--kill-child"])
        .args([
            "sh",
            "-c",
            r#"mount -t tmpfs tmpfs /tmp && exec "$@""#,
            "sh",
        ])
        .args(wrapper)
        .arg(jdk.java())
        .arg("-cp")
        .arg(classes)
        .arg(MAIN);
    cmd
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
        .output_tied()
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

/// The perf events open in process `pid` (its descriptors on `anon_inode:[perf_event]`): the
/// per-thread samplers of `clock=perf`, as SIGPROF timers are those of `clock=cpu`.
pub fn perf_events(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .filter(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|l| l.to_string_lossy() == "anon_inode:[perf_event]")
                })
                .count()
        })
        .unwrap_or(0)
}
