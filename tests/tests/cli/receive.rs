//! `otelprof receive` as a real process: real JVMs with the agent export to it over gRPC and
//! HTTP, an independent client (tests/cli/otlp_client.py on the official Python classes and
//! grpcio, the wire a Collector's exporter speaks) sends it valid and malformed requests, and
//! the reading commands read back what it stored.

use otelprof_tests::Tied as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use otelprof_tests::receive::{files_below, ReceiveProcess};
use otelprof_tests::{
    cli_path, free_port, jdk17, otelprof, python, repo_root, scratch_dir, self_signed_cert, JvmRun,
};
use serde_json::Value;

const CPU_SPLIT: &str = "otelprof.workloads.CpuSplit";

fn client(args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(repo_root().join("tests/cli/otlp_client.py"))
        .args(args)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "otlp_client.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if out.stdout.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A valid request made by the independent client.
fn python_profile(dir: &Path, version: &str, function: &str, samples: u32) -> PathBuf {
    let p = dir.join(format!("py-{version}-{samples}.pb"));
    client(&[
        "--make-profile",
        p.to_str().unwrap(),
        "--version",
        version,
        "--function",
        function,
        "--samples",
        &samples.to_string(),
    ]);
    p
}

/// The self and total columns of `function`'s row in a `top` table (`self self% total total%
/// function (File.java)`).
fn top_row(table: &str, function: &str) -> Option<(String, String)> {
    table.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.get(4) == Some(&function)).then(|| (cols[0].to_owned(), cols[2].to_owned()))
    })
}

#[test]
fn jvms_export_over_grpc_and_http_and_every_reader_sees_them() {
    let receive = ReceiveProcess::start(&[]);
    let mut cpu_ms = Vec::new();
    for (version, protocol, port) in [
        ("a", "grpc", receive.grpc),
        ("b", "http/protobuf", receive.http),
    ] {
        let out = JvmRun::new(jdk17(), CPU_SPLIT)
            .agent(&format!(
                "endpoint=http://127.0.0.1:{port},protocol={protocol},period=1s"
            ))
            .env("OTEL_SERVICE_NAME", "split")
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                &format!("service.version={version}"),
            )
            .args(&["2", "2"])
            .run();
        out.assert_clean_exit();
        let counters = out.agent_counters();
        assert!(counters["otlp_sent"] >= 2, "{counters:?}");
        assert_eq!(counters["otlp_rejected"], 0, "{counters:?}");
        let ms: f64 = out
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("cpu_ms "))
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
            .sum();
        cpu_ms.push(ms);
    }
    let files = receive.stored_profiles();
    assert!(files.len() >= 4, "{files:?}");
    // gRPC requests are stored as protobuf, HTTP gzip bodies as they came.
    let named = |suffix: &str| files.iter().any(|f| f.to_string_lossy().ends_with(suffix));
    assert!(named(".otlp.pb") && named(".otlp.pb.gz"), "{files:?}");
    let store = receive.store.to_str().unwrap();

    // Per version: the workload's own CPU time against what the store says, within 20%.
    for (version, want) in ["a", "b"].iter().zip(&cpu_ms) {
        let (code, out, err) = otelprof(&[
            "top",
            "--where",
            &format!("service.version={version}"),
            "--limit",
            "0",
            store,
        ]);
        assert_eq!(code, 0, "{err}");
        let (_, total) = top_row(&out, "otelprof.workloads.CpuSplit.work").unwrap();
        let total_ms = parse_ms(&total);
        assert!(
            (total_ms - want).abs() <= 0.2 * want,
            "version {version}: store says {total_ms} ms in work(), the JVM measured {want} ms\n{out}"
        );
        assert!(out.contains("otelprof.workloads.CpuSplit.sixty"), "{out}");
    }
    // Both JVMs merge; --by splits them again.
    let (code, out, err) = otelprof(&["top", "--by", "service.version", store]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("from 2 processes"), "{out}");
    let versions: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("(hottest: otelprof.workloads.CpuSplit.spin)"))
        .collect();
    assert_eq!(versions.len(), 2, "{out}");
    // Selecting nothing explains itself.
    let (code, _, err) = otelprof(&["top", "--where", "service.version=zz", store]);
    assert_eq!(code, 1);
    assert!(err.contains("service.version has: a, b"), "{err}");
    // The time selector: everything is after 2020 and before now + 1 h.
    let (code, _, err) = otelprof(&["top", "--from", "2020-01-01", "--to", "2020-01-02", store]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = otelprof(&["top", "--from", "now-1h", store]);
    assert_eq!(code, 0, "{err}");
}

fn parse_ms(text: &str) -> f64 {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap();
    let (n, unit) = text.split_at(split);
    let n: f64 = n.parse().unwrap();
    match unit {
        "ms" => n,
        "s" => n * 1000.0,
        "min" => n * 60_000.0,
        "us" => n / 1000.0,
        other => panic!("unit {other} in {text}"),
    }
}

#[test]
fn malformed_and_oversized_requests_get_reasons_and_store_nothing() {
    let receive = ReceiveProcess::start(&["--max-request-size", "64k"]);
    let dir = scratch_dir("client");
    let valid = python_profile(&dir, "1", "py.sender.Work.compute", 5);
    let garbage = dir.join("garbage.pb");
    std::fs::write(
        &garbage,
        (0..300u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let big = dir.join("big.pb");
    std::fs::write(&big, vec![0u8; 200 << 10]).unwrap();
    let grpc = format!("127.0.0.1:{}", receive.grpc);
    let http = format!("http://127.0.0.1:{}", receive.http);
    let send = |protocol: &str, body: &Path, extra: &[&str]| {
        let target = if protocol == "grpc" { &grpc } else { &http };
        let mut args = vec![
            "--protocol",
            protocol,
            "--target",
            target,
            "--body",
            body.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        client(&args)
    };

    for (protocol, gzip) in [
        ("grpc", false),
        ("grpc", true),
        ("http", false),
        ("http", true),
    ] {
        let r = send(protocol, &valid, if gzip { &["--gzip"] } else { &[] });
        assert_eq!(r["ok"], true, "{protocol} gzip={gzip}: {r}");
    }
    let r = send("grpc", &garbage, &[]);
    assert_eq!(r["code"], "INVALID_ARGUMENT", "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("invalid OTLP profiles request"),
        "{r}"
    );
    let r = send("http", &garbage, &[]);
    assert_eq!(r["code"], 400, "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("invalid OTLP profiles request"),
        "{r}"
    );
    let r = send("http", &big, &[]);
    assert_eq!(r["code"], 413, "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("limit of 65536 bytes"),
        "{r}"
    );
    // A small gzip body that inflates past the limit (a "zip bomb") is refused too.
    let r = send("http", &big, &["--gzip"]);
    assert_eq!(r["code"], 413, "{r}");
    let r = send("grpc", &big, &[]);
    assert_ne!(r["ok"], true, "{r}");
    let r = send("http", &valid, &["--content-type", "application/json"]);
    assert_eq!(r["code"], 415, "{r}");

    // Only the four valid requests were stored, and all of them read back: 4 × 5 samples of
    // 10 ms from an independent producer.
    assert_eq!(receive.stored_profiles().len(), 4);
    let (code, out, err) = otelprof(&["top", receive.store.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    assert_eq!(
        top_row(&out, "py.sender.Work.compute"),
        Some(("200ms".to_owned(), "200ms".to_owned())),
        "{out}"
    );
    // The receiver is still up and still accepting.
    assert_eq!(send("grpc", &valid, &[])["ok"], true);
}

#[test]
fn beyond_loopback_a_token_is_required_and_checked() {
    let store = scratch_dir("open-store");
    let (code, _, err) = otelprof(&[
        "receive",
        "--store",
        store.to_str().unwrap(),
        "--grpc",
        &format!("0.0.0.0:{}", free_port()),
        "--http",
        "off",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--token") && err.contains("--tls-cert"),
        "{err}"
    );

    let receive = ReceiveProcess::start(&["--token", "s3cret-token"]);
    let dir = scratch_dir("client-token");
    let valid = python_profile(&dir, "1", "py.sender.Work.compute", 5);
    let grpc = format!("127.0.0.1:{}", receive.grpc);
    let http = format!("http://127.0.0.1:{}", receive.http);
    let body = valid.to_str().unwrap();
    let r = client(&["--protocol", "grpc", "--target", &grpc, "--body", body]);
    assert_eq!(r["code"], "UNAUTHENTICATED", "{r}");
    let r = client(&[
        "--protocol",
        "http",
        "--target",
        &http,
        "--body",
        body,
        "--token",
        "wrong",
    ]);
    assert_eq!(r["code"], 401, "{r}");
    assert!(receive.stored_profiles().is_empty());
    let r = client(&[
        "--protocol",
        "grpc",
        "--target",
        &grpc,
        "--body",
        body,
        "--token",
        "s3cret-token",
    ]);
    assert_eq!(r["ok"], true, "{r}");
    let r = client(&[
        "--protocol",
        "http",
        "--target",
        &http,
        "--body",
        body,
        "--token",
        "s3cret-token",
    ]);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(receive.stored_profiles().len(), 2);
}

/// With TLS the receiver may listen beyond loopback without a token; both transports serve
/// TLS to clients that trust the certificate.
#[test]
fn tls_serves_both_transports() {
    let dir = scratch_dir("tls");
    let (cert, key) = self_signed_cert(&dir, &[]);
    let store = scratch_dir("tls-store");
    let (grpc, http) = (free_port(), free_port());
    let child = Command::new(cli_path())
        .args(["receive", "--quiet", "--store"])
        .arg(&store)
        .args([
            "--grpc",
            &format!("0.0.0.0:{grpc}"),
            "--http",
            &format!("0.0.0.0:{http}"),
        ])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .spawn_tied()
        .unwrap();
    let _guard = ChildGuard(child);
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
    let body = python_profile(&dir, "1", "py.sender.Work.compute", 5);
    let (body, cert) = (body.to_str().unwrap(), cert.to_str().unwrap());
    let r = client(&[
        "--protocol",
        "grpc",
        "--target",
        &format!("127.0.0.1:{grpc}"),
        "--body",
        body,
        "--cacert",
        cert,
    ]);
    assert_eq!(r["ok"], true, "{r}");
    let r = client(&[
        "--protocol",
        "http",
        "--target",
        &format!("https://127.0.0.1:{http}"),
        "--body",
        body,
        "--cacert",
        cert,
    ]);
    assert_eq!(r["ok"], true, "{r}");
    // Plain HTTP to the TLS port gets nothing stored.
    let r = client(&[
        "--protocol",
        "grpc",
        "--target",
        &format!("127.0.0.1:{grpc}"),
        "--body",
        body,
    ]);
    assert_ne!(r["ok"], true, "{r}");
    assert_eq!(files_below(&store.join("profiles")).len(), 2);
}

/// Acknowledged means on disk: kill -9 the receiver while an agent streams profiles to it;
/// every acknowledged request is in the store and every stored file reads back.
#[test]
fn a_killed_receiver_keeps_what_it_acknowledged() {
    otelprof_tests::classes(); // compile first: javac must not eat into the export window
    let mut receive = ReceiveProcess::start(&[]);
    let port = receive.grpc;
    let jvm = std::thread::spawn(move || {
        JvmRun::new(jdk17(), CPU_SPLIT)
            .agent(&format!(
                "endpoint=http://127.0.0.1:{port},protocol=grpc,period=1s"
            ))
            .args(&["2", "6"])
            .run()
    });
    // Kill it in the middle of the run, once it has stored a few exports.
    let start = Instant::now();
    while receive.stored_profiles().len() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nothing was stored"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    receive.kill();
    let out = jvm.join().unwrap();
    out.assert_clean_exit();
    let counters = out.agent_counters();
    let files = receive.stored_profiles();
    assert!(counters["otlp_sent"] >= 1, "{counters:?}");
    assert!(
        files.len() as u64 >= counters["otlp_sent"],
        "{} files for {} acknowledged exports",
        files.len(),
        counters["otlp_sent"]
    );
    // A write torn by a crash can only be under .tmp/, which readers skip and the next
    // receive removes; simulate one.
    let tmp = receive.store.join(".tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("123-00001-000009.otlp.pb.gz"), [0x1f, 0x8b, 8, 0]).unwrap();
    let (code, out, err) = otelprof(&["top", receive.store.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "a stored file did not read back: {err}");
    assert!(out.contains("otelprof.workloads.CpuSplit.spin"), "{out}");
    let restarted = Command::new(cli_path())
        .args(["receive", "--quiet", "--store"])
        .arg(&receive.store)
        .args([
            "--grpc",
            &format!("127.0.0.1:{}", free_port()),
            "--http",
            "off",
        ])
        .spawn_tied()
        .unwrap();
    let mut restarted = ChildGuard(restarted);
    let start = Instant::now();
    while tmp.read_dir().unwrap().next().is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the stale .tmp file stayed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = restarted.0.kill();
}

struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
