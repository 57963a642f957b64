//! A store in a bucket maintained by one writer at a time under a lease ([`shared`]): a
//! holder stopped after any number of its object writes and deletes (as a holder killed
//! there would) leaves a store that answers with every sample once, and the next holder,
//! once the lease expired, finishes the conversion and compaction. The bucket is moto's S3
//! server (PyPI `moto[server]`, in the test venv), started and ended by the test.
// Test code (clippy.toml allows these in #[test]s; the helpers are outside them).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{cpu_profile, resource, scratch, MINUTE, T0};
use otel_bridge::otlp::{EncodeOptions, ProfileId};
use otelprof_store::bucket::Bucket;
use otelprof_store::maintain::Policy;
use otelprof_store::query::{self, top, Spec};
use otelprof_store::shared::{maintain_shared, Lease, Stop};
use otelprof_store::{ProfileType, Selector, Signal, Store, StoreSource};

const HOUR: i64 = 60 * MINUTE;
const TTL: i64 = 5 * MINUTE;

fn python() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    std::env::var_os("OTELPROF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.join("otlp-venv/bin/python"))
}

/// moto's S3 server on a free port, killed on drop.
struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_moto() -> (Moto, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python())
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moto = Moto(child);
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "moto did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let made = Command::new(python())
        .arg("-c")
        .arg(format!(
            "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:{port}', \
             aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\
             .create_bucket(Bucket='shared')"
        ))
        .status()
        .unwrap();
    assert!(made.success());
    (moto, port)
}

/// The requests of three JVMs over 90 minutes (two hours, a request every 30 minutes), with
/// their receipt times.
fn requests() -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut n = 0u8;
    for m in (0..90).step_by(30) {
        for i in 0..3 {
            n += 1;
            let bytes = otel_bridge::otlp::encode_to_vec(
                &cpu_profile(i, m),
                &resource(i),
                ProfileId::from_random([n; 16]),
                &EncodeOptions::default(),
            )
            .unwrap();
            out.push((T0 + (m + 1) * MINUTE + i as i64, bytes));
        }
    }
    out
}

/// Top functions (name, self, total) and total of a source, CPU.
fn answer(source: &StoreSource) -> (Vec<(String, f64, f64)>, f64) {
    let (merged, _) = query::merge(
        source,
        Spec::new(Some(ProfileType::Cpu), &Selector::default()),
    )
    .unwrap();
    let t = top::top_functions(&merged, None);
    let rows = t
        .rows
        .iter()
        .map(|r| (r.name.clone(), r.self_value, r.total_value))
        .collect();
    (rows, t.total)
}

/// What the store in `bucket` answers, read through a fresh mirror in `dir`.
fn read(bucket: &Bucket, dir: &Path) -> (Vec<(String, f64, f64)>, f64) {
    let _ = std::fs::remove_dir_all(dir);
    bucket.mirror(dir).unwrap();
    answer(&StoreSource::open(&[dir.to_path_buf()], Box::new(|p, e| panic!("{p:?}: {e}"))).unwrap())
}

#[test]
fn a_holder_stopped_at_any_step_leaves_every_sample_once_and_the_next_finishes() {
    let (_moto, port) = start_moto();
    // The only test of this binary: set before any thread reads the environment.
    for (k, v) in [
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ALLOW_HTTP", "true".into()),
    ] {
        std::env::set_var(k, v);
    }
    let dir = scratch("shared-bucket");
    let requests = requests();
    // The truth: the same requests as files, read by the engine.
    let files = dir.join("files/profiles/2025-01-31");
    std::fs::create_dir_all(&files).unwrap();
    for (i, (_, bytes)) in requests.iter().enumerate() {
        std::fs::write(files.join(format!("{i:04}.otlp.pb")), bytes).unwrap();
    }
    let want = answer(
        &StoreSource::open(&[dir.join("files")], Box::new(|p, e| panic!("{p:?}: {e}"))).unwrap(),
    );
    assert!(want.1 > 0.0 && want.0.len() > 5);
    let policy = Policy::receiving(15 * MINUTE, None, Some(0));
    let now = T0 + 3 * HOUR;
    let fill = |prefix: &str| {
        let url = format!("s3://shared/{prefix}");
        let store = Store::open(Path::new(&url)).unwrap();
        for (at, bytes) in &requests {
            store.put_raw(Signal::Profiles, bytes, *at).unwrap();
        }
        Bucket::open(&url).unwrap()
    };
    // A whole pass, to count its steps.
    let bucket = fill("whole");
    let a = Lease::new("a", TTL);
    let pass = maintain_shared(
        &bucket,
        &dir.join("work-whole"),
        &a,
        now,
        &policy,
        Stop::Never,
    )
    .unwrap()
    .unwrap();
    let steps = pass.uploaded + pass.deleted;
    assert!(
        pass.done.converted == requests.len() && pass.done.compacted.len() == 4,
        "{pass:?}"
    );
    assert_eq!(read(&bucket, &dir.join("read")), want);
    eprintln!(
        "a whole pass: {} objects written, {} deleted",
        pass.uploaded, pass.deleted
    );
    // Another writer cannot take the lease while it lasts.
    assert!(!Lease::new("b", TTL).hold(&bucket, now + MINUTE).unwrap());

    for stop in 0..steps {
        let bucket = fill(&format!("stopped-{stop}"));
        let work = dir.join(format!("work-{stop}"));
        let first = maintain_shared(&bucket, &work, &a, now, &policy, Stop::After(stop))
            .unwrap()
            .unwrap();
        assert_eq!(first.uploaded + first.deleted, stop);
        assert_eq!(
            read(&bucket, &dir.join("read")),
            want,
            "stopped after {stop}"
        );
        // The survivor, once the lease expired.
        let b = Lease::new("b", TTL);
        let later = now + TTL + MINUTE;
        assert!(maintain_shared(
            &bucket,
            &dir.join("work-b"),
            &b,
            later - 2 * TTL,
            &policy,
            Stop::After(0)
        )
        .unwrap()
        .is_none());
        let _ = std::fs::remove_dir_all(dir.join("work-b"));
        let second = maintain_shared(
            &bucket,
            &dir.join("work-b"),
            &b,
            later,
            &policy,
            Stop::Never,
        )
        .unwrap()
        .unwrap();
        let _ = std::fs::remove_dir_all(dir.join("work-b"));
        assert_eq!(
            read(&bucket, &dir.join("read")),
            want,
            "finished after {stop}"
        );
        // The survivor's work is done: every partition (two services, two hours) compacted,
        // no raw request left.
        let read_dir = dir.join("read");
        let names: Vec<String> = walk(&read_dir);
        assert!(
            names
                .iter()
                .filter(|n| n.contains("samples-compacted"))
                .count()
                == 4
                && !names.iter().any(|n| n.contains("/profiles/")),
            "after {stop}: {second:?}\n{names:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().to_string_lossy().into_owned());
            }
        }
    }
    out
}
