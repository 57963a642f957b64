//! What the tests need from the machine: the build's outputs (the agent, the jar and the
//! CLI of `cargo build --release`), scratch directories, tools on the PATH, the Python venv
//! of the official OTLP classes, the browser tests' node modules, and free loopback ports.

use crate::process::Tied as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `target/release`, where `cargo build --release` puts the agent and the CLI.
pub fn release_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    dir.join("release")
}

pub fn agent_path() -> PathBuf {
    let p = release_dir().join("libotelprof.so");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release` first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// `target/release/otelprof.jar`, built by `cargo build --release` (native/build.rs).
pub fn jar_path() -> PathBuf {
    let p = release_dir().join("otelprof.jar");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release` with a JDK on the PATH",
        p.display()
    );
    p
}

pub fn cli_path() -> PathBuf {
    let p = release_dir().join("otelprof");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --release` first",
        p.display()
    );
    p
}

/// Runs `otelprof ARGS`: exit code (-1 when killed by a signal), stdout, stderr.
pub fn otelprof(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cli_path()).args(args).output_tied().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh directory under `target/otelprof-tests/`, unique per call.
pub fn scratch_dir(what: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = release_dir()
        .parent()
        .unwrap()
        .join("otelprof-tests")
        .join(format!("{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    })
}

/// The Python interpreter of the test venv (PyPI `opentelemetry-proto`, `grpcio`, `PyYAML`,
/// pinned in `tests/python/requirements.txt`), made by `scripts/test.sh`, or
/// `OTELPROF_PYTHON`.
pub fn python() -> PathBuf {
    let p = std::env::var_os("OTELPROF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| release_dir().parent().unwrap().join("otlp-venv/bin/python"));
    assert!(
        p.is_file(),
        "{} is missing: run scripts/test.sh (it creates the venv with the official OTLP classes)",
        p.display()
    );
    p
}

/// The node modules the browser tests (tests/browser) load: `playwright-core` at the version
/// tests/browser/package.json pins, which scripts/test.sh installs under
/// target/browser-node; the browser is Debian's Chromium.
pub fn browser_node_modules() -> PathBuf {
    let dir = release_dir()
        .parent()
        .unwrap()
        .join("browser-node/node_modules");
    assert!(
        dir.join("playwright-core/package.json").is_file(),
        "{} has no playwright-core: run scripts/test.sh (it installs the version pinned in \
         tests/browser/package.json)",
        dir.display()
    );
    assert!(
        Path::new("/usr/bin/chromium").is_file(),
        "no /usr/bin/chromium: install Debian chromium (scripts/test.sh does)"
    );
    dir
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A self-signed certificate for `localhost` and 127.0.0.1, made by Debian's `openssl` in
/// `dir` with the `extensions` given (`-addext` values) besides the subject's names:
/// `(certificate, key)`, PEM.
pub fn self_signed_cert(dir: &Path, extensions: &[&str]) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let mut openssl = Command::new("openssl");
    openssl
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]);
    for e in extensions {
        openssl.args(["-addext", e]);
    }
    let status = openssl
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status_tied()
        .expect("openssl (Debian openssl) makes the test certificate");
    assert!(status.success(), "openssl failed");
    (cert, key)
}
