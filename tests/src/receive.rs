//! A real `otelprof receive` (or `otelprof serve`) on free loopback ports, for tests that
//! export to it, read what it stored or attack it; its log kept in a file; killed on drop.

use crate::process::Tied as _;
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::environment::{cli_path, free_port, scratch_dir};

pub struct ReceiveProcess {
    child: Child,
    pub grpc: u16,
    pub http: u16,
    /// The UI's port, for `serve`.
    pub ui: Option<u16>,
    pub store: PathBuf,
    log: PathBuf,
}

/// How to start it: [`ReceiveProcess::launch`].
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    /// More flags.
    pub extra: &'a [&'a str],
    /// `otelprof serve` with its UI on this host (a free port), instead of `receive`.
    pub ui_host: Option<&'a str>,
    /// Pass `--quiet`.
    pub quiet: bool,
    /// At most this many open files (soft and hard: the process cannot raise them).
    pub nofile: Option<u64>,
    /// This store (or agent output directory) instead of a fresh one; the log goes beside it.
    pub store: Option<&'a Path>,
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Launch {
            extra: &[],
            ui_host: None,
            quiet: true,
            nofile: None,
            store: None,
        }
    }
}

impl ReceiveProcess {
    /// `otelprof receive --quiet` on gRPC and HTTP; `extra` are more flags.
    pub fn start(extra: &[&str]) -> ReceiveProcess {
        ReceiveProcess::launch(Launch {
            extra,
            ..Launch::default()
        })
    }

    /// Starts it as `how` says and waits until every port listens.
    pub fn launch(how: Launch<'_>) -> ReceiveProcess {
        let store = how
            .store
            .map_or_else(|| scratch_dir("store"), Path::to_path_buf);
        let log = store.with_extension("log");
        let (grpc, http) = (free_port(), free_port());
        let ui = how.ui_host.map(|host| (host, free_port()));
        let mut cmd = Command::new(cli_path());
        cmd.arg(if ui.is_some() { "serve" } else { "receive" })
            .args(how.quiet.then_some("--quiet"))
            .arg("--store")
            .arg(&store)
            .args(["--grpc", &format!("127.0.0.1:{grpc}")])
            .args(["--http", &format!("127.0.0.1:{http}")]);
        if let Some((host, port)) = ui {
            cmd.args(["--ui", &format!("{host}:{port}")]);
        }
        cmd.args(how.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(n) = how.nofile {
            // SAFETY: the closure runs in the forked child before exec and only calls
            // setrlimit, which is async-signal-safe; it touches no memory of the parent.
            unsafe {
                cmd.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let r = ReceiveProcess {
            child: cmd.spawn_tied().unwrap(),
            grpc,
            http,
            ui: ui.map(|(_, port)| port),
            store,
            log,
        };
        let start = Instant::now();
        for port in [grpc, http].into_iter().chain(r.ui) {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "otelprof did not listen on {port}:\n{}",
                    r.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        r
    }

    /// The agent options that export here over HTTP.
    pub fn agent_options(&self) -> String {
        format!("endpoint=http://127.0.0.1:{}", self.http)
    }

    /// The agent options that export here over gRPC.
    pub fn grpc_agent_options(&self) -> String {
        format!("endpoint=http://127.0.0.1:{},protocol=grpc", self.grpc)
    }

    /// The store directory as a command-line argument.
    pub fn store_arg(&self) -> &str {
        self.store.to_str().unwrap()
    }

    /// The profile files stored so far, sorted.
    pub fn stored_profiles(&self) -> Vec<PathBuf> {
        files_below(&self.store.join("profiles"))
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then its whole log once it exited (successfully: asserted).
    pub fn stop(mut self) -> String {
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "otelprof exited with {status}:\n{}",
                    self.log()
                );
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "otelprof did not stop on SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.log()
    }
}

impl Drop for ReceiveProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The files below `dir` (none if it does not exist), sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// What the sender says it got acknowledged.
#[derive(Debug, Default)]
pub struct Acked {
    pub samples: u64,
    pub by_function: std::collections::BTreeMap<String, u64>,
}

impl Acked {
    pub fn add(&mut self, other: Acked) {
        self.samples += other.samples;
        for (f, n) in other.by_function {
            *self.by_function.entry(f).or_default() += n;
        }
    }
}

/// Sends `n` small requests (tests/cli/otlp_send_many.py) from index `first` to the
/// receivers on `ports`, in turn, into `hours` hours from `hour` (Unix ns); each must be
/// acknowledged.
pub fn send_many(ports: &[u16], first: usize, n: usize, hour: i64, hours: usize) -> Acked {
    let targets: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let out = std::process::Command::new(crate::environment::python())
        .arg(crate::environment::repo_root().join("tests/cli/otlp_send_many.py"))
        .args(["--targets", &targets.join(",")])
        .args(["--requests", &n.to_string(), "--first", &first.to_string()])
        .args([
            "--hour-ns",
            &hour.to_string(),
            "--hours",
            &hours.to_string(),
        ])
        .output_tied()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(said["acked"].as_u64(), Some(n as u64), "{text}");
    Acked {
        samples: said["samples"].as_u64().unwrap(),
        by_function: said["by_function"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
            .collect(),
    }
}
