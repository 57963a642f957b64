//! Hostile clients against the real `otelprof receive` (connections, timeouts, request sizes
//! and HTTP headers): each attack runs against the binary as users run it, and each test says
//! which limit of `receiver/src/limits.rs` it attacks.
//!
//! - Idle and slow-loris connections, more than the receiver has file descriptors, cannot
//!   lock out legitimate exports (connection limit, eviction of idle connections, fd
//!   headroom), and the receiver says so in one line, not one per connection.
//! - Clients that connect and say nothing, trickle their headers or their body, or stall a
//!   TLS handshake are cut off by the timeouts.
//! - Unauthenticated 30 MiB gRPC exports are refused on their headers: the receiver's memory
//!   does not grow with them.
//! - An oversized export is refused with a status OTLP clients do not retry, over both
//!   wires; and a real JVM's agent drops and counts its one oversized profile while the
//!   rest arrive on time.
//! - HTTP header values are matched as HTTP says (case-insensitive media type and coding).
//!
//! Legitimate requests are made with the official Python classes and grpcio
//! (tests/cli/otlp_client.py), the flood with tests/python/hostile_client.py.

use otelprof_tests::Tied as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use otelprof_tests::receive::{Launch, ReceiveProcess};
use otelprof_tests::{cli_path, jdk17, python, repo_root, scratch_dir, JvmRun};
use serde_json::Value;

/// `otelprof receive` with `extra` flags (not quiet unless they say so), with at most
/// `nofile` open files when given.
fn receive(extra: &[&str], nofile: Option<u64>) -> ReceiveProcess {
    ReceiveProcess::launch(Launch {
        extra,
        quiet: false,
        nofile,
        ..Launch::default()
    })
}

/// A field of /proc/PID/status in kB (VmRSS, VmHWM).
fn status_kb(r: &ReceiveProcess, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", r.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/PID/status"))
}

/// User plus system CPU time used so far.
fn cpu_time(r: &ReceiveProcess) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", r.pid())).unwrap();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

fn run_python(script: &str, args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(repo_root().join(script))
        .args(args)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// One export with the independent client; its answer and how long it took.
fn export(protocol: &str, target: &str, body: &Path, extra: &[&str]) -> (Value, Duration) {
    let start = Instant::now();
    let mut args = vec![
        "--protocol",
        protocol,
        "--target",
        target,
        "--body",
        body.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let answer = run_python("tests/cli/otlp_client.py", &args);
    (answer, start.elapsed())
}

/// A valid request built by the independent client.
fn valid_request(dir: &Path) -> PathBuf {
    let p = dir.join("valid.pb");
    run_python(
        "tests/cli/otlp_client.py",
        &["--make-profile", p.to_str().unwrap(), "--samples", "5"],
    );
    p
}

/// The attackers hold 360 sockets: this process may need more than a soft limit of 256.
fn raise_own_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid `limit`; setrlimit reads it.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < 4096 {
            limit.rlim_cur = limit.rlim_max.min(4096);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// What an attacker holds open: a connection that sends nothing, or one that sends a
/// request head (HTTP/1.1) or the HTTP/2 preface a byte at a time and never finishes.
struct Attacker {
    port: u16,
    loris: Option<&'static [u8]>,
    sent: usize,
    stream: Option<TcpStream>,
}

const HTTP_HEAD: &[u8] =
    b"POST /v1development/profiles HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Attacker {
    fn connect(&mut self) {
        self.sent = 0;
        self.stream =
            TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_secs(1))
                .ok();
        if let Some(s) = &self.stream {
            s.set_nonblocking(true).unwrap();
        }
    }

    /// Sends the next byte of a slow-loris head; reconnects a connection the receiver
    /// closed, as a determined attacker does.
    fn tick(&mut self) {
        let closed = match &mut self.stream {
            None => true,
            Some(s) => {
                // Whatever the receiver sends (HTTP/2 SETTINGS, a 408) is read and ignored.
                let mut buf = [0u8; 256];
                let eof = match s.read(&mut buf) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                };
                let write_failed = match self.loris {
                    Some(head) if self.sent < head.len() => {
                        let r = s.write(&head[self.sent..self.sent + 1]);
                        self.sent += 1;
                        r.is_err()
                    }
                    _ => false,
                };
                eof || write_failed
            }
        };
        if closed {
            self.connect();
        }
    }
}

/// The receiver, limited to 256 open files, holds more idle and slow-loris connections
/// than it has descriptors, reopened as soon as they are closed: legitimate exports over
/// both transports still succeed within seconds, the receiver says once that the limit was
/// reached (never "Too many open files" per connection), and does not spin.
#[test]
fn idle_and_slow_loris_connections_cannot_lock_out_exports() {
    raise_own_open_files();
    let receive = receive(&[], Some(256));
    let dir = scratch_dir("hostile-idle");
    let body = valid_request(&dir);
    let grpc = format!("127.0.0.1:{}", receive.grpc);
    let http = format!("http://127.0.0.1:{}", receive.http);

    // 300 idle (half per port), 30 trickling an HTTP/1.1 head, 30 the HTTP/2 preface.
    let mut attackers: Vec<Attacker> = Vec::new();
    for i in 0..360 {
        let (port, loris) = match i {
            0..=149 => (receive.http, None),
            150..=299 => (receive.grpc, None),
            300..=329 => (receive.http, Some(HTTP_HEAD)),
            _ => (receive.grpc, Some(H2_PREFACE)),
        };
        attackers.push(Attacker {
            port,
            loris,
            sent: 0,
            stream: None,
        });
    }
    for a in &mut attackers {
        a.connect();
    }
    let opened = attackers.iter().filter(|a| a.stream.is_some()).count();
    println!("attack: {opened} of 360 connections opened");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let keeper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for a in &mut attackers {
                    a.tick();
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let cpu_before = cpu_time(&receive);
    let attack_start = Instant::now();

    let mut times = Vec::new();
    for (protocol, target) in [
        ("http", &http),
        ("grpc", &grpc),
        ("http", &http),
        ("grpc", &grpc),
    ] {
        let (answer, took) = export(protocol, target, &body, &[]);
        println!("under attack: {protocol} export {answer} in {took:.1?}");
        assert_eq!(
            answer["ok"],
            true,
            "{protocol}: {answer}\n{}",
            receive.log()
        );
        times.push(took);
    }
    // The attack goes on for 10 s in all, long enough to see a receiver that spins.
    let mut open_fds = 0;
    while attack_start.elapsed() < Duration::from_secs(10) {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", receive.pid()))
            .unwrap()
            .count();
        open_fds = open_fds.max(fds);
        std::thread::sleep(Duration::from_millis(250));
    }
    let cpu = cpu_time(&receive) - cpu_before;
    let wall = attack_start.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    keeper.join().unwrap();
    println!("receiver: at most {open_fds} open files, {cpu:.1?} CPU in {wall:.1?} under attack");

    // Each export includes starting a Python interpreter (~0.5 s); before the limit and
    // eviction, they timed out after 20–30 s.
    for t in &times {
        assert!(*t < Duration::from_secs(10), "an export took {t:?}");
    }
    // Accepting in a loop on EMFILE would burn a core; closing and admitting the attackers'
    // reconnections costs a few percent of one.
    assert!(
        cpu < wall / 2,
        "the receiver used {cpu:?} of CPU in {wall:?}"
    );
    assert!(open_fds <= 256);
    let stored = receive.stored_profiles().len();
    let log = receive.stop();
    println!("receiver log:\n{log}");
    assert_eq!(stored, 4, "the four exports are stored");
    assert!(!log.contains("Too many open files"), "{log}");
    let about_limit = log
        .lines()
        .filter(|l| l.contains("the limit (--max-connections)"))
        .count();
    assert_eq!(about_limit, 1, "one line when the limit is reached:\n{log}");
    // Besides the start banner (5 lines) and the periodic summaries, nothing.
    let other: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("otelprof receive:") && !l.contains("requests stored"))
        .collect();
    assert!(other.len() <= 3, "{other:#?}");
    // The attack did reach the limit: idle connections were closed to admit new ones.
    assert!(
        log.contains("idle connections closed to make room"),
        "{log}"
    );
    assert!(log.contains("at most 192 connections"), "{log}");
}

/// Reads from `stream` until the peer closes it; returns how long that took and what came
/// (None if it was still open after `patience`).
fn time_to_close(mut stream: TcpStream, patience: Duration) -> (Option<Duration>, Vec<u8>) {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < patience {
        match stream.read(&mut buf) {
            Ok(0) => return (Some(start.elapsed()), got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (Some(start.elapsed()), got),
        }
    }
    (None, got)
}

/// Sends `bytes` one per `every` on a thread (a slow client), stopping at the first error.
fn trickle(stream: &TcpStream, bytes: Vec<u8>, every: Duration) {
    let mut s = stream.try_clone().unwrap();
    std::thread::spawn(move || {
        for b in bytes {
            if s.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(every);
        }
    });
}

/// Each slow phase of a connection has its timeout (limits.rs): saying nothing (10 s, over
/// HTTP and gRPC), trickling HTTP/1.1 headers (10 s), trickling a body (30 s, answered 408),
/// stalling a TLS handshake (10 s).
#[test]
fn slow_clients_are_cut_off_by_the_timeouts() {
    let dir = scratch_dir("hostile-slow");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status_tied()
        .expect("openssl (Debian openssl) makes the test certificate");
    assert!(status.success());
    let plain = receive(&[], None);
    let tls = receive(
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        None,
    );
    let connect = |port: u16| TcpStream::connect(("127.0.0.1", port)).unwrap();
    let patience = Duration::from_secs(45);

    let silent_http = connect(plain.http);
    let silent_grpc = connect(plain.grpc);
    let slow_head = connect(plain.http);
    trickle(&slow_head, HTTP_HEAD.to_vec(), Duration::from_millis(500));
    let slow_body = connect(plain.http);
    (&slow_body)
        .write_all(
            b"POST /v1development/profiles HTTP/1.1\r\nHost: x\r\n\
              Content-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n",
        )
        .unwrap();
    trickle(&slow_body, vec![0u8; 1000], Duration::from_millis(500));
    let stalled_tls = connect(tls.http);
    (&stalled_tls).write_all(&[0x16, 0x03, 0x01]).unwrap(); // the start of a ClientHello

    let waits: Vec<_> = [
        ("silent HTTP", silent_http),
        ("silent gRPC", silent_grpc),
        ("HTTP head a byte at a time", slow_head),
        ("HTTP body a byte at a time", slow_body),
        ("stalled TLS handshake", stalled_tls),
    ]
    .into_iter()
    .map(|(what, s)| (what, std::thread::spawn(move || time_to_close(s, patience))))
    .collect();
    for (what, wait) in waits {
        let (closed, got) = wait.join().unwrap();
        println!("{what}: closed after {closed:?}");
        let closed = closed.unwrap_or_else(|| panic!("{what}: still open after {patience:?}"));
        let (low, high) = if what.contains("body") {
            (Duration::from_secs(29), Duration::from_secs(40))
        } else {
            (Duration::from_secs(9), Duration::from_secs(20))
        };
        assert!(
            closed >= low && closed <= high,
            "{what}: closed after {closed:?}, expected {low:?}..{high:?}"
        );
        if what.contains("body") {
            let answer = String::from_utf8_lossy(&got);
            assert!(answer.starts_with("HTTP/1.1 408"), "{what}: {answer}");
        }
    }
    let log = plain.stop();
    assert!(log.contains("connections timed out"), "{log}");
    drop(tls);
}

/// 16 unauthenticated 30 MiB exports over gRPC at once are refused on their headers: the
/// receiver's peak resident memory stays far below one of them (it was 137–369 MB when the
/// token was checked after tonic had buffered the bodies). Authenticated clients still get
/// in.
#[test]
fn unauthenticated_large_grpc_exports_are_refused_before_their_bodies_are_read() {
    let receive = receive(&["--token", "s3cret", "--quiet"], None);
    let grpc = format!("127.0.0.1:{}", receive.grpc);
    let before = status_kb(&receive, "VmHWM");
    let flood = run_python(
        "tests/python/hostile_client.py",
        &[
            "flood",
            "--target",
            &grpc,
            "--count",
            "16",
            "--bytes",
            &(30 << 20).to_string(),
        ],
    );
    let answers = flood["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 16);
    for a in answers {
        assert_eq!(a["code"], "UNAUTHENTICATED", "{a}");
    }
    let peak = status_kb(&receive, "VmHWM");
    println!(
        "peak RSS {before} kB before, {peak} kB after 16 × 30 MiB unauthenticated exports \
         (slowest answer {:.2} s)",
        answers
            .iter()
            .map(|a| a["seconds"].as_f64().unwrap())
            .fold(0.0, f64::max)
    );
    assert!(
        peak < 64 << 10,
        "peak RSS {peak} kB: the bodies were buffered"
    );
    let dir = scratch_dir("hostile-auth");
    let body = valid_request(&dir);
    let (answer, _) = export("grpc", &grpc, &body, &["--token", "s3cret"]);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(receive.stored_profiles().len(), 1);
}

/// Over --max-request-size, both wires refuse for good and say the limit: gRPC
/// INVALID_ARGUMENT (not tonic's OUT_OF_RANGE or RESOURCE_EXHAUSTED, which OTLP clients
/// retry), whether the message is large as sent or only once gzip is undone; HTTP 413.
#[test]
fn oversized_exports_are_refused_with_a_status_clients_do_not_retry() {
    let receive = receive(&["--max-request-size", "64k", "--quiet"], None);
    let dir = scratch_dir("hostile-oversized");
    let big = dir.join("big.pb");
    std::fs::write(&big, vec![7u8; 200 << 10]).unwrap();
    let grpc = format!("127.0.0.1:{}", receive.grpc);
    let http = format!("http://127.0.0.1:{}", receive.http);
    for (protocol, target, extra) in [
        ("grpc", &grpc, &[][..]),
        ("grpc", &grpc, &["--gzip"][..]),
        ("http", &http, &[][..]),
        ("http", &http, &["--gzip"][..]),
    ] {
        let (answer, _) = export(protocol, target, &big, extra);
        println!("{protocol} {extra:?}: {answer}");
        let want = if protocol == "grpc" {
            Value::from("INVALID_ARGUMENT")
        } else {
            Value::from(413)
        };
        assert_eq!(answer["code"], want, "{protocol} {extra:?}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.contains("65536") && message.contains("--max-request-size"),
            "{protocol} {extra:?}: {message}"
        );
    }
    assert!(receive.stored_profiles().is_empty());
    let body = valid_request(&dir);
    assert_eq!(export("grpc", &grpc, &body, &[]).0["ok"], true);
}

/// One HTTP/1.1 request on a fresh connection; the status code of the answer.
fn http_post(port: u16, headers: &[(&str, &str)], body: &[u8]) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut head = format!(
        "POST /v1development/profiles HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    // No half-close: hyper takes the end of a request stream for the client going away.
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {answer:?}"))
}

/// Media types and content codings compare case-insensitively, with media type
/// parameters allowed (RFC 9110), and so does the Bearer scheme.
#[test]
fn http_header_values_match_without_case() {
    let receive = receive(&["--token", "Tok3n", "--quiet"], None);
    let dir = scratch_dir("hostile-headers");
    let raw = std::fs::read(valid_request(&dir)).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    let gz = gz.finish().unwrap();
    let auth = ("Authorization", "Bearer Tok3n");
    let accepted = [
        (
            vec![
                ("Content-Type", "Application/X-Protobuf"),
                ("Content-Encoding", "GZIP"),
                auth,
            ],
            &gz,
        ),
        (
            vec![
                ("content-type", "application/x-protobuf; charset=utf-8"),
                ("content-encoding", "x-gzip"),
                auth,
            ],
            &gz,
        ),
        (
            vec![
                ("Content-Type", "APPLICATION/X-PROTOBUF"),
                ("Content-Encoding", "Identity"),
                ("Authorization", "bearer Tok3n"),
            ],
            &raw,
        ),
    ];
    for (headers, body) in &accepted {
        assert_eq!(http_post(receive.http, headers, body), 200, "{headers:?}");
    }
    for (headers, want) in [
        (vec![("Content-Type", "application/json"), auth], 415),
        (
            vec![
                ("Content-Type", "application/x-protobuf"),
                ("Content-Encoding", "br"),
                auth,
            ],
            415,
        ),
        (
            vec![
                ("Content-Type", "application/x-protobuf"),
                ("Authorization", "Bearer tok3n"),
            ],
            401,
        ),
    ] {
        assert_eq!(http_post(receive.http, &headers, &raw), want, "{headers:?}");
    }
    assert_eq!(receive.stored_profiles().len(), accepted.len());
    let out = Command::new(cli_path())
        .arg("top")
        .arg(&receive.store)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("py.sender.Work.compute"));
}

/// A real JVM exports to `otelprof receive --max-request-size 16k`, over gRPC and over HTTP:
/// the profiles of its burst of distinct stacks (2 × 2 s of CPU sampled every 2 ms: tens of
/// KB a period, 66 and 82 KB in one run) are over the limit, the later ones (one Java stack,
/// and the JVM's own threads with their native frames: 2.4 to 8.5 KB in that run) under it.
/// The agent drops each oversized one at its first refusal (gRPC INVALID_ARGUMENT, HTTP 413:
/// no retry) and counts it; every other profile arrives about a period after the one before,
/// none left unsent at exit.
#[test]
fn an_agent_drops_and_counts_an_oversized_profile_and_the_rest_arrive_promptly() {
    for protocol in ["grpc", "http/protobuf"] {
        let receive = receive(&["--max-request-size", "16k", "--quiet"], None);
        let port = if protocol == "grpc" {
            receive.grpc
        } else {
            receive.http
        };
        let out = JvmRun::new(jdk17(), "otelprof.tests.BurstThenSteady")
            .args(&["2000", "8"])
            .agent(&format!(
                "cpu=2ms,period=1s,endpoint=http://127.0.0.1:{port},protocol={protocol}"
            ))
            .run();
        out.assert_clean_exit();
        let c = out.agent_counters();
        println!("{protocol}: agent {c:?}");
        for l in out.agent_lines() {
            println!("  {l}");
        }
        let mut stored: Vec<(std::time::SystemTime, u64)> = receive
            .stored_profiles()
            .iter()
            .map(|p| {
                let m = std::fs::metadata(p).unwrap();
                (m.modified().unwrap(), m.len())
            })
            .collect();
        stored.sort();
        let gaps: Vec<Duration> = stored
            .windows(2)
            .map(|w| w[1].0.duration_since(w[0].0).unwrap_or_default())
            .collect();
        println!(
            "{protocol}: stored {} profiles of {:?} bytes, {:?} apart",
            stored.len(),
            stored.iter().map(|s| s.1).collect::<Vec<_>>(),
            gaps
        );
        assert!(
            c["otlp_rejected"] >= 1,
            "the burst is over the limit: {c:?}"
        );
        assert_eq!(
            c["otlp_retried"], 0,
            "a refusal for size is not retried: {c:?}"
        );
        assert_eq!(c["otlp_throttled"], 0, "{c:?}");
        assert_eq!(c["otlp_unsent"], 0, "{c:?}");
        assert_eq!(
            c["otlp_attempts"],
            c["otlp_sent"] + c["otlp_rejected"],
            "one attempt per profile: {c:?}"
        );
        assert_eq!(stored.len() as u64, c["otlp_sent"]);
        assert!(stored.len() >= 6, "the steady profiles arrive: {stored:?}");
        // Stored as they came: protobuf from gRPC, the agent's gzip from HTTP.
        assert!(stored.iter().all(|s| s.1 <= 16 * 1024));
        // A period apart, give or take a busy machine; a queue held up by retries shows gaps
        // of the backoff (1, 2, 4, 8 s …).
        for g in &gaps {
            assert!(
                *g < Duration::from_secs(4),
                "a gap of {g:?} between deliveries"
            );
        }
        let rejected: Vec<&str> = out
            .agent_lines()
            .into_iter()
            .filter(|l| l.contains("not retried"))
            .collect();
        assert_eq!(rejected.len(), 1, "one line per kind of rejection");
        let code = if protocol == "grpc" {
            "gRPC status 3"
        } else {
            "HTTP 413"
        };
        assert!(rejected[0].contains(code), "{rejected:?}");
        assert!(rejected[0].contains("--max-request-size"), "{rejected:?}");
    }
}
