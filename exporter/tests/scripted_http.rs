//! The export thread against a scripted HTTP endpoint on loopback (a mock, in the manner of
//! opentelemetry-rust's tests): it retries 503, waits out 429 + Retry-After, drops a profile
//! on 400 without retrying, and a shutdown returns within its bound when nobody listens.
//! The real receivers (the official Python classes) are exercised in tests/tests/otlp/.
// clippy.toml lets #[test] functions unwrap; this file's helpers (serve, config) are not
// tests to clippy, hence the crate-level allow.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use otel_bridge::otlp::{EncodeOptions, HTTP_PATH};
use otel_bridge::{FrameKind, ProfileBuilder};
use otelprof_exporter::{
    Compression, ExporterSettings, LogLevel, OtlpConfig, OtlpExporter, Protocol,
};

#[derive(Debug)]
struct Seen {
    at: Instant,
    path: String,
    gzip: bool,
    body_len: usize,
}

/// Serves one scripted response per request (the last one repeats) and records requests.
fn serve(script: Vec<(u16, Option<&'static str>)>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let mut conn = conn.unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut len = 0;
            let mut gzip = false;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let l = line.trim().to_ascii_lowercase();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if l == "content-encoding: gzip" {
                    gzip = true;
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            log.lock().unwrap().push(Seen {
                at: Instant::now(),
                path: request_line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .to_owned(),
                gzip,
                body_len: len,
            });
            let (status, retry_after) = script[n.min(script.len() - 1)];
            let extra = retry_after
                .map(|r| format!("Retry-After: {r}\r\n"))
                .unwrap_or_default();
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\n{extra}Connection: close\r\n\r\n"
            );
        }
    });
    (format!("http://{addr}"), seen)
}

fn config(base: &str) -> OtlpConfig {
    OtlpConfig {
        protocol: Protocol::HttpProtobuf,
        profiles_endpoint: format!("{base}{HTTP_PATH}"),
        metrics_endpoint: None,
        headers: vec![("x-test".into(), "1".into())],
        timeout: Duration::from_secs(2),
        compression: Compression::Gzip,
        certificate: None,
        queue_bytes: 1 << 20,
        retry_budget: otelprof_exporter::config::DEFAULT_RETRY_BUDGET,
    }
}

fn settings(lines: Arc<Mutex<Vec<String>>>) -> ExporterSettings {
    ExporterSettings {
        resource: opentelemetry_sdk::Resource::builder_empty()
            .with_service_name("t")
            .build(),
        encode: EncodeOptions::default(),
        log: Arc::new(move |level: LogLevel, msg: &str| {
            lines.lock().unwrap().push(format!("{level:?} {msg}"))
        }),
        counters: None,
        metrics_interval: Duration::from_secs(60),
    }
}

fn profile() -> otel_bridge::Profile {
    let mut b = ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 10_000_000);
    let f = b.function("a.B.c", "B.java", 1);
    let l = b.location(f, 2, FrameKind::Jvm);
    let t = b.str_label("thread_name", "main");
    b.add_sample(&[l], &[t], &[7]);
    b.build(1_700_000_000_000_000_000, 1_000_000_000)
}

#[test]
fn retries_503_waits_out_429_and_drops_on_400() {
    let (base, seen) = serve(vec![
        (503, None),
        (429, Some("2")),
        (400, None),
        (200, None),
    ]);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let exporter = OtlpExporter::start(config(&base), settings(lines.clone())).unwrap();
    exporter.submit(&profile()).unwrap();
    // 503 -> backoff (0.5..1 s) -> 429 + Retry-After 2 -> 400: dropped, never retried.
    let start = Instant::now();
    while exporter.counters().stats().permanent_failures == 0 {
        assert!(start.elapsed() < Duration::from_secs(15), "no 400 reached");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let stats = exporter.counters().stats();
    assert_eq!(stats.attempts, 3, "{stats:?}");
    assert_eq!(stats.retryable_failures, 1);
    assert_eq!(stats.throttled, 1);
    assert_eq!(stats.permanent_failures, 1);
    assert_eq!(stats.queued, 0, "a permanently rejected profile is dropped");
    {
        let s = seen.lock().unwrap();
        assert_eq!(s.len(), 3);
        assert!(s
            .iter()
            .all(|r| r.path == HTTP_PATH && r.gzip && r.body_len > 20));
        let after_503 = s[1].at - s[0].at;
        let after_429 = s[2].at - s[1].at;
        assert!(
            after_503 >= Duration::from_millis(450),
            "backoff too short: {after_503:?}"
        );
        assert!(
            after_429 >= Duration::from_millis(1950),
            "Retry-After ignored: {after_429:?}"
        );
    }
    // The next profile goes through (200).
    exporter.submit(&profile()).unwrap();
    let report = exporter.shutdown(Duration::from_secs(5));
    assert!(report.finished && report.unsent == 0, "{report:?}");
    assert_eq!(exporter.counters().stats().sent, 1);
    let lines = lines.lock().unwrap();
    let warns: Vec<_> = lines.iter().filter(|l| l.starts_with("Warn")).collect();
    assert_eq!(
        warns.len(),
        2,
        "one line for the outage, one for the rejection: {lines:?}"
    );
    assert!(warns[0].contains("HTTP 503"), "{lines:?}");
    assert!(
        warns[1].contains("HTTP 400") && warns[1].contains("not retried"),
        "{lines:?}"
    );
}

#[test]
fn shutdown_is_bounded_when_nobody_listens() {
    // A port that was just free: connections are refused.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let exporter = OtlpExporter::start(
        config(&format!("http://127.0.0.1:{port}")),
        settings(lines.clone()),
    )
    .unwrap();
    for _ in 0..5 {
        exporter.submit(&profile()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let report = exporter.shutdown(Duration::from_secs(2));
    assert!(
        start.elapsed() < Duration::from_millis(2300),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(report.unsent, 5);
    let lines = lines.lock().unwrap();
    let warns = lines.iter().filter(|l| l.starts_with("Warn")).count();
    assert_eq!(warns, 1, "one line for the outage: {lines:?}");
    assert!(
        exporter.submit(&profile()).is_err(),
        "no submissions after shutdown"
    );
}

#[test]
fn the_queue_bound_holds_while_the_receiver_is_down() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = config(&format!("http://127.0.0.1:{port}"));
    let one = otel_bridge::otlp::encode_to_vec(
        &profile(),
        &opentelemetry_sdk::Resource::builder_empty()
            .with_service_name("t")
            .build(),
        otel_bridge::otlp::ProfileId::from_random([9; 16]),
        &EncodeOptions::default(),
    )
    .unwrap()
    .len();
    cfg.queue_bytes = one * 10;
    let exporter = OtlpExporter::start(cfg, settings(lines.clone())).unwrap();
    for _ in 0..100 {
        exporter.submit(&profile()).unwrap();
        assert!(exporter.counters().stats().queued_bytes <= (one * 10) as u64);
    }
    let stats = exporter.counters().stats();
    assert_eq!(stats.queued, 10);
    assert_eq!(stats.dropped_queue_full, 90);
    let _ = exporter.shutdown(Duration::from_millis(500));
    assert!(lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("queue full")));
}

/// A rejection of one kind is logged once, however many successful sends come between two of
/// them (the agent's counters count the rest).
#[test]
fn a_rejection_is_logged_once_with_sends_between() {
    let (base, seen) = serve(vec![(400, None), (200, None), (400, None), (200, None)]);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let exporter = OtlpExporter::start(config(&base), settings(lines.clone())).unwrap();
    for sent in 1..=4 {
        // One at a time, so that each meets the answer scripted for it.
        exporter.submit(&profile()).unwrap();
        let start = Instant::now();
        while seen.lock().unwrap().len() < sent {
            assert!(start.elapsed() < Duration::from_secs(10), "not sent");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let report = exporter.shutdown(Duration::from_secs(5));
    assert!(report.finished, "{report:?}");
    let stats = exporter.counters().stats();
    assert_eq!((stats.permanent_failures, stats.sent), (2, 2), "{stats:?}");
    let lines = lines.lock().unwrap();
    let rejected = lines.iter().filter(|l| l.contains("not retried")).count();
    assert_eq!(rejected, 1, "{lines:?}");
}
