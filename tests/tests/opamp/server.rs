//! `otelprof serve`'s OpAMP server against an OpAMP client that is not ours: PyPI
//! `opentelemetry-opamp-client` (tests/python/opamp_agent.py) connects, is listed with what
//! it reported, receives a capture started by `otelprof capture` and a settings change made
//! through the JSON API, and answers them; then the server is attacked with what a hostile
//! client might send (wrong token, oversized, malformed, wrong method or type).

use crate::opamp_support;
use otelprof_tests::Tied as _;

use std::io::Read as _;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use opamp_support::{http, wait_for};
use otelprof_opamp::proto::{ServerErrorResponseType, ServerToAgent};
use otelprof_tests::{
    cli_path, free_port, python, repo_root, run_with_timeout, scratch_dir, self_signed_cert,
};
use prost::Message as _;
use serde_json::Value;

const TOKEN: &str = "s3cret-opamp";

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const BEARER: &str = "Bearer s3cret-opamp";

fn agents(port: u16) -> Value {
    let (code, body) = http(
        port,
        "GET",
        "/api/agents",
        &[("Authorization", BEARER)],
        b"",
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

fn capture(ui: u16, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(cli_path());
    cmd.arg("capture")
        .args(["--server", &format!("http://127.0.0.1:{ui}")])
        .args(["--token", TOKEN])
        .args(args);
    let (code, out, err, _) = run_with_timeout(cmd, Duration::from_secs(60));
    (code, out, err)
}

fn opamp_error(body: &[u8]) -> (i32, String) {
    let m = ServerToAgent::decode(body).unwrap();
    let e = m.error_response.unwrap();
    (e.r#type, e.error_message)
}

#[test]
fn serve_manages_an_agent_that_is_not_ours() {
    let dir = scratch_dir("opamp-server");
    let (http_port, ui) = (free_port(), free_port());
    let _serve = Killed(
        Command::new(cli_path())
            .args(["serve", "--quiet", "--store"])
            .arg(dir.join("store"))
            .args(["--grpc", "off", "--http", &format!("127.0.0.1:{http_port}")])
            .args(["--ui", &format!("127.0.0.1:{ui}"), "--token", TOKEN])
            .stdin(Stdio::null())
            .spawn_tied()
            .unwrap(),
    );
    wait_for("serve listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", ui)).is_ok()
    });

    let mut agent = Killed(
        Command::new(python())
            .arg(repo_root().join("tests/python/opamp_agent.py"))
            .arg(format!("http://127.0.0.1:{ui}/v1/opamp"))
            .args(["i-python", "14", TOKEN])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn_tied()
            .unwrap(),
    );
    wait_for("the agent listed", Duration::from_secs(20), || {
        agents(ui)["agents"].as_array().unwrap().len() == 1
    });
    let listed = &agents(ui)["agents"][0];
    assert_eq!(listed["identifying"]["service.name"], "python-shop");
    assert_eq!(listed["identifying"]["service.instance.id"], "i-python");
    assert_eq!(listed["non_identifying"]["process.pid"], "4242");
    assert_eq!(listed["accepts_captures"], true);
    assert_eq!(listed["accepts_settings"], true);
    assert_eq!(listed["health"]["healthy"], true);
    assert_eq!(
        listed["health"]["components"]["cpu"]["status"],
        "active 10ms"
    );
    assert_eq!(listed["effective_config"]["otelprof"], "cpu=10ms");
    let uid = listed["instance_uid"].as_str().unwrap().to_owned();
    assert_eq!(uid.len(), 36, "{uid}");

    // A capture from the CLI, by service.instance.id: started, then over.
    let (code, out, err) = capture(
        ui,
        &[
            "--instance",
            "i-python",
            "--wall",
            "20ms",
            "--alloc",
            "256k",
            "--seconds",
            "2",
            "--wait",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("running until"), "{out}");
    assert!(out.lines().last().unwrap().ends_with(": done"), "{out}");
    // By instance uid; the agent refuses it, and the CLI says why and fails.
    let (code, out, err) = capture(
        ui,
        &["--instance", &uid, "--lock", "10ms", "--seconds", "5"],
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("refused: lock profiling is not available here, sorry"),
        "{out}"
    );
    // Refused before anything is sent: the bounds are the agent's.
    let (code, _, err) = capture(ui, &["--instance", &uid, "--wall", "1ms", "--seconds", "5"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("5ms"), "{err}");
    let (code, _, err) = capture(
        ui,
        &["--instance", "nobody", "--wall", "20ms", "--seconds", "5"],
    );
    assert_eq!(code, Some(1));
    assert!(err.contains("no connected agent"), "{err}");

    // Continuous settings through the API: offered as remote config, applied, reported.
    let json = [
        ("Authorization", BEARER),
        ("Content-Type", "application/json"),
    ];
    let (code, body) = http(
        ui,
        "POST",
        "/api/agents/settings",
        &json,
        br#"{"instance": "i-python", "settings": "wall=50ms, alloc=off"}"#,
    );
    assert_eq!(code, 202, "{}", String::from_utf8_lossy(&body));
    wait_for("the settings applied", Duration::from_secs(10), || {
        agents(ui)["agents"][0]["remote_config"]["status"] == "applied"
    });
    assert_eq!(
        agents(ui)["agents"][0]["desired_settings"],
        "wall=50ms,alloc=off"
    );
    let (code, body) = http(
        ui,
        "POST",
        "/api/agents/settings",
        &json,
        br#"{"instance": "i-python", "settings": "out=/etc"}"#,
    );
    assert_eq!(code, 400);
    assert!(
        String::from_utf8_lossy(&body).contains("path"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (code, body) = http(
        ui,
        "POST",
        "/api/agents/capture",
        &json,
        br#"{"instance": "i-python", "wall": "20ms", "seconds": 601}"#,
    );
    assert_eq!(code, 400);
    assert!(String::from_utf8_lossy(&body).contains("600"));
    // Without the JSON content type (what a cross-site form could send): refused.
    let (code, _) = http(
        ui,
        "POST",
        "/api/agents/capture",
        &[("Authorization", BEARER), ("Content-Type", "text/plain")],
        br#"{"instance": "i-python", "wall": "20ms", "seconds": 5}"#,
    );
    assert_eq!(code, 415);
    assert_eq!(
        agents(ui)["agents"][0]["captures"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // What the agent saw, in order; then it says goodbye and is gone from the table.
    let status = agent.0.wait().unwrap();
    assert!(status.success());
    let mut text = String::new();
    agent
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["event"], "connected", "{text}");
    assert_eq!(
        events[0]["server_capabilities"], 7,
        "AcceptsStatus, OffersRemoteConfig, AcceptsEffectiveConfig"
    );
    assert_eq!(
        events[0]["custom_capabilities"][0],
        "io.opentelemetry.otelprof.capture"
    );
    let captures: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "capture")
        .map(|e| e["data"].as_str().unwrap())
        .collect();
    assert_eq!(captures.len(), 2, "{text}");
    assert!(
        captures[0].ends_with(",wall=20ms,alloc=256k,seconds=2"),
        "{}",
        captures[0]
    );
    assert!(
        captures[1].ends_with(",lock=10ms,seconds=5"),
        "{}",
        captures[1]
    );
    let configs: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "remote_config")
        .collect();
    assert_eq!(
        configs.len(),
        1,
        "offered until applied, then not again: {text}"
    );
    assert_eq!(configs[0]["body"], "wall=50ms,alloc=off");
    assert_eq!(configs[0]["content_type"], "text/plain; charset=utf-8");
    assert!(!events.iter().any(|e| e["event"] == "error"), "{text}");
    assert_eq!(events.last().unwrap()["event"], "disconnected");
    assert_eq!(agents(ui)["agents"].as_array().unwrap().len(), 0);

    // Hostile clients.
    let pb = [
        ("Authorization", BEARER),
        ("Content-Type", "application/x-protobuf"),
    ];
    let (code, body) = http(
        ui,
        "POST",
        "/v1/opamp",
        &[("Content-Type", "application/x-protobuf")],
        b"",
    );
    assert_eq!(code, 401);
    assert!(opamp_error(&body).1.contains("token"));
    let (code, _) = http(
        ui,
        "POST",
        "/v1/opamp",
        &[
            ("Authorization", "Bearer wrong"),
            ("Content-Type", "application/x-protobuf"),
        ],
        b"",
    );
    assert_eq!(code, 401);
    let (code, _) = http(ui, "GET", "/api/agents", &[], b"");
    assert_eq!(code, 401);
    let (code, body) = http(ui, "POST", "/v1/opamp", &pb, &vec![0u8; 2 << 20]);
    assert_eq!(code, 413);
    assert!(opamp_error(&body).1.contains("larger than"));
    let (code, body) = http(ui, "POST", "/v1/opamp", &pb, b"\xff\xff\xff\xff");
    assert_eq!(code, 400);
    let (kind, why) = opamp_error(&body);
    assert_eq!(kind, ServerErrorResponseType::BadRequest as i32);
    assert!(why.contains("not an AgentToServer"), "{why}");
    // A 5-byte instance uid.
    let (code, body) = http(ui, "POST", "/v1/opamp", &pb, b"\x0a\x05abcde");
    assert_eq!(code, 400);
    assert!(opamp_error(&body).1.contains("16"));
    // A gzip bomb: 64 MiB of zeros in 64 KiB.
    let bomb = {
        use std::io::Write as _;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&vec![0u8; 64 << 20]).unwrap();
        e.finish().unwrap()
    };
    let mut gz = pb.to_vec();
    gz.push(("Content-Encoding", "gzip"));
    let (code, _) = http(ui, "POST", "/v1/opamp", &gz, &bomb);
    assert_eq!(code, 413);
    let (code, _) = http(ui, "GET", "/v1/opamp", &[("Authorization", BEARER)], b"");
    assert_eq!(code, 405);
    let (code, _) = http(
        ui,
        "POST",
        "/v1/opamp",
        &[
            ("Authorization", BEARER),
            ("Content-Type", "application/json"),
        ],
        b"{}",
    );
    assert_eq!(code, 415);
    assert_eq!(
        agents(ui)["agents"].as_array().unwrap().len(),
        0,
        "nothing malformed was listed"
    );
}

/// With TLS, agents and `otelprof capture` reach serve through its certificate; a capture
/// client that does not trust it is refused by TLS, not by a silent fallback.
#[test]
fn captures_over_tls() {
    let dir = scratch_dir("opamp-tls");
    // Not a CA: rustls (the capture command's TLS) refuses a CA certificate as a server's.
    let (cert, key) = self_signed_cert(&dir, &["basicConstraints=critical,CA:FALSE"]);
    let (http_port, ui) = (free_port(), free_port());
    let _serve = Killed(
        Command::new(cli_path())
            .args(["serve", "--quiet", "--store"])
            .arg(dir.join("store"))
            .args(["--grpc", "off", "--http", &format!("127.0.0.1:{http_port}")])
            .args(["--ui", &format!("127.0.0.1:{ui}")])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .stdin(Stdio::null())
            .spawn_tied()
            .unwrap(),
    );
    wait_for("serve listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", ui)).is_ok()
    });
    let _agent = Killed(
        Command::new(python())
            .arg(repo_root().join("tests/python/opamp_agent.py"))
            .arg(format!("https://localhost:{ui}/v1/opamp"))
            .args(["i-tls", "30"])
            .env("OPAMP_CA", &cert)
            .stdout(Stdio::null())
            .spawn_tied()
            .unwrap(),
    );
    let server = format!("https://localhost:{ui}");
    let capture = |extra: &[&str]| {
        let mut cmd = Command::new(cli_path());
        cmd.args(["capture", "--server", &server])
            .args([
                "--instance",
                "i-tls",
                "--wall",
                "20ms",
                "--seconds",
                "1",
                "--wait",
            ])
            .args(extra);
        let (code, out, err, _) = run_with_timeout(cmd, Duration::from_secs(60));
        (code, out, err)
    };
    let (code, _, err) = capture(&[]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("TLS with localhost") && err.contains("--cacert"),
        "{err}"
    );
    let cacert = cert.to_str().unwrap();
    // Until the agent (Python's requests, trusting the same certificate) has connected, serve
    // knows no such instance.
    let started = std::time::Instant::now();
    let (code, out, err) = loop {
        let (code, out, err) = capture(&["--cacert", cacert]);
        if !err.contains("no connected agent") || started.elapsed() > Duration::from_secs(20) {
            break (code, out, err);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.lines().last().unwrap().ends_with(": done"), "{out}");
}
