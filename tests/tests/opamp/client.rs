//! The agent's OpAMP client (otelprof-exporter's `opamp`) against a server played by the
//! generated classes of PyPI `opentelemetry-opamp-client` (tests/python/opamp_server.py): it
//! starts before the server is up (one log line), reports who it is in full, runs the
//! capture it is offered once and reports it running then done, refuses the one with a path
//! with the reason, applies the settings and reports their hash, waits out a 503, and says
//! goodbye when stopped. The JVM's side is a recorder of what the client hands it.

use otelprof_tests::Tied as _;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use otelprof_exporter::{LogLevel, Logger};
use otelprof_opamp::capture::Capture;
use otelprof_opamp::client::{AgentStatus, Control, OpampClient, OpampConfig, TypeState};
use otelprof_opamp::proto::{AgentDescription, KeyValue};
use otelprof_opamp::settings::Settings;
use otelprof_tests::{free_port, python, repo_root};
use serde_json::Value;

/// Stands in for the JVM agent: records what the client hands it.
#[derive(Default)]
struct Recorder {
    captures: Mutex<Vec<String>>,
    settings: Mutex<Vec<String>>,
}

impl Control for Recorder {
    fn capture(&self, c: &Capture) -> Result<(), String> {
        self.captures.lock().unwrap().push(c.text());
        Ok(())
    }
    fn settings(&self, s: &Settings) -> Result<(), String> {
        self.settings.lock().unwrap().push(s.text());
        Ok(())
    }
    fn status(&self) -> AgentStatus {
        let settings = self.settings.lock().unwrap();
        AgentStatus {
            healthy: true,
            status: "profiling cpu 10ms".into(),
            last_error: String::new(),
            types: vec![
                ("cpu", TypeState::Active("10ms".into())),
                ("lock", TypeState::Unavailable("no monitor events".into())),
            ],
            effective: settings
                .last()
                .cloned()
                .unwrap_or_else(|| "cpu=10ms".into()),
        }
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn our_client_against_a_server_of_the_official_classes() {
    let port = free_port();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log: Logger = {
        let lines = lines.clone();
        Arc::new(move |_: LogLevel, line: &str| lines.lock().unwrap().push(line.to_owned()))
    };
    let recorder = Arc::new(Recorder::default());
    let uid: [u8; 16] = *b"\x01\x8f\x00\x00\x00\x00\x70\x00\x80\x00\x00\x00\x00\x00\x00\x01";
    let config = OpampConfig {
        endpoint: format!("http://127.0.0.1:{port}/v1/opamp"),
        headers: vec![("Authorization".into(), "Bearer t0k".into())],
        interval: Duration::from_millis(200),
        certificate: None,
    };
    let description = AgentDescription {
        identifying_attributes: vec![
            KeyValue::string("service.name", "shop"),
            KeyValue::string(
                "service.instance.id",
                "018f0000-0000-7000-8000-000000000001",
            ),
        ],
        non_identifying_attributes: vec![KeyValue::int("process.pid", 77)],
    };
    // The server is not up yet: the client must say so once and keep trying.
    let client = OpampClient::start(config, uid, description, recorder.clone(), log).unwrap();
    std::thread::sleep(Duration::from_millis(900));
    let mut server = Killed(
        Command::new(python())
            .arg(repo_root().join("tests/python/opamp_server.py"))
            .args([&port.to_string(), "t0k"])
            .stdout(Stdio::piped())
            .spawn_tied()
            .unwrap(),
    );
    let out = BufReader::new(server.0.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(serde_json::from_str(&line).unwrap());
        }
    });
    let mut messages: Vec<Value> = Vec::new();
    let statuses = |m: &[Value]| -> Vec<String> {
        m.iter()
            .filter_map(|x| x["custom_message"]["data"].as_str())
            .map(|b| String::from_utf8(decode_b64(b)).unwrap())
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while !statuses(&messages)
        .iter()
        .any(|s| s == "id=py-1,state=done")
        || !statuses(&messages)
            .iter()
            .any(|s| s.starts_with("id=py-2,state=refused"))
        || messages.len() < 12
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(m) => messages.push(m),
            Err(_) => panic!("the conversation did not finish: {messages:#?}"),
        }
    }
    client.stop(Duration::from_secs(2));
    while let Ok(m) = rx.recv_timeout(Duration::from_secs(5)) {
        messages.push(m);
        if messages.last().unwrap().get("agent_disconnect").is_some() {
            break;
        }
    }

    // What the client told, and what it handed the agent.
    let lines = lines.lock().unwrap().clone();
    let unreachable = lines
        .iter()
        .filter(|l| l.contains("cannot reach the OpAMP server"))
        .count();
    assert_eq!(unreachable, 1, "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("answers again")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("HTTP 503")), "{lines:?}");
    assert_eq!(
        recorder.captures.lock().unwrap().clone(),
        ["id=py-1,wall=20ms,seconds=1"]
    );
    assert_eq!(recorder.settings.lock().unwrap().clone(), ["wall=50ms"]);

    // What the server received.
    let first = &messages[0];
    assert_eq!(first["_headers"]["content_type"], "application/x-protobuf");
    assert_eq!(first["_headers"]["authorization"], "Bearer t0k");
    assert_eq!(
        first["_headers"]["instance_uid"],
        "018f0000-0000-7000-8000-000000000001"
    );
    assert_eq!(
        first["agent_description"]["identifying_attributes"][0]["value"]["string_value"],
        "shop"
    );
    assert_eq!(
        first["agent_description"]["non_identifying_attributes"][0]["value"]["int_value"],
        "77"
    );
    // ReportsStatus, AcceptsRemoteConfig, ReportsEffectiveConfig, ReportsHealth,
    // ReportsRemoteConfig, ReportsHeartbeat.
    assert_eq!(first["capabilities"], "14343");
    assert_eq!(
        first["custom_capabilities"]["capabilities"][0],
        "io.opentelemetry.otelprof.capture"
    );
    assert_eq!(first["health"]["healthy"], true);
    assert_eq!(
        first["health"]["component_health_map"]["cpu"]["status"],
        "active 10ms"
    );
    assert_eq!(
        first["health"]["component_health_map"]["lock"]["last_error"],
        "no monitor events"
    );
    // Sequence numbers count every message sent, failed ones included: the server sees gaps
    // only where messages were lost.
    let seqs: Vec<u64> = messages
        .iter()
        .map(|m| m["sequence_num"].as_str().unwrap_or("0").parse().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{seqs:?}");
    // The settings: applied, reported with their hash, in force in the effective config.
    let applied = messages
        .iter()
        .find(|m| m.get("remote_config_status").is_some())
        .expect("a remote config status");
    assert_eq!(
        applied["remote_config_status"]["status"],
        "RemoteConfigStatuses_APPLIED"
    );
    assert_eq!(
        applied["remote_config_status"]["last_remote_config_hash"],
        "aDE="
    );
    let effective = &applied["effective_config"]["config_map"]["config_map"]["otelprof"]["body"];
    assert_eq!(decode_b64(effective.as_str().unwrap()), b"wall=50ms");
    // The captures: running once (the first offer), done when its second was over; the
    // other refused with the reason.
    let st = statuses(&messages);
    assert!(st[0].starts_with("id=py-1,state=running,ends="), "{st:?}");
    assert!(
        st.iter()
            .any(|s| s.starts_with("id=py-2,state=refused,reason=out is refused")),
        "{st:?}"
    );
    // After the 503, everything again (the server may have lost it).
    let after_503 = messages
        .iter()
        .skip_while(|m| m.get("agent_description").is_none())
        .skip(1)
        .position(|m| m.get("agent_description").is_some());
    assert!(after_503.is_some(), "no full report after the 503");
    assert!(
        messages.last().unwrap().get("agent_disconnect").is_some(),
        "no goodbye"
    );
}

fn decode_b64(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes().filter(|c| *c != b'=') {
        bits = (bits << 6) | A.iter().position(|a| *a == c).unwrap() as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out
}

#[test]
fn a_hostile_server_gets_refusals_and_log_lines_not_a_crash() {
    let port = free_port();
    let mut server = Killed(
        Command::new(python())
            .arg(repo_root().join("tests/python/opamp_hostile_server.py"))
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .spawn_tied()
            .unwrap(),
    );
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log: Logger = {
        let lines = lines.clone();
        Arc::new(move |_: LogLevel, line: &str| lines.lock().unwrap().push(line.to_owned()))
    };
    let recorder = Arc::new(Recorder::default());
    let config = OpampConfig {
        endpoint: format!("http://127.0.0.1:{port}/v1/opamp"),
        headers: vec![],
        interval: Duration::from_millis(100),
        certificate: None,
    };
    let out = BufReader::new(server.0.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(serde_json::from_str(&line).unwrap());
        }
    });
    // Wait for the server's port before starting, so that unreachability is not in the log.
    wait_for_port(port);
    let client = OpampClient::start(
        config,
        [7; 16],
        AgentDescription::default(),
        recorder.clone(),
        log,
    )
    .unwrap();
    let mut records = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while !records
        .iter()
        .any(|r: &Value| r["status"] == "id=good,state=done")
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        records.push(
            rx.recv_timeout(left)
                .unwrap_or_else(|_| panic!("no done for the good capture: {records:#?}")),
        );
    }
    client.stop(Duration::from_secs(2));
    let lines = lines.lock().unwrap().clone();
    let said = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(said("over 1 MiB"), 1, "{lines:?}");
    assert_eq!(said("not a ServerToAgent message"), 1, "{lines:?}");
    assert_eq!(said("HTTP 500"), 1, "{lines:?}");
    assert_eq!(
        said("your message is bad \\u{1b}[31m"),
        1,
        "escaped: {lines:?}"
    );
    assert_eq!(said("cannot reach"), 0, "{lines:?}");
    let statuses: Vec<&str> = records
        .iter()
        .filter_map(|r| r["status"].as_str())
        .collect();
    assert!(
        statuses
            .iter()
            .any(|s| s.starts_with("id=huge,state=refused,reason=the capture is")),
        "{statuses:?}"
    );
    assert!(
        statuses
            .iter()
            .any(|s| s.starts_with("id=path,state=refused,reason=out is refused")),
        "{statuses:?}"
    );
    let config_errors: Vec<&str> = records
        .iter()
        .filter_map(|r| r["config_error"].as_str())
        .filter(|e| !e.is_empty())
        .collect();
    assert!(
        config_errors.iter().any(|e| e.contains("not otelprof's")),
        "{config_errors:?}"
    );
    assert!(
        config_errors.iter().any(|e| e.contains("not UTF-8")),
        "{config_errors:?}"
    );
    // Only the good capture reached the agent; no settings did.
    assert_eq!(
        recorder.captures.lock().unwrap().clone(),
        ["id=good,wall=20ms,seconds=1"]
    );
    assert!(recorder.settings.lock().unwrap().is_empty());
}

fn wait_for_port(port: u16) {
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
