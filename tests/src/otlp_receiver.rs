//! An independent OTLP receiver (`tests/python/otlp_receiver.py`, on the official generated
//! classes) that saves what it receives, and its checker (`tests/python/otlp_check.py`).

use crate::process::Tied as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::environment::{python, repo_root, scratch_dir};

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
            .spawn_tied()
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
            .output_tied()
            .unwrap();
        assert!(
            out.status.success(),
            "otlp_check.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `tests/python/pyroscope_check.py` over everything received: Grafana Pyroscope's ingest
    /// rules, each with its source, and the names it would give the profiles. `bounded` also
    /// checks what `backend=pyroscope` promises beyond what Pyroscope refuses.
    pub fn pyroscope_check(&self, bounded: bool) -> serde_json::Value {
        let mut cmd = Command::new(python());
        cmd.arg(repo_root().join("tests/python/pyroscope_check.py"))
            .arg(&self.dir);
        if bounded {
            cmd.arg("--bounded");
        }
        let out = cmd.output_tied().unwrap();
        assert!(
            out.status.success(),
            "pyroscope_check.py failed: {}",
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
