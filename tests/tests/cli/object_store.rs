//! Stores in object storage: `otelprof receive --store s3://bucket/prefix` against an S3 API
//! server (moto, started and ended by the test), and the reading commands given the bucket's
//! URL, answer as the same requests in a local store do.

use otelprof_tests::Tied as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use otelprof_tests::receive::{files_below, send_many, ReceiveProcess};
use otelprof_tests::s3::{BucketReceiver, S3Server};
use otelprof_tests::{cli_path, jdk17, python, repo_root, scratch_dir, JvmRun};

const CPU_SPLIT: &str = "otelprof.workloads.CpuSplit";
const BUCKET: &str = "profiles";

/// `otelprof ARGS` with the object store's environment; stdout, and stderr in the message.
fn otelprof_s3(s3: &S3Server, args: &[&str]) -> Output {
    let out = Command::new(cli_path())
        .args(args)
        .envs(s3.env())
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "otelprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Sends the OTLP request in `file` (gzip or not) over HTTP with the independent client;
/// asserts it was acknowledged.
fn send(file: &Path, http: u16, dir: &Path) {
    let mut raw = Vec::new();
    let bytes = std::fs::read(file).unwrap();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut raw)
            .unwrap();
    } else {
        raw = bytes;
    }
    let body = dir.join("body.pb");
    std::fs::write(&body, &raw).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("tests/cli/otlp_client.py"))
        .args(["--protocol", "http", "--gzip", "--body"])
        .arg(&body)
        .args(["--target", &format!("http://127.0.0.1:{http}")])
        .output_tied()
        .unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(answer.contains("\"ok\": true"), "{answer}");
}

/// Profiles of two versions of one service, exported by real JVMs to a local receiver: its
/// store, and the requests it stored.
fn local_store() -> (ReceiveProcess, Vec<PathBuf>) {
    let receive = ReceiveProcess::start(&[]);
    for version in ["a", "b"] {
        let out = JvmRun::new(jdk17(), CPU_SPLIT)
            .agent(&format!("{},period=1s", receive.agent_options()))
            .env("OTEL_SERVICE_NAME", "split")
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                &format!("service.version={version}"),
            )
            .args(&["2", "2"])
            .run();
        out.assert_clean_exit();
    }
    let stored = receive.stored_profiles();
    assert!(stored.len() >= 4, "{stored:?}");
    (receive, stored)
}

#[test]
fn a_store_in_a_bucket_answers_as_the_same_requests_on_disk() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let (local, requests) = local_store();
    let dir = scratch_dir("s3-store");
    let url = format!("s3://{BUCKET}/fleet/prod");
    let remote = BucketReceiver::start(&s3, &url, &dir.join("receive.log"), &[], &[]);
    for r in &requests {
        send(r, remote.http, &dir);
    }
    // Acknowledged means written: every request is an object already, named by the writer id.
    let keys = s3.keys(BUCKET, "fleet/prod/profiles/");
    assert_eq!(keys.len(), requests.len(), "{keys:?}");
    for k in &keys {
        let name = k.rsplit('/').next().unwrap();
        let writer = name.split('-').nth(1).unwrap();
        assert!(
            k.starts_with("fleet/prod/profiles/")
                && writer.len() == 17
                && writer.starts_with('w')
                && name.ends_with(".otlp.pb.gz"),
            "{k}"
        );
    }
    let cache = dir.join("cache");
    let cache_arg = cache.to_str().unwrap();
    let local_arg = local.store_arg();
    let questions: [&[&str]; 3] = [
        &["top", "--limit", "20"],
        &["top", "--by", "service.version"],
        &[
            "diff",
            "--base",
            "service.version=a",
            "--head",
            "service.version=b",
        ],
    ];
    for q in questions {
        let on_disk = otelprof_s3(&s3, &[q, &[local_arg]].concat());
        let in_bucket = otelprof_s3(&s3, &[q, &["--cache", cache_arg, &url]].concat());
        let (a, b) = (stdout(&on_disk), stdout(&in_bucket));
        assert!(a.contains("otelprof.workloads.CpuSplit"), "{a}");
        assert_eq!(a.replace(local_arg, &url), b, "otelprof {q:?}");
    }
    // The mirror fetched every object once: a second read fetches none of them again (only
    // the conversion marker, which changes in place, a few bytes).
    let again = Command::new(cli_path())
        .args(["top", "--cache", cache_arg, &url])
        .envs(s3.env())
        .env("OTELPROF_BUCKET_STATS", "1")
        .output_tied()
        .unwrap();
    let said = String::from_utf8_lossy(&again.stderr);
    let fetched: u64 = said
        .split(" fetched (")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    assert!(fetched < 64, "{said}");
    // The receiver holds the store's lease (it maintains the store): another process may not
    // compact it meanwhile.
    let refused = Command::new(cli_path())
        .args(["compact", "--cache", cache_arg, "--store", &url])
        .envs(s3.env())
        .output_tied()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("holds the store's lease"),
        "{said}"
    );
    remote.stop();

    // The same store compacted into its columnar form (Hive-partitioned Parquet) and copied
    // into the bucket as it is: read from there, it answers as on disk.
    let copy = dir.join("copy");
    copy_dir(&local.store, &copy);
    otelprof_s3(&s3, &["compact", "--store", copy.to_str().unwrap()]);
    assert!(files_below(&copy.join("columnar"))
        .iter()
        .any(|p| p.to_string_lossy().ends_with(".parquet")));
    s3.upload(&copy, BUCKET, "fleet/columnar-copy");
    let url = format!("s3://{BUCKET}/fleet/columnar-copy");
    for q in questions {
        let on_disk = otelprof_s3(&s3, &[q, &[copy.to_str().unwrap()]].concat());
        let in_bucket = otelprof_s3(&s3, &[q, &["--cache", cache_arg, &url]].concat());
        let (a, b) = (stdout(&on_disk), stdout(&in_bucket));
        assert_eq!(
            a.replace(copy.to_str().unwrap(), &url),
            b,
            "otelprof {q:?} (columnar)"
        );
    }
    let bucket_url = format!("s3://{BUCKET}/fleet/prod");
    // The bucket's store compacted where it is (this process holding its lease): its Parquet
    // files and marker are objects now, and it answers as the copy compacted on disk.
    otelprof_s3(
        &s3,
        &["compact", "--cache", cache_arg, "--store", &bucket_url],
    );
    let keys = s3.keys(BUCKET, "fleet/prod/columnar/");
    assert!(
        keys.iter().any(|k| k.contains("/samples-compacted-"))
            && keys.iter().any(|k| k.ends_with("/.converted-until")),
        "{keys:?}"
    );
    let copy_arg = copy.to_str().unwrap();
    for q in questions {
        let on_disk = otelprof_s3(&s3, &[q, &[copy_arg]].concat());
        let in_bucket = otelprof_s3(&s3, &[q, &["--cache", cache_arg, &bucket_url]].concat());
        let (a, b) = (stdout(&on_disk), stdout(&in_bucket));
        assert_eq!(
            a.replace(copy_arg, &bucket_url),
            b,
            "otelprof {q:?} (compacted in the bucket)"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for f in files_below(from) {
        let dest = to.join(f.strip_prefix(from).unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&f, &dest).unwrap();
    }
}

/// `otelprof ARGS` with `OTELPROF_BUCKET_STATS`: stdout, and the bytes it fetched (its
/// stats line in `said`).
fn otelprof_fetching(s3: &S3Server, args: &[&str], said_last: &mut String) -> (String, u64) {
    let out = Command::new(cli_path())
        .args(args)
        .envs(s3.env())
        .env("OTELPROF_BUCKET_STATS", "1")
        .output_tied()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "otelprof {args:?}: {said}");
    let fetched = said
        .split(" fetched (")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    *said_last = said.into_owned();
    (stdout(&out), fetched)
}

/// The bytes of the files below `dir`.
fn bytes_below(dir: &Path) -> u64 {
    files_below(dir)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

#[test]
fn a_bounded_cache_fetches_what_a_view_reads_and_stays_within_its_size() {
    const HOURS: usize = 6;
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let dir = scratch_dir("s3-cache");
    // Six hours of two services, received and compacted on disk, copied into the bucket.
    let local = ReceiveProcess::start(&[]);
    let hour_ns: i64 = 3_600_000_000_000;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let first = (now / hour_ns - 10) * hour_ns;
    send_many(&[local.http], 0, 240, first, HOURS);
    let store = local.store.clone();
    drop(local);
    otelprof_s3(&s3, &["compact", "--store", store.to_str().unwrap()]);
    s3.upload(&store, BUCKET, "fleet/hours");
    let url = format!("s3://{BUCKET}/fleet/hours");
    let local_arg = store.to_str().unwrap();
    // Unix seconds.
    let hour = |h: usize| ((first + h as i64 * hour_ns) / 1_000_000_000).to_string();
    let view = |h: usize| -> Vec<String> {
        let to = hour(h + 1);
        let from = hour(h);
        ["top", "--value", "samples", "--from", &from, "--to", &to]
            .map(str::to_owned)
            .to_vec()
    };
    let said = std::cell::RefCell::new(String::new());
    let ask = |args: &[String], cache: &Path, size: Option<&str>| -> (String, u64) {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--cache", cache.to_str().unwrap()]);
        if let Some(s) = size {
            all.extend(["--cache-size", s]);
        }
        all.push(&url);
        otelprof_fetching(&s3, &all, &mut said.borrow_mut())
    };
    let truth = |args: &[String]| -> String {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.push(local_arg);
        stdout(&otelprof_s3(&s3, &all)).replace(local_arg, &url)
    };

    // The whole store, then one hour with a cold cache: the hour fetches much less.
    let whole = ["top", "--value", "samples"].map(str::to_owned).to_vec();
    let (answer, all_bytes) = ask(&whole, &dir.join("cold-whole"), None);
    assert_eq!(answer, truth(&whole));
    let (answer, hour_bytes) = ask(&view(3), &dir.join("cold-hour"), None);
    assert_eq!(answer, truth(&view(3)));
    assert!(answer.contains("py.fleet.Work"), "{answer}");
    eprintln!("whole store: {all_bytes} bytes fetched; one hour: {hour_bytes}");
    assert!(
        hour_bytes > 0 && hour_bytes * 2 < all_bytes,
        "{hour_bytes} of {all_bytes}"
    );

    // A limit of one view's copies and half another's: each hour in turn, then again; the
    // cache stays within it after every command and every answer is the local store's.
    let limit = hour_bytes * 3 / 2;
    let limit_arg = limit.to_string();
    let cache = dir.join("bounded");
    let mut fetched_again = 0;
    for round in 0..2 {
        for h in 0..HOURS {
            let (answer, fetched) = ask(&view(h), &cache, Some(&limit_arg));
            assert_eq!(answer, truth(&view(h)), "hour {h}, round {round}");
            let size = bytes_below(&cache);
            assert!(
                size <= limit,
                "hour {h}: {size} bytes cached, limit {limit}"
            );
            if round == 1 {
                fetched_again += fetched;
            }
        }
    }
    // Evicted hours are fetched again; a view answered from the cache fetches only the marker.
    assert!(fetched_again > hour_bytes, "{fetched_again}");
    let (_, fetched) = ask(&view(HOURS - 1), &cache, Some(&limit_arg));
    assert!(fetched < 64, "{}", said.borrow());
    eprintln!("{}", said.borrow());
}
