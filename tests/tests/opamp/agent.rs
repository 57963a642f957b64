//! The agent in a real JVM, managed by `otelprof serve` over OpAMP (`opamp=`): it reports who
//! it is (the resource of its profiles, the JVM, its options), its health and what it
//! profiles; it runs a capture (wall-clock samples for two seconds, its profiles carrying the
//! capture's id) and then profiles as before, applies continuous settings, refuses what it
//! must refuse with the reason, and says goodbye at exit. An unreachable server costs one log
//! line and nothing else.

use crate::opamp_support;

use std::process::Command;
use std::time::Duration;

use opamp_support::{http, wait_for};
use otelprof_tests::receive::{Launch, ReceiveProcess};
use otelprof_tests::{
    cli_path, free_port, jdk17, jdk25, otelprof, run_with_timeout, scratch_dir, JvmRun,
};
use serde_json::Value;

fn agents(port: u16) -> Vec<Value> {
    let (code, body) = http(port, "GET", "/api/agents", &[], b"");
    assert_eq!(code, 200);
    let v: Value = serde_json::from_slice(&body).unwrap();
    v["agents"].as_array().unwrap().clone()
}

#[test]
fn a_jvm_reports_to_serve_and_answers_its_requests() {
    let dir = scratch_dir("opamp-agent");
    let store = dir.join("store");
    let serve = ReceiveProcess::launch(Launch {
        store: Some(&store),
        ui_host: Some("127.0.0.1"),
        ..Launch::default()
    });
    let ui = serve.ui.unwrap();
    let run = JvmRun::new(jdk17(), "otelprof.tests.HotLine")
        .args(&["20"])
        .agent(&format!(
            "cpu=10ms,service=opamp-shop,opamp=http://127.0.0.1:{ui}/v1/opamp,opamp_interval=200ms"
        ));
    let jvm = std::thread::spawn(move || run.run());

    wait_for("the JVM listed", Duration::from_secs(30), || {
        agents(ui).len() == 1
    });
    let a = agents(ui).remove(0);
    assert_eq!(a["identifying"]["service.name"], "opamp-shop");
    // The OpAMP instance uid is the profiles' service.instance.id.
    let instance = a["identifying"]["service.instance.id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(a["instance_uid"], instance.as_str());
    let n = &a["non_identifying"];
    assert!(n["process.pid"].as_str().unwrap().parse::<u32>().unwrap() > 1);
    assert!(
        n["process.runtime.version"]
            .as_str()
            .unwrap()
            .starts_with("17"),
        "{n}"
    );
    assert_eq!(n["os.type"], "linux");
    assert_eq!(
        n["otelprof.options"],
        "period=60s,depth=2048,clock=auto,wall_threads=16,alloc_rate=500"
    );
    assert!(
        n.get("process.command_args").is_none(),
        "no command line: {n}"
    );
    assert_eq!(a["accepts_captures"], true);
    assert_eq!(a["health"]["healthy"], true);
    assert_eq!(a["health"]["status"], "profiling cpu 10ms");
    let c = &a["health"]["components"];
    assert_eq!(c["cpu"]["status"], "active 10ms");
    assert_eq!(c["wall"]["status"], "available");
    assert_eq!(c["alloc"]["status"], "available", "{c}");
    assert_eq!(c["live"]["status"], "available", "{c}");
    assert_eq!(
        a["effective_config"]["otelprof"],
        "cpu=10ms,wall=off,alloc=off,live=off,lock=off"
    );

    // A capture: wall-clock samples for 2 s on top of CPU, then CPU alone again.
    let mut cmd = Command::new(cli_path());
    cmd.args(["capture", "--server", &format!("http://127.0.0.1:{ui}")])
        .args([
            "--instance",
            &instance,
            "--wall",
            "20ms",
            "--seconds",
            "2",
            "--wait",
        ]);
    let (code, out, err, _) = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}{err}");
    let id = out
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("capture "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    assert!(
        out.contains(&format!("capture {id}: running until")),
        "{out}"
    );
    assert!(out.contains(&format!("capture {id}: done")), "{out}");
    wait_for("CPU alone again", Duration::from_secs(10), || {
        agents(ui)[0]["health"]["status"] == "profiling cpu 10ms"
    });
    // A second capture of more than the bound is refused by the server, before the agent.
    let mut cmd = Command::new(cli_path());
    cmd.args(["capture", "--server", &format!("http://127.0.0.1:{ui}")])
        .args([
            "--instance",
            &instance,
            "--wall",
            "20ms",
            "--seconds",
            "3600",
        ]);
    let (code, out, err, _) = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(code, Some(1), "{out}{err}");

    // Settings: wall-clock sampling from now on, reported as an APPLIED remote config and in
    // the effective config.
    let (code, _) = http(
        ui,
        "POST",
        "/api/agents/settings",
        &[("Content-Type", "application/json")],
        format!(r#"{{"instance": "{instance}", "settings": "wall=50ms"}}"#).as_bytes(),
    );
    assert_eq!(code, 202);
    wait_for("the settings applied", Duration::from_secs(15), || {
        let a = &agents(ui)[0];
        a["remote_config"]["status"] == "applied"
            && a["effective_config"]["otelprof"] == "cpu=10ms,wall=50ms,alloc=off,live=off,lock=off"
    });
    // Settings that turn everything off are refused, and the session goes on.
    let (code, _) = http(
        ui,
        "POST",
        "/api/agents/settings",
        &[("Content-Type", "application/json")],
        format!(r#"{{"instance": "{instance}", "settings": "cpu=off,wall=off"}}"#).as_bytes(),
    );
    assert_eq!(code, 202);
    wait_for("the settings refused", Duration::from_secs(15), || {
        agents(ui)[0]["remote_config"]["status"] == "failed"
    });
    assert!(agents(ui)[0]["remote_config"]["error"]
        .as_str()
        .unwrap()
        .contains("turn every profile type off"));
    assert_eq!(
        agents(ui)[0]["effective_config"]["otelprof"],
        "cpu=10ms,wall=50ms,alloc=off,live=off,lock=off"
    );

    let out = jvm.join().unwrap();
    out.assert_clean_exit();
    assert!(
        out.agent_lines()
            .iter()
            .any(|l| l.contains("managed over OpAMP by http://127.0.0.1:")),
        "{}",
        out.stderr
    );
    assert!(!out.profiles_of("cpu").is_empty(), "profiling went on");
    // The capture's wall-clock profile carries its id; the settings' does not.
    let dir = out.out_dir.to_str().unwrap().to_owned();
    let capture = format!("otelprof.capture.id={id}");
    let (code, top, err) = otelprof(&["top", "--type", "wall", "--where", &capture, &dir]);
    assert_eq!(code, 0, "{top}{err}");
    let (code, top, err) = otelprof(&[
        "top",
        "--type",
        "wall",
        "--where",
        &capture.replacen('=', "!=", 1),
        &dir,
    ]);
    assert_eq!(code, 0, "wall-clock profiles of the settings: {top}{err}");
    wait_for("the goodbye", Duration::from_secs(5), || {
        agents(ui).is_empty()
    });
}

/// A capture of the live heap (`otelprof capture --live`): while it runs the agent reports
/// the live heap active, and the capture's end writes a live snapshot carrying its id, of
/// the objects the JVM holds (tests/java LiveTarget), not of those it wastes.
#[test]
fn a_capture_with_live_gives_a_live_snapshot_with_its_id() {
    let dir = scratch_dir("opamp-live");
    let store = dir.join("store");
    let serve = ReceiveProcess::launch(Launch {
        store: Some(&store),
        ui_host: Some("127.0.0.1"),
        ..Launch::default()
    });
    let ui = serve.ui.unwrap();
    let run = JvmRun::new(jdk25(), "otelprof.tests.LiveTarget")
        .args(&["25"])
        .flags(&["-Xmx256m", "-Xmn16m"])
        .agent(&format!(
            "cpu=10ms,period=60s,opamp=http://127.0.0.1:{ui}/v1/opamp,opamp_interval=200ms"
        ));
    let jvm = std::thread::spawn(move || run.run());
    wait_for("the JVM listed", Duration::from_secs(30), || {
        agents(ui).len() == 1
    });
    let instance = agents(ui)[0]["identifying"]["service.instance.id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut cmd = Command::new(cli_path());
    cmd.args(["capture", "--server", &format!("http://127.0.0.1:{ui}")])
        .args(["--instance", &instance, "--live", "32k", "--seconds", "4"]);
    let (code, out, err, _) = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}{err}");
    let id = out
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("capture "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    wait_for("the live heap active", Duration::from_secs(15), || {
        agents(ui)[0]["health"]["components"]["live"]["status"] == "active 32k"
    });
    wait_for("CPU alone again", Duration::from_secs(20), || {
        agents(ui)[0]["health"]["status"] == "profiling cpu 10ms"
    });
    let out = jvm.join().unwrap();
    out.assert_clean_exit();
    let files = out.profiles_of("live");
    assert_eq!(
        files.len(),
        1,
        "one snapshot, at the capture's end: {files:?}"
    );
    let samples = otelprof_tests::pprof_traces(&files, "inuse_space");
    let total: f64 = samples.iter().map(|s| s.value).sum();
    let held: f64 = samples
        .iter()
        .filter(|s| s.has_frame("keep"))
        .map(|s| s.value)
        .sum();
    println!(
        "capture {id}: {:.1} MB live, {:.1} MB held by keep",
        total / 1e6,
        held / 1e6
    );
    assert!(total > 1e6 && held >= 0.9 * total, "{samples:?}");
    assert!(samples
        .iter()
        .all(|s| s.label("otelprof.capture.id") == Some(id.as_str())));
}

#[test]
fn an_unreachable_server_costs_one_line() {
    let closed = free_port();
    let out = JvmRun::new(jdk25(), "otelprof.tests.HotLine")
        .args(&["3"])
        .agent(&format!(
            "cpu=10ms,opamp=http://127.0.0.1:{closed}/v1/opamp,opamp_interval=100ms"
        ))
        .run();
    out.assert_clean_exit();
    let lines = out.agent_lines();
    let unreachable = lines
        .iter()
        .filter(|l| l.contains("cannot reach the OpAMP server"))
        .count();
    assert_eq!(unreachable, 1, "{}", out.stderr);
    assert!(!out.profiles_of("cpu").is_empty());
    assert!(
        out.elapsed < Duration::from_secs(20),
        "exit was held up: {:?}",
        out.elapsed
    );
}
