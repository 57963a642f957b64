//! Two `otelprof receive` processes on one store in a bucket (moto), both acknowledging
//! requests the test sends; the one that holds the store's lease is killed with SIGKILL in the
//! middle of its write-back, at a different step of the converting or the compacting round in
//! each case; the other keeps receiving, takes the lease once it has expired and finishes the
//! work. Then the bucket holds one compacted samples file per partition and nothing a reader
//! would count twice, and `otelprof top` over it counts every acknowledged sample once.
//!
//! Where the holder is killed is chosen, not left to luck: the holder runs with a fault
//! (`OTELPROF_MAINTAIN_STOP=ROUND:N`) that stops its write-back after N object writes and
//! deletes of that round, and says where; the test kills it then. An object write is whole or
//! absent, so a kill during one leaves the bucket as a kill before or after it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use otelprof_tests::receive::{send_many, Acked};
use otelprof_tests::s3::{BucketReceiver, S3Server};
use otelprof_tests::{cli_path, scratch_dir, Tied as _};

const BUCKET: &str = "shared-store";
/// Where each case's holder is stopped and killed: round and object operations into it.
/// A conversion of the four partitions writes 10 objects (a stacks and a samples file each,
/// the marker at 0 on a new store, the marker); their compaction 32 (six files each, two
/// replaced deleted).
const KILLS: [&str; 6] = [
    "converting:1",
    "converting:5",
    "compacting:0",
    "compacting:5",
    "compacting:19",
    "compacting:27",
];
/// The receivers' maintenance, fast enough for a test: a pass a second (so a lease of five
/// seconds), requests converted and hours compacted two seconds after.
const FAST: [&str; 4] = ["--maintain-every", "1s", "--settle", "2s"];
const HOUR_NS: i64 = 3_600_000_000_000;
/// Requests sent to both receivers before the kill, and in all (the rest to the survivor).
const FIRST: usize = 40;
const REQUESTS: usize = 60;

/// Waits until `check` passes, trying every 200 ms, for at most `secs`; fails with what it
/// said last.
fn wait_for(secs: u64, what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let start = Instant::now();
    loop {
        let why = match check() {
            Ok(()) => return,
            Err(why) => why,
        };
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "gave up waiting {secs} s for {what}: {why}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `Ok` when `holds`, else `Err(why)`.
fn so(holds: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if holds {
        Ok(())
    } else {
        Err(why())
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// Whether the store's objects (`keys`, the marker's value) are those of finished work:
/// every request received before `received_until` converted, and each of the four
/// partitions (two services, two hours) compacted into one file of each kind, with no
/// conversion's file and nothing else left; what is missing if not.
fn finished(keys: &[String], marker: Option<i64>, received_until: i64) -> Result<(), String> {
    if marker.is_none_or(|m| m <= received_until) {
        return Err(format!("marker {marker:?} not past {received_until}"));
    }
    let mut partitions: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for k in keys.iter().filter(|k| k.contains("/columnar/service=")) {
        let (dir, name) = k.rsplit_once('/').unwrap();
        let kind = name.split('-').next().unwrap();
        let kind = if name.contains("-compacted-") {
            &name[..kind.len() + "-compacted".len()]
        } else {
            kind
        };
        partitions.entry(dir).or_default().push(kind);
    }
    let whole = [
        "rollup",
        "samples-compacted",
        "series",
        "slots",
        "spans",
        "stacks-compacted",
    ];
    let done = partitions.len() == 4
        && partitions.values_mut().all(|kinds| {
            kinds.sort_unstable();
            *kinds == whole
        });
    if done {
        Ok(())
    } else {
        Err(format!("partitions: {partitions:#?}"))
    }
}

/// One case: receivers A (holding the lease, stopped at `kill`) and B on the store at
/// `prefix`.
fn kill_case(s3: &S3Server, dir: &Path, prefix: &str, kill: &str) -> String {
    let url = format!("s3://{BUCKET}/{prefix}");
    let lease = format!("{prefix}/.maintain-lease");
    // Old hours, compacted as soon as the conversion passes them.
    let hour = (now_ns() / HOUR_NS - 5) * HOUR_NS;
    let mut a = BucketReceiver::start(
        s3,
        &url,
        &dir.join("a.log"),
        &FAST,
        &[("OTELPROF_MAINTAIN_STOP", kill)],
    );
    // A alone takes the lease at its first pass; only then B starts.
    wait_for(20, "A's lease", || {
        so(s3.get_text(BUCKET, &lease).is_some(), || a.log())
    });
    let b = BucketReceiver::start(s3, &url, &dir.join("b.log"), &FAST, &[]);
    let mut acked = send_many(&[a.http, b.http], 0, FIRST, hour, 2);
    wait_for(40, "A to stop at its fault", || {
        let said = a.log();
        so(said.contains("maintenance stopped by"), || said)
    });
    a.kill();
    // A maintained from a working directory under its `--cache`, not the user's cache.
    let a_cache = dir.join("a.log-cache");
    let worked_in_cache = std::fs::read_dir(&a_cache)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().contains("-maintain-w"))
        })
        .unwrap_or(false);
    assert!(worked_in_cache, "no working directory under {a_cache:?}");
    let said = a.log();
    let stop_line = said
        .lines()
        .find(|l| l.contains("maintenance stopped by"))
        .unwrap()
        .to_owned();
    assert!(
        stop_line.contains(&format!("{} round", kill.split(':').next().unwrap())),
        "{stop_line}"
    );
    // B goes on receiving, alone, and takes over once A's lease has expired.
    acked.add(send_many(&[b.http], FIRST, REQUESTS - FIRST, hour, 2));
    let received_until = now_ns();
    let marker_key = format!("{prefix}/columnar/.converted-until");
    wait_for(40, "B to finish the work", || {
        let keys = s3.keys(BUCKET, &format!("{prefix}/"));
        let marker = s3
            .get_text(BUCKET, &marker_key)
            .and_then(|t| t.trim().parse().ok());
        finished(&keys, marker, received_until).map_err(|e| format!("{e}\n{}", b.log()))
    });
    let lease_now = s3.get_text(BUCKET, &lease).unwrap();
    assert!(
        !lease_now.is_empty() && b.log().contains("store maintained"),
        "B took over: lease {lease_now:?}\n{}",
        b.log()
    );
    let (profiles, read) = top(s3, &url, &dir.join("cache"));
    assert_eq!(
        (profiles, read),
        (REQUESTS as u64, acked_lines(&acked)),
        "{kill}: top over the bucket"
    );
    b.stop();
    stop_line
}

/// `otelprof top --value samples` over the store: the profiles read, and each function's
/// self samples with the total (as `total`).
fn top(s3: &S3Server, url: &str, cache: &Path) -> (u64, Vec<(String, u64)>) {
    let out = Command::new(cli_path())
        .args(["top", "--value", "samples", "--limit", "50"])
        .args(["--cache", cache.to_str().unwrap(), url])
        .envs(s3.env())
        .output_tied()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `Type: samples (count); 60 profiles, … total 1520`, then `self self% total total% function`.
    let header = text.lines().next().unwrap();
    let number_before = |what: &str| -> u64 {
        let at = header.find(what).unwrap();
        header[..at]
            .rsplit([' ', ';'])
            .find(|w| !w.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    let profiles = number_before(" profiles");
    let total: u64 = header.rsplit(' ').next().unwrap().parse().unwrap();
    let mut lines: Vec<(String, u64)> = text
        .lines()
        .skip(2)
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let function = fields.get(4)?;
            function
                .starts_with("py.fleet.")
                .then(|| (function.to_string(), fields[0].parse().unwrap()))
        })
        .collect();
    lines.push(("total".into(), total));
    lines.sort();
    (profiles, lines)
}

fn acked_lines(acked: &Acked) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = acked
        .by_function
        .iter()
        .map(|(f, n)| (f.clone(), *n))
        .collect();
    v.push(("total".into(), acked.samples));
    v.sort();
    v
}

#[test]
fn a_holder_killed_mid_write_back_loses_nothing_and_the_other_receiver_finishes() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let dir = scratch_dir("shared-kill");
    let started = Instant::now();
    let stops: Vec<String> = std::thread::scope(|scope| {
        let cases: Vec<_> = KILLS
            .iter()
            .enumerate()
            .map(|(i, kill)| {
                let (s3, dir) = (&s3, dir.join(format!("case-{i}")));
                scope.spawn(move || {
                    std::fs::create_dir_all(&dir).unwrap();
                    kill_case(s3, &dir, &format!("case-{i}"), kill)
                })
            })
            .collect();
        cases.into_iter().map(|c| c.join().unwrap()).collect()
    });
    for s in &stops {
        eprintln!("{s}");
    }
    eprintln!("{} cases in {:?}", KILLS.len(), started.elapsed());
}
