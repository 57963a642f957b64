//! A real `otelprof receive` on free loopback ports, for tests that export to it or attack it;
//! killed on drop.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{cli_path, free_port, scratch_dir};

pub struct ReceiveProcess {
    child: Child,
    pub grpc: u16,
    pub http: u16,
    pub store: PathBuf,
}

impl ReceiveProcess {
    /// Listens on gRPC and HTTP; `extra` are more flags.
    pub fn start(extra: &[&str]) -> ReceiveProcess {
        let store = scratch_dir("store");
        let (grpc, http) = (free_port(), free_port());
        let child = Command::new(cli_path())
            .args(["receive", "--quiet", "--store"])
            .arg(&store)
            .args(["--grpc", &format!("127.0.0.1:{grpc}")])
            .args(["--http", &format!("127.0.0.1:{http}")])
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        for port in [grpc, http] {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "receive did not listen"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        ReceiveProcess {
            child,
            grpc,
            http,
            store,
        }
    }

    /// The agent options that export here over HTTP.
    pub fn agent_options(&self) -> String {
        format!("endpoint=http://127.0.0.1:{}", self.http)
    }
}

impl Drop for ReceiveProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
