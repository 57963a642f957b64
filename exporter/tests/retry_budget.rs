//! The retry budget, against real loopback servers: a request the server keeps failing in a
//! retryable way (HTTP 503, gRPC OUT_OF_RANGE, what tonic answers to an oversized message) is
//! retried for its budget, then dropped and counted, and the requests queued behind it go; a
//! permanent rejection (gRPC INVALID_ARGUMENT) is dropped at once; an endpoint that cannot
//! be reached at all does not spend the budget. The servers tell the requests apart by size,
//! the way a receiver with a size limit does. The agent end to end, against `otelprof
//! receive`, is in tests/tests/hostile/receiver.rs.
// clippy.toml lets #[test] functions unwrap; this file's helpers are not tests to clippy.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use otel_bridge::otlp::{EncodeOptions, HTTP_PATH};
use otel_bridge::{FrameKind, ProfileBuilder};
use otelprof_exporter::{
    Compression, ExportStats, ExporterSettings, LogLevel, OtlpConfig, OtlpExporter, Protocol,
};

/// One request as a server saw it, and its answer.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    len: usize,
    answer: String,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// An HTTP/1.1 server on `listener` answering each request with `answer(body length)`.
fn serve_http(listener: TcpListener, answer: fn(usize) -> u16) -> Log {
    let seen: Log = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let l = line.trim().to_ascii_lowercase();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let status = answer(len);
            log.lock().unwrap().push(Seen {
                at: Instant::now(),
                len,
                answer: status.to_string(),
            });
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    seen
}

/// A gRPC (HTTP/2) server answering each export with the status `answer(message length)`
/// (0 = OK with an empty response message).
fn serve_grpc(listener: TcpListener, answer: fn(usize) -> u32) -> Log {
    use http_body_util::{BodyExt as _, Full};
    listener.set_nonblocking(true).unwrap();
    let seen: Log = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let log = log.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: http::Request<_>| {
                        let log = log.clone();
                        async move {
                            let body: hyper::body::Incoming = req.into_body();
                            let bytes = body.collect().await.unwrap().to_bytes();
                            // The 5-byte gRPC frame header, then the message.
                            let len = bytes.len().saturating_sub(5);
                            let code = answer(len);
                            log.lock().unwrap().push(Seen {
                                at: Instant::now(),
                                len,
                                answer: code.to_string(),
                            });
                            let response = http::Response::builder()
                                .header("content-type", "application/grpc");
                            let response = if code == 0 {
                                let mut trailers = http::HeaderMap::new();
                                trailers.insert("grpc-status", "0".parse().unwrap());
                                response
                                    .body(
                                        Full::new(Bytes::from_static(&[0, 0, 0, 0, 0]))
                                            .with_trailers(async move { Some(Ok(trailers)) })
                                            .boxed(),
                                    )
                                    .unwrap()
                            } else {
                                // Trailers-only: the status in the headers.
                                response
                                    .header("grpc-status", code.to_string())
                                    .header("grpc-message", "scripted")
                                    .body(Full::new(Bytes::new()).boxed())
                                    .unwrap()
                            };
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                });
            }
        });
    });
    seen
}

fn config(protocol: Protocol, endpoint: String, budget: Duration) -> OtlpConfig {
    OtlpConfig {
        protocol,
        profiles_endpoint: endpoint,
        metrics_endpoint: None,
        headers: Vec::new(),
        timeout: Duration::from_secs(2),
        // Uncompressed, so that the servers can tell the requests apart by size.
        compression: Compression::None,
        certificate: None,
        queue_bytes: 1 << 20,
        retry_budget: budget,
    }
}

fn start(config: OtlpConfig) -> (OtlpExporter, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let log = lines.clone();
    let settings = ExporterSettings {
        resource: opentelemetry_sdk::Resource::builder_empty()
            .with_service_name("t")
            .build(),
        encode: EncodeOptions::default(),
        log: Arc::new(move |level: LogLevel, msg: &str| {
            log.lock().unwrap().push(format!("{level:?} {msg}"))
        }),
        counters: None,
        metrics_interval: Duration::from_secs(60),
    };
    (OtlpExporter::start(config, settings).unwrap(), lines)
}

/// A profile of `functions` distinct stacks: 30 bytes or so each once encoded.
fn profile(functions: usize) -> otel_bridge::Profile {
    let mut b = ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 10_000_000);
    let t = b.str_label("thread_name", "main");
    for i in 0..functions {
        let f = b.function(&format!("a.B.method{i}"), "B.java", 1);
        let l = b.location(f, 2, FrameKind::Jvm);
        b.add_sample(&[l], &[t], &[7]);
    }
    b.build(1_700_000_000_000_000_000, 1_000_000_000)
}

/// Sizes the servers below tell apart: small < 2 KB, medium 4–20 KB, big > 40 KB.
const SMALL: usize = 2_000;
const BIG: usize = 40_000;

fn wait_for(exporter: &OtlpExporter, what: &str, done: impl Fn(&ExportStats) -> bool) {
    let start = Instant::now();
    loop {
        let s = exporter.counters().stats();
        if done(&s) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} did not happen within 30 s: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_request_failing_503_forever_is_dropped_after_its_budget_and_the_rest_go() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = serve_http(listener, |len| if len > BIG { 503 } else { 200 });
    let budget = Duration::from_secs(2);
    let (exporter, lines) = start(config(
        Protocol::HttpProtobuf,
        format!("{base}{HTTP_PATH}"),
        budget,
    ));
    exporter.submit(&profile(3_000)).unwrap();
    exporter.submit(&profile(1)).unwrap();
    exporter.submit(&profile(1)).unwrap();
    wait_for(&exporter, "two deliveries", |s| s.sent == 2);
    let stats = exporter.counters().stats();
    assert_eq!(stats.retries_exhausted, 1, "{stats:?}");
    assert_eq!(stats.permanent_failures, 0, "{stats:?}");
    assert_eq!(stats.queued, 0, "{stats:?}");

    let seen = seen.lock().unwrap().clone();
    let big: Vec<&Seen> = seen.iter().filter(|r| r.len > BIG).collect();
    let small: Vec<&Seen> = seen.iter().filter(|r| r.len < SMALL).collect();
    assert!(big.len() >= 2, "the big request was retried: {seen:?}");
    assert!(big.iter().all(|r| r.answer == "503"));
    assert_eq!(small.len(), 2, "{seen:?}");
    let first = big[0].at;
    let last = big[big.len() - 1].at;
    assert!(
        last - first >= budget,
        "dropped before its budget was spent: {:?}",
        last - first
    );
    // Once dropped, the next request goes at once; every wait before it was a backoff
    // delay (at most 4 s by then).
    assert!(small[0].at >= last, "{seen:?}");
    let behind = small[0].at - last;
    assert!(
        behind < Duration::from_secs(1),
        "waited {behind:?} after the drop"
    );
    assert!(
        small[0].at - first < budget + Duration::from_secs(6),
        "the requests behind waited {:?}",
        small[0].at - first
    );
    let report = exporter.shutdown(Duration::from_secs(2));
    assert!(report.finished && report.unsent == 0, "{report:?}");
    let lines = lines.lock().unwrap();
    let dropped: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("so that the newer ones can go"))
        .collect();
    assert_eq!(dropped.len(), 1, "{lines:?}");
    assert!(dropped[0].contains("HTTP 503"), "{lines:?}");
}

#[test]
fn grpc_out_of_range_spends_the_budget_and_invalid_argument_is_dropped_at_once() {
    // OUT_OF_RANGE (11) for big messages, INVALID_ARGUMENT (3) for medium ones.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = serve_grpc(listener, |len| match len {
        n if n > BIG => 11,
        n if n > SMALL => 3,
        _ => 0,
    });
    let budget = Duration::from_secs(2);
    let (exporter, lines) = start(config(Protocol::Grpc, base, budget));
    exporter.submit(&profile(3_000)).unwrap();
    exporter.submit(&profile(300)).unwrap();
    exporter.submit(&profile(1)).unwrap();
    wait_for(&exporter, "one delivery", |s| s.sent == 1);
    let stats = exporter.counters().stats();
    assert_eq!(stats.retries_exhausted, 1, "{stats:?}");
    assert_eq!(stats.permanent_failures, 1, "{stats:?}");
    assert_eq!(stats.queued, 0, "{stats:?}");
    let seen = seen.lock().unwrap().clone();
    let answers: Vec<&str> = seen.iter().map(|r| r.answer.as_str()).collect();
    let big = answers.iter().filter(|a| **a == "11").count();
    assert!(big >= 2, "OUT_OF_RANGE is retried: {answers:?}");
    assert_eq!(
        answers[big..],
        ["3", "0"],
        "INVALID_ARGUMENT is not retried: {answers:?}"
    );
    assert!(seen[big - 1].at - seen[0].at >= budget);
    let _ = exporter.shutdown(Duration::from_secs(2));
    let lines = lines.lock().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("so that the newer ones can go") && l.contains("status 11")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("not retried")), "{lines:?}");
}

#[test]
fn an_unreachable_endpoint_does_not_spend_the_budget() {
    for protocol in [Protocol::HttpProtobuf, Protocol::Grpc] {
        // A port that was free a moment ago: connections are refused until the server starts.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let endpoint = match protocol {
            Protocol::HttpProtobuf => format!("http://127.0.0.1:{port}{HTTP_PATH}"),
            Protocol::Grpc => format!("http://127.0.0.1:{port}"),
        };
        let budget = Duration::from_millis(300);
        let (exporter, _) = start(config(protocol, endpoint, budget));
        exporter.submit(&profile(1)).unwrap();
        // Refused for longer than the budget, over at least two attempts.
        wait_for(&exporter, "two failed attempts", |s| s.attempts >= 2);
        std::thread::sleep(budget);
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let seen = match protocol {
            Protocol::HttpProtobuf => serve_http(listener, |_| 200),
            Protocol::Grpc => serve_grpc(listener, |_| 0),
        };
        wait_for(&exporter, "the delivery", |s| s.sent == 1);
        let stats = exporter.counters().stats();
        assert_eq!(stats.retries_exhausted, 0, "{protocol:?}: {stats:?}");
        assert!(stats.retryable_failures >= 2, "{protocol:?}: {stats:?}");
        assert_eq!(seen.lock().unwrap().len(), 1);
        let _ = exporter.shutdown(Duration::from_secs(1));
    }
}
