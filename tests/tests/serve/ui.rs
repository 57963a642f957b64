//! `otelprof serve` as a real process fed by real JVMs with the agent: the UI's JSON answers
//! agree with what the CLI prints for the same selection (one engine answers both), and
//! the UI keeps the receiver's security rules.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use otelprof_tests::receive::{Launch, ReceiveProcess};
use otelprof_tests::{jdk17, otel_classes, otel_sdk_jar, otelprof, scratch_dir, JvmRun};
use serde_json::Value;

const CPU_SPLIT: &str = "otelprof.workloads.CpuSplit";

/// `otelprof serve` on free loopback ports; killed on drop.
struct Serve {
    process: ReceiveProcess,
    ui: u16,
}

impl Serve {
    fn start(ui_host: &str, extra: &[&str]) -> Serve {
        let process = ReceiveProcess::launch(Launch {
            extra,
            ui_host: Some(ui_host),
            ..Launch::default()
        });
        let ui = process.ui.unwrap();
        Serve { process, ui }
    }

    /// GET `path` with extra header lines; returns the status and the body.
    fn get(&self, path: &str, headers: &[&str]) -> (u16, String, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.ui)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("host:"))
        {
            request.push_str(&format!("Host: 127.0.0.1:{}\r\n", self.ui));
        }
        for h in headers {
            request.push_str(h);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        s.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        // hyper answers HTTP/1.1 with a length or chunks; un-chunk if needed.
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            let mut out = String::new();
            let mut rest = body;
            while let Some((size, after)) = rest.split_once("\r\n") {
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                if n == 0 {
                    break;
                }
                out.push_str(&after[..n]);
                rest = &after[n + 2..];
            }
            out
        } else {
            body.to_owned()
        };
        (status, head.to_owned(), body)
    }

    fn json(&self, path: &str) -> Value {
        let (status, _, body) = self.get(path, &[]);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

#[test]
fn the_ui_answers_what_the_cli_answers() {
    let serve = Serve::start("127.0.0.1", &[]);
    for version in ["a", "b"] {
        let out = JvmRun::new(jdk17(), CPU_SPLIT)
            .agent(&format!(
                "endpoint=http://127.0.0.1:{},period=1s",
                serve.process.http
            ))
            .env("OTEL_SERVICE_NAME", "split")
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                &format!("service.version={version}"),
            )
            .args(&["2", "2"])
            .run();
        out.assert_clean_exit();
    }
    let store = serve.process.store.to_str().unwrap().to_owned();

    // Explore: the function table, row by row, as `otelprof top` prints it.
    let ui = serve.json("/api/top?where=service.version%3Da&type=cpu");
    let (code, cli, err) = otelprof(&[
        "top",
        "--where",
        "service.version=a",
        "--type",
        "cpu",
        "--limit",
        "0",
        &store,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        cli.lines().next().unwrap(),
        ui["header"]["text"].as_str().unwrap()
    );
    let total = ui["header"]["total"].as_f64().unwrap();
    let cli_rows: Vec<(String, String)> = cli
        .lines()
        .skip(2)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let label = cols.get(4..)?.join(" ");
            Some((cols.get(1)?.to_string(), label))
        })
        .collect();
    let functions = ui["functions"].as_array().unwrap();
    assert!(cli_rows.len() >= 3, "{cli}");
    assert_eq!(cli_rows.len(), functions.len(), "{cli}\n{ui}");
    for ((self_pct, label), row) in cli_rows.iter().zip(functions) {
        assert_eq!(label, row["label"].as_str().unwrap(), "{cli}");
        let share = format!("{:.2}%", 100.0 * row["self"].as_f64().unwrap() / total);
        assert_eq!(self_pct, &share, "{label}");
    }
    assert!(ui["flame"]["names"].as_array().unwrap().len() > 3);

    // Compare: the same closing line as `otelprof diff`.
    let ui = serve.json("/api/diff?base=service.version%3Da&head=service.version%3Db");
    let (code, cli, err) = otelprof(&[
        "diff",
        "--base",
        "service.version=a",
        "--head",
        "service.version=b",
        &store,
    ]);
    assert_eq!(code, 0, "{err}");
    let headline = ui["headline"].as_str().unwrap();
    assert!(cli.contains(headline), "{headline}\n{cli}");
    // The first row of the "Grew" ranking is the same function.
    let lines: Vec<&str> = cli.lines().collect();
    let grew = lines.iter().position(|l| l.starts_with("Grew")).unwrap();
    let first_cli = lines[grew + 2].split_whitespace().last().unwrap();
    assert_eq!(ui["grew"][0]["name"].as_str().unwrap(), first_cli, "{cli}");

    // The other views answer, and exports are what they say.
    let values = serve.json("/api/values");
    assert_eq!(
        values["keys"]["service.version"],
        serde_json::json!(["a", "b"])
    );
    let instances = serve.json("/api/instances");
    assert_eq!(instances["instances"].as_array().unwrap().len(), 2);
    let timeline = serve.json("/api/timeline?by=service.version");
    assert_eq!(
        timeline["series"].as_array().unwrap().len(),
        2,
        "{timeline}"
    );
    // A function's trend: the bucket rows of `otelprof top --trend`, share for share.
    let work = "otelprof.workloads.CpuSplit.work";
    let ui = serve.json(&format!(
        "/api/trend?where=service.version%3Da&type=cpu&buckets=6&trend={work}"
    ));
    let (code, cli, err) = otelprof(&[
        "top",
        "--trend",
        work,
        "--buckets",
        "6",
        "--where",
        "service.version=a",
        "--type",
        "cpu",
        &store,
    ]);
    assert_eq!(code, 0, "{err}");
    let cli_shares: Vec<&str> = cli
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    let ui_shares: Vec<String> = ui["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["share"]
                .as_f64()
                .map_or("-".to_owned(), |s| format!("{:.2}%", 100.0 * s))
        })
        .collect();
    assert_eq!(cli_shares, ui_shares, "{cli}\n{ui}");
    assert!(
        cli_shares.iter().filter(|s| **s != "-").count() >= 2,
        "{cli}"
    );
    let (status, head, body) = serve.get("/api/export/explore?format=collapsed", &[]);
    assert_eq!(status, 200);
    assert!(head.contains("attachment"), "{head}");
    assert!(body.contains("otelprof.workloads.CpuSplit.work"), "{body}");
    let (status, _, _) = serve.get("/api/top?store=/etc", &[]);
    assert_eq!(status, 400);

    // The page: self-contained, and only for loopback names without a token.
    let (status, head, page) = serve.get("/diff?base=x", &[]);
    assert_eq!(status, 200);
    assert!(head.contains("default-src 'self'"), "{head}");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "{page}"
    );
    let (status, _, _) = serve.get("/api/values", &["Host: profiles.example.com"]);
    assert_eq!(status, 403);
}

/// Explore's timeline carries the heap in use after collection and the collections' pauses,
/// from the agent's metrics in the store: tests/java-otel GcPauses holds 256 MiB and forces five
/// full collections, timing each, and reads the heap pools' usage after the last one.
#[test]
fn the_timeline_carries_the_heap_after_gc_and_the_pauses() {
    let serve = Serve::start("127.0.0.1", &[]);
    let out = JvmRun::new(jdk17(), "otelprof.tests.otel.GcPauses")
        .javaagent()
        .agent(&format!(
            "{},period=1s,wall=20ms",
            serve.process.agent_options()
        ))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .flags(&["-Xmx1g", "-XX:+UseG1GC"])
        .env("OTEL_METRIC_EXPORT_INTERVAL", "1000")
        .args(&["256", "5"])
        .run();
    out.assert_clean_exit();
    let t = serve.json("/api/timeline?type=wall&buckets=20");
    let memory = &t["memory"];
    let heap: Vec<f64> = memory["heap_after_gc"]
        .as_array()
        .unwrap_or_else(|| panic!("no memory figures: {t}"))
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert!(heap.len() >= 3, "{memory}");
    let last = *heap.last().unwrap();
    let truth = out.stdout_number("heap_after_gc");
    println!(
        "heap after GC in {} buckets, last {:.1} MB; the workload read {:.1} MB",
        heap.len(),
        last / 1e6,
        truth / 1e6
    );
    assert!((last / truth - 1.0).abs() <= 0.02, "{last} vs {truth}");
    let paused: f64 = memory["gc_pause_seconds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .sum();
    let gc_s = out.stdout_number("gc_total") / 1e9;
    println!("GC pauses over the timeline {paused:.3} s; the five System.gc() calls {gc_s:.3} s");
    assert!(
        paused >= 0.8 * gc_s && paused <= gc_s + 2.0,
        "{paused} vs {gc_s}"
    );
    // A selection of another service has none.
    let other = serve.json("/api/timeline?type=wall&where=service.name%3Dnone");
    assert!(other["memory"].is_null(), "{other}");
}

#[test]
fn beyond_loopback_the_ui_needs_the_token() {
    let (code, _, err) = otelprof(&[
        "serve",
        "--store",
        scratch_dir("serve-refused").to_str().unwrap(),
        "--ui",
        "0.0.0.0:0",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--token"), "{err}");

    let serve = Serve::start("0.0.0.0", &["--token", "s3cret"]);
    let (status, _, _) = serve.get("/api/values", &[]);
    assert_eq!(status, 401);
    let (status, _, _) = serve.get("/api/values", &["Authorization: Bearer wrong"]);
    assert_eq!(status, 401);
    // The page itself holds no data: it loads, then asks for the token.
    let (status, _, page) = serve.get("/", &[]);
    assert_eq!(status, 200);
    assert!(page.contains("token"), "{page}");
    // Nothing stored yet: a reason, not a crash; and authorised.
    let (status, _, body) = serve.get(
        "/api/values",
        &["Authorization: Bearer s3cret", "Host: profiles.example.com"],
    );
    assert_ne!(status, 401, "{body}");
    assert_ne!(status, 403, "{body}");
}
