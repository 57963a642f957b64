//! Hostile input against the store and its readers: requests whose few bytes would decode
//! into gigabytes if stacks or dictionaries were copied, a stack over the depth limit, and a
//! 16,384-level call tree for the writers. The requests are built with the official Python
//! classes (tests/python/hostile_requests.py), sent to a real `otelprof receive`, and read
//! back by the real `otelprof` under resource limits: 1 GiB of address space and 30 s for a
//! whole store, 256 KiB of stack for the writers of a deep tree.

use otelprof_tests::Tied as _;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use otelprof_tests::receive::ReceiveProcess;
use otelprof_tests::{cli_path, python, repo_root, run_with_timeout, scratch_dir};

/// The hostile and good requests, written by the Python generator.
fn requests() -> PathBuf {
    let dir = scratch_dir("hostile-requests");
    let out = Command::new(python())
        .arg(repo_root().join("tests/python/hostile_requests.py"))
        .arg(&dir)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    dir
}

/// `otelprof` with `args`, under `limit` (a resource and its value) set before it starts.
fn otelprof_limited(
    args: &[&str],
    limit: (libc::__rlimit_resource_t, u64),
) -> (Option<i32>, String, String, Duration) {
    let mut cmd = Command::new(cli_path());
    cmd.args(args);
    let (resource, value) = limit;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            if libc::setrlimit(resource, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run_with_timeout(cmd, Duration::from_secs(60))
}

/// One HTTP/1.1 POST of `body` to the receiver's OTLP path: the status code and the body.
fn post(port: u16, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /v1development/profiles HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \
         application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut response = Vec::new();
    s.read_to_end(&mut response).unwrap();
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response");
    let head = String::from_utf8_lossy(&response[..head_end]).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    (code, response[head_end + 4..].to_vec())
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

const GIB: u64 = 1 << 30;

#[test]
fn small_requests_cannot_make_the_readers_explode() {
    let dir = requests();
    let receive = ReceiveProcess::start(&[]);
    // Over a stated limit: refused with a 400 that names it.
    let (code, body) = post(receive.http, &read(&dir.join("stack_bomb.otlp.pb")));
    let reason = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(code, 400, "{reason}");
    assert!(
        reason.contains("a stack's depth (100000) is over the limit of 16384"),
        "{reason}"
    );
    // Within the limits, however much they share: accepted.
    for name in ["deep_shared", "dictionary_bomb", "deep_distinct"] {
        let (code, body) = post(receive.http, &read(&dir.join(format!("{name}.otlp.pb"))));
        assert_eq!(code, 200, "{name}: {}", String::from_utf8_lossy(&body));
    }
    for i in 0..20 {
        let (code, _) = post(
            receive.http,
            &read(&dir.join(format!("good-{i:02}.otlp.pb"))),
        );
        assert_eq!(code, 200);
    }
    // A file a receiver without limits once accepted is in the store too (copied in beside
    // the columnar store, which readers read with whatever else the directory holds; the raw
    // requests under profiles/ are copies of what the columnar store has).
    let old = receive.store.join("imported/2023-11-14");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::copy(dir.join("stack_bomb.otlp.pb"), old.join("1-1-1.otlp.pb")).unwrap();

    // Everything the receiver accepted is read within 1 GiB of address space and 30 s, and
    // the bad file does not hide the good ones.
    let store = receive.store.to_str().unwrap();
    let (code, out, err, took) =
        otelprof_limited(&["top", "--limit", "0", store], (libc::RLIMIT_AS, GIB));
    assert_eq!(code, Some(0), "{err}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(
        err.contains("1-1-1.otlp.pb") && err.contains("over the limit of 16384"),
        "{err}"
    );
    for function in [
        "good.Work.run",
        "bomb.Deep.recurse",
        "bomb.Dict.f",
        "deep.Level.f16383",
    ] {
        assert!(out.contains(function), "{function} missing:\n{out}");
    }
    // 20 good profiles of 10 s + 5,000 of 10 ms + 100,000 samples of 10 ms twice + 1 s.
    assert!(
        out.contains("5022 profiles"),
        "{}",
        out.lines().next().unwrap_or("")
    );
    let (code, out, err, _) = otelprof_limited(
        &["top", "--where", "service.name=good", store],
        (libc::RLIMIT_AS, GIB),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("3.33min  100.00%  good.Work.run"), "{out}");
}

#[test]
fn deep_call_trees_do_not_crash_the_writers() {
    let dir = requests();
    let deep = dir.join("deep_distinct.otlp.pb");
    let deep = deep.to_str().unwrap();
    let out_dir = scratch_dir("hostile-deep");
    // 256 KiB of stack: a recursion as deep as the 16,384-level tree would need far more.
    let stack = (libc::RLIMIT_STACK, 256 << 10);
    for file in ["deep.svg", "deep.html"] {
        let output = out_dir.join(file);
        let (code, out, err, _) =
            otelprof_limited(&["flame", "-o", output.to_str().unwrap(), deep], stack);
        assert_eq!(code, Some(0), "{file}: {out}{err}");
        let written = std::fs::read_to_string(&output).unwrap();
        assert!(
            written.contains("deep.Level.f16383"),
            "{file} lacks the leaf"
        );
    }
    let diff = out_dir.join("diff.svg");
    let (code, out, err, _) = otelprof_limited(
        &[
            "diff",
            "--base",
            "service.name=deep",
            "--head",
            "service.name=deep",
            "-o",
            diff.to_str().unwrap(),
            deep,
        ],
        stack,
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err, _) = otelprof_limited(&["top", "--limit", "3", deep], stack);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("deep.Level.f16383"), "{out}");
}
