//! An S3 API server for the object storage tests: moto's server (PyPI `moto[server]`, in the
//! test venv), started by the test on a free loopback port and killed when dropped (and with
//! the test binary, whatever happens: [`crate::Tied`]).
//!
//! moto is an emulator: it answers the S3 REST API (PUT, GET, LIST, DELETE, and conditional
//! PUTs with `If-None-Match: *` and `If-Match: <etag>`, which [`S3Server::start`] checks before
//! a test relies on them), in memory, over plain HTTP, and accepts any credentials. It says
//! nothing about a real store's latency, consistency under load or authentication.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::environment::{cli_path, free_port, python};
use crate::process::Tied as _;

pub struct S3Server {
    child: Child,
    pub port: u16,
}

/// Checks, through boto3 (moto's own client dependency), that the server refuses a second
/// `If-None-Match: *` PUT and an `If-Match` PUT with a wrong ETag: the two conditional writes
/// a lease needs.
const CONDITIONAL_PROBE: &str = r#"
import sys, boto3, botocore
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="test",
                  aws_secret_access_key="test", region_name="us-east-1")
s3.create_bucket(Bucket="conditional-probe")
first = s3.put_object(Bucket="conditional-probe", Key="k", Body=b"1", IfNoneMatch="*")
for kw in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123"'}):
    try:
        s3.put_object(Bucket="conditional-probe", Key="k", Body=b"2", **kw)
        sys.exit(f"the server ignored {kw}")
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "PreconditionFailed", e.response
s3.put_object(Bucket="conditional-probe", Key="k", Body=b"3", IfMatch=first["ETag"])
"#;

impl S3Server {
    /// Starts moto's server and waits until it answers; checks its conditional writes.
    pub fn start() -> S3Server {
        let port = free_port();
        let child = Command::new(python())
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn_tied()
            .unwrap();
        let server = S3Server { child, port };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "moto's server did not listen on {port} (is moto[server] in the venv?)"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server.python(CONDITIONAL_PROBE, &[]);
        server
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment that points the `object_store` crate (and any AWS client) here.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// Uploads every file below `dir` to `bucket` under `prefix`, as `aws s3 sync` would.
    pub fn upload(&self, dir: &std::path::Path, bucket: &str, prefix: &str) {
        self.python(
            "import os, sys, boto3\n\
             s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n\
             for root, _, files in os.walk(sys.argv[2]):\n\
             \x20   for f in files:\n\
             \x20       p = os.path.join(root, f)\n\
             \x20       s3.upload_file(p, sys.argv[3], sys.argv[4] + '/' + os.path.relpath(p, sys.argv[2]))",
            &[dir.to_str().unwrap(), bucket, prefix],
        );
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, name: &str) {
        self.python(
            "import sys, boto3\n\
             boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1').create_bucket(Bucket=sys.argv[2])",
            &[name],
        );
    }

    /// The keys below `prefix` in `bucket`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let out = self.python(
            "import sys, boto3\n\
             s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n\
             for page in s3.get_paginator('list_objects_v2').paginate(Bucket=sys.argv[2], Prefix=sys.argv[3]):\n\
             \x20   for o in page.get('Contents', []): print(o['Key'])",
            &[bucket, prefix],
        );
        let mut keys: Vec<String> = out.lines().map(str::to_owned).collect();
        keys.sort();
        keys
    }

    /// The object `key` of `bucket` as text, or `None` when there is none.
    pub fn get_text(&self, bucket: &str, key: &str) -> Option<String> {
        let out = self.python(
            "import sys, boto3\n\
             s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n\
             try:\n\
             \x20   print('=' + s3.get_object(Bucket=sys.argv[2], Key=sys.argv[3])['Body'].read().decode())\n\
             except s3.exceptions.NoSuchKey:\n\
             \x20   pass",
            &[bucket, key],
        );
        out.strip_prefix('=')
            .map(|t| t.trim_end_matches('\n').to_owned())
    }

    fn python(&self, script: &str, args: &[&str]) -> String {
        let out = Command::new(python())
            .arg("-c")
            .arg(script)
            .arg(self.endpoint())
            .args(args)
            .output_tied()
            .unwrap();
        assert!(
            out.status.success(),
            "boto3 against moto: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `otelprof receive --store URL` (or `serve`, by `args`) on a free HTTP port, with the object
/// store's environment; killed (SIGKILL) on drop.
pub struct BucketReceiver {
    child: Child,
    pub http: u16,
    log: PathBuf,
}

impl BucketReceiver {
    /// `otelprof receive --store URL ARGS` with `env` beside the object store's, its stderr
    /// in `log` and its local copy and working directories beside it (`LOG-cache`, not the
    /// user's cache directory, which would keep them after the test); returns once it listens
    /// (on a port it chose: ports picked by tests running at once could collide).
    pub fn start(
        s3: &S3Server,
        url: &str,
        log: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> BucketReceiver {
        let mut cache = log.as_os_str().to_owned();
        cache.push("-cache");
        let child = Command::new(cli_path())
            .args(["receive", "--store", url, "--grpc", "off"])
            .args(["--http", "127.0.0.1:0"])
            .arg("--cache")
            .arg(&cache)
            .args(args)
            .envs(s3.env())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn_tied()
            .unwrap();
        // `  HTTP  http://127.0.0.1:PORT/v1development/profiles  (agent: …)`
        let listening = || -> Option<u16> {
            let said = std::fs::read_to_string(log).ok()?;
            let line = said.lines().find(|l| l.trim_start().starts_with("HTTP "))?;
            let addr = line.split("http://").nth(1)?.split('/').next()?;
            addr.rsplit(':').next()?.parse().ok()
        };
        let start = Instant::now();
        let http = loop {
            if let Some(port) = listening() {
                break port;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "otelprof receive did not listen:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(TcpStream::connect(("127.0.0.1", http)).is_ok());
        BucketReceiver {
            child,
            http,
            log: log.to_path_buf(),
        }
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and waits for it to exit (it gives the store's lease up on the way).
    pub fn stop(mut self) {
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }

    /// SIGKILL, and waits for it to be gone.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for BucketReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
