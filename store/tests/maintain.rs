//! A store a receiver maintains: its raw requests are converted a chunk of receipt time at a
//! time behind one marker, and the store answers the same at every step (before, between
//! chunks, after a crash mid-conversion, after compaction, after the raw requests are
//! removed); retention removes whole hours and days.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{alloc_profile, canonical, cpu_profile, resource, scratch, MINUTE, T0};
use otel_bridge::otlp::{EncodeOptions, ProfileId};
use otelprof_store::maintain::{maintain, MaintainLock, Policy};
use otelprof_store::query::{self, Spec};
use otelprof_store::{layout, Merged, ProfileType, Selector, Signal, StoreSource};

const DAY: i64 = 24 * 60 * MINUTE;

/// Writes the requests of 30 minutes of two JVMs as a receiver names them, received at
/// `T0 + minute + 1 min`; returns the files.
fn otlp_store(dir: &Path) -> Vec<PathBuf> {
    let day = dir.join(Signal::Profiles.dir()).join(layout::day_dir(T0));
    std::fs::create_dir_all(&day).unwrap();
    let mut files = Vec::new();
    for m in 0..30 {
        for i in 0..2 {
            let mut profiles = vec![cpu_profile(i, m)];
            if i == 1 {
                profiles.push(alloc_profile(m));
            }
            for (k, p) in profiles.iter().enumerate() {
                let seq = (m * 10 + i as i64 * 2 + k as i64) as u64;
                let bytes = otel_bridge::otlp::encode_to_vec(
                    p,
                    &resource(i),
                    ProfileId::from_random([seq as u8 + 1; 16]),
                    &EncodeOptions {
                        timestamps: true,
                        ..EncodeOptions::default()
                    },
                )
                .unwrap();
                let name =
                    layout::file_name(Signal::Profiles, T0 + (m + 1) * MINUTE, 4242, seq, false);
                let path = day.join(name);
                std::fs::write(&path, &bytes).unwrap();
                files.push(path);
            }
        }
    }
    files
}

fn read(dir: &Path, ty: ProfileType, by: Option<&str>) -> (Merged, bool) {
    let source =
        StoreSource::open(&[dir.to_path_buf()], Box::new(|p, e| panic!("{p:?}: {e}"))).unwrap();
    let columnar = source.is_columnar();
    let spec = Spec::new(Some(ty), &Selector::default()).by(by);
    (query::merge(&source, spec).unwrap().0, columnar)
}

type Answer = Vec<(String, Vec<String>, i64, i64)>;

fn answers(dir: &Path) -> Vec<Answer> {
    [
        (ProfileType::Cpu, None),
        (ProfileType::Cpu, Some("span_name")),
        (ProfileType::Alloc, Some("service.instance.id")),
    ]
    .into_iter()
    .map(|(ty, by)| canonical(&read(dir, ty, by).0))
    .collect()
}

/// The samples files of the columnar store of `dir`.
fn samples_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let root = dir.join(otelprof_store::columnar::DIR);
    for service in std::fs::read_dir(&root).unwrap().flatten() {
        if !service.path().is_dir() || service.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        for hour in std::fs::read_dir(service.path()).unwrap().flatten() {
            for f in std::fs::read_dir(hour.path()).unwrap().flatten() {
                if f.file_name().to_string_lossy().starts_with("samples-") {
                    out.push(f.path());
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_store_answers_the_same_at_every_step_of_its_conversion() {
    let dir = scratch("convert");
    let files = otlp_store(&dir);
    let before = answers(&dir);
    assert!(!read(&dir, ProfileType::Cpu, None).1, "read from the files");
    assert!(before.iter().all(|a| !a.is_empty()));
    let policy = Policy::receiving(15 * MINUTE, None, None);
    let lock = MaintainLock::try_take(&dir).unwrap().unwrap();

    // At 12:13 the chunk [.., 12:10) is converted: the requests received at minutes 1-9.
    let done = maintain(&dir, T0 + 13 * MINUTE, &policy, &lock).unwrap();
    assert_eq!(done.converted, 9 * 3);
    assert_eq!(
        otelprof_store::columnar::converted_until(&dir),
        Some(T0 + 10 * MINUTE)
    );
    assert!(read(&dir, ProfileType::Cpu, None).1, "partly columnar");
    assert_eq!(
        answers(&dir),
        before,
        "columnar + the raw requests after the marker"
    );

    // A conversion that a crash stopped before its commit: its files wait for a marker that
    // never came, and are not read.
    let committed = samples_files(&dir);
    let first = committed.first().unwrap();
    let name = first.file_name().unwrap().to_str().unwrap();
    let w = format!("{:020}", T0 + 20 * MINUTE);
    let orphan = first.with_file_name(format!("samples-w{w}-0000.parquet"));
    assert_ne!(name, orphan.file_name().unwrap().to_str().unwrap());
    std::fs::copy(first, &orphan).unwrap();
    assert_eq!(answers(&dir), before, "an uncommitted file is not read");

    // Two hours later: everything converted (the orphan removed and written again), the
    // hour compacted once the marker passed its end by the grace.
    let done = maintain(&dir, T0 + 2 * 60 * MINUTE, &policy, &lock).unwrap();
    assert_eq!(done.converted, files.len() - 9 * 3);
    assert_eq!(done.compacted.len(), 1, "one service, one hour");
    assert!(!orphan.exists());
    assert_eq!(answers(&dir), before);
    let compacted = samples_files(&dir);
    assert_eq!(compacted.len(), 1, "{compacted:?}");

    // Raw requests are removed once converted and past their keep; answers stay.
    let done = maintain(
        &dir,
        T0 + 2 * 60 * MINUTE,
        &Policy {
            keep_raw: Some(0),
            ..policy
        },
        &lock,
    )
    .unwrap();
    assert_eq!(done.raw_removed, files.len());
    assert!(files.iter().all(|f| !f.exists()));
    assert_eq!(answers(&dir), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn raw_requests_go_after_their_time_and_retention_removes_whole_hours_and_days() {
    let dir = scratch("keep");
    let files = otlp_store(&dir);
    let before = answers(&dir);

    // Raw requests received in the first 10 minutes are past an hour's keep at T0 + 71 min,
    // and converted (the marker is at 12:30 once the whole half hour is in).
    let policy = Policy::receiving(15 * MINUTE, None, Some(60 * MINUTE));
    let lock = MaintainLock::try_take(&dir).unwrap().unwrap();
    let done = maintain(&dir, T0 + 71 * MINUTE, &policy, &lock).unwrap();
    assert_eq!(done.converted, files.len());
    let gone = files.iter().filter(|f| !f.exists()).count();
    assert_eq!(done.raw_removed, gone);
    assert_eq!(gone, 10 * 3, "the requests received at minutes 1-10");
    // The marker (13:00) has not passed the hour's end by the grace yet: not compacted.
    assert!(done.compacted.is_empty());
    assert_eq!(answers(&dir), before, "each request counted once");

    let done = maintain(&dir, T0 + 92 * MINUTE, &policy, &lock).unwrap();
    assert_eq!(done.compacted.len(), 1, "one service, one hour");
    assert_eq!(
        done.raw_removed,
        files.len() - gone,
        "the others, past their keep"
    );
    assert_eq!(answers(&dir), before);

    // Seven days later with a 7-day retention: the hour goes (the raw requests went after
    // their keep, converted, and their day directory with the last of them).
    let policy = Policy {
        retention: Some(7 * DAY),
        ..policy
    };
    let done = maintain(&dir, T0 + 8 * DAY, &policy, &lock).unwrap();
    assert_eq!(done.expired.len(), 1, "the hour: {:?}", done.expired);
    assert!(!dir
        .join(Signal::Profiles.dir())
        .join(layout::day_dir(T0))
        .exists());
    assert!(StoreSource::open(std::slice::from_ref(&dir), Box::new(|_, _| {})).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_process_maintains_a_store_and_at_rest_it_converts_and_compacts_everything() {
    let dir = scratch("rest");
    let files = otlp_store(&dir);
    let before = answers(&dir);
    let lock = MaintainLock::try_take(&dir).unwrap().unwrap();
    // Another holder (a second receiver, or `otelprof compact`) is refused while it is held:
    // flock locks belong to the open file, so a second open in this process stands for
    // another process.
    assert!(MaintainLock::try_take(&dir).unwrap().is_none());
    // At rest, right after the last request arrived: everything converted (no whole chunk
    // waited for), the marker at `now` exactly, the hour compacted although not over.
    let now = T0 + 31 * MINUTE;
    let policy = Policy {
        at_rest: true,
        ..Policy::receiving(15 * MINUTE, None, None)
    };
    let done = maintain(&dir, now, &policy, &lock).unwrap();
    assert_eq!(done.converted, files.len());
    assert_eq!(otelprof_store::columnar::converted_until(&dir), Some(now));
    assert_eq!(done.compacted.len(), 1, "one service, one hour");
    assert_eq!(samples_files(&dir).len(), 1);
    assert_eq!(answers(&dir), before);
    drop(lock);
    assert!(MaintainLock::try_take(&dir).unwrap().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_short_settle_converts_within_seconds_of_receipt() {
    let dir = scratch("settle");
    let files = otlp_store(&dir);
    let before = answers(&dir);
    let lock = MaintainLock::try_take(&dir).unwrap().unwrap();
    let second = MINUTE / 60;
    // 12:10:06: the default waits for the 10-minute chunk to be 2 minutes old, and converts
    // nothing; a settle of 5 s converts what arrived before 12:10:00 (minutes 1-9).
    let at = T0 + 10 * MINUTE + 6 * second;
    let default = Policy::receiving(15 * MINUTE, None, None);
    assert_eq!(maintain(&dir, at, &default, &lock).unwrap().converted, 0);
    let short = Policy::receiving(5 * second, None, None);
    assert_eq!(maintain(&dir, at, &short, &lock).unwrap().converted, 9 * 3);
    assert_eq!(
        otelprof_store::columnar::converted_until(&dir),
        Some(T0 + 10 * MINUTE)
    );
    // Ten seconds after the last request: all converted; the hour, 5 s after its end.
    let done = maintain(&dir, T0 + 30 * MINUTE + 10 * second, &short, &lock).unwrap();
    assert_eq!(done.converted, files.len() - 9 * 3);
    assert!(done.compacted.is_empty());
    assert_eq!(answers(&dir), before);
    let done = maintain(&dir, T0 + 60 * MINUTE + 10 * second, &short, &lock).unwrap();
    assert_eq!(done.compacted.len(), 1, "compacted 5 s after its end");
    assert_eq!(answers(&dir), before);
    let _ = std::fs::remove_dir_all(&dir);
}
