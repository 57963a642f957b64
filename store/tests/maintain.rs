//! A store a receiver maintains: an OTLP store from before the columnar store is converted
//! once, whole, and answers as before; raw requests go after their time but the user's older
//! files stay; retention removes whole hours and days; readers read a store's columnar store,
//! not its raw requests too.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{alloc_profile, canonical, cpu_profile, resource, scratch, MINUTE, T0};
use otelprof_profile::otlp::{EncodeOptions, ProfileId};
use otelprof_store::maintain::{maintain, prepare_for_ingest, Policy};
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
                let bytes = otelprof_profile::otlp::encode_to_vec(
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

#[test]
fn an_otlp_store_is_converted_once_whole_and_answers_as_before() {
    let dir = scratch("convert");
    let files = otlp_store(&dir);
    let before = answers(&dir);
    assert!(!read(&dir, ProfileType::Cpu, None).1, "read from the files");
    assert!(before.iter().all(|a| !a.is_empty()));

    // A conversion a crash interrupted leaves its scratch directory; it is started over.
    std::fs::create_dir_all(dir.join(".converting/columnar/junk")).unwrap();
    let now = T0 + DAY;
    assert_eq!(prepare_for_ingest(&dir, now).unwrap().0, files.len());
    assert!(!dir.join(".converting").exists());
    assert!(
        read(&dir, ProfileType::Cpu, None).1,
        "read from the columnar store"
    );
    assert_eq!(answers(&dir), before);
    // Once is enough: the next start finds the columnar store and converts nothing.
    assert_eq!(prepare_for_ingest(&dir, now + MINUTE).unwrap().0, 0);
    assert_eq!(answers(&dir), before);

    // The raw files of the old store are the user's: keep_raw never removes them.
    let policy = Policy {
        grace: 0,
        retention: None,
        keep_raw: Some(0),
    };
    let done = maintain(&dir, now + 2 * DAY, &policy).unwrap();
    assert_eq!(done.raw_removed, 0);
    assert!(files.iter().all(|f| f.exists()));
    // The hour was compacted, and answers the same (from rows and from rollups).
    assert!(!done.compacted.is_empty());
    assert_eq!(answers(&dir), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn raw_requests_go_after_their_time_and_retention_removes_whole_hours_and_days() {
    let dir = scratch("keep");
    let now = T0 - MINUTE;
    assert_eq!(prepare_for_ingest(&dir, now).unwrap().0, 0);
    // Requests received after the columnar store was made: copies of what it holds (the
    // receiver writes both; here the columnar side is written from the same files).
    let files = otlp_store(&dir);
    let writer = otelprof_store::columnar::ColumnarWriter::open(&dir).unwrap();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let decoded = otelprof_profile::otlp::decode(&bytes).unwrap();
        let stem = f.file_name().unwrap().to_str().unwrap().split('.').next();
        writer.write_as(&decoded, T0, stem).unwrap();
    }
    let before = answers(&dir);
    assert!(read(&dir, ProfileType::Cpu, None).1);

    // Raw requests received in the first 10 minutes are past an hour's keep at T0 + 71 min.
    let policy = Policy {
        grace: 15 * MINUTE,
        retention: None,
        keep_raw: Some(60 * MINUTE),
    };
    let done = maintain(&dir, T0 + 71 * MINUTE, &policy).unwrap();
    let gone = files.iter().filter(|f| !f.exists()).count();
    assert_eq!(done.raw_removed, gone);
    assert_eq!(gone, 10 * 3, "the requests received at minutes 1-10");
    // The hour ended 11 minutes ago: not compacted yet (grace 15 min).
    assert!(done.compacted.is_empty());
    assert_eq!(
        answers(&dir),
        before,
        "readers read the columnar store only"
    );

    let done = maintain(&dir, T0 + 76 * MINUTE, &policy).unwrap();
    assert_eq!(done.compacted.len(), 1, "one service, one hour");
    assert_eq!(answers(&dir), before);

    // Seven days later with a 7-day retention: the hour and the day of raw requests go.
    let policy = Policy {
        retention: Some(7 * DAY),
        ..policy
    };
    let done = maintain(&dir, T0 + 8 * DAY, &policy).unwrap();
    assert_eq!(
        done.expired.len(),
        2,
        "the hour and the day: {:?}",
        done.expired
    );
    assert!(!dir
        .join(Signal::Profiles.dir())
        .join(layout::day_dir(T0))
        .exists());
    assert!(StoreSource::open(std::slice::from_ref(&dir), Box::new(|_, _| {})).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
