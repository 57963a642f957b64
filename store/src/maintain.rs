//! Keeping a store that a receiver writes to fast and small: compacting closed hours,
//! expiring old data, removing raw requests once the columnar store has them, and converting a
//! store written before the columnar store existed.
//!
//! The receiver keeps each request twice when it arrives: as the OTLP file it came as
//! (`profiles/DAY/…`, replayable into any backend) and in the columnar store, which is what
//! readers read ([`crate::StoreSource`]). The OTLP copy is kept for `keep_raw` (an hour by
//! default in `receive` and `serve`), so that the store stays smaller than what it received.
//! Requests received before the store had a columnar store are never removed by `keep_raw`:
//! they are the user's files, removed only by the retention, like everything else.

use std::path::{Path, PathBuf};

use opentelemetry::KeyValue;
use otelprof_profile::model::Profile;

use crate::columnar::{self, ColumnarWriter};
use crate::error::{Error, FileError};
use crate::layout::Signal;
use crate::reader::{decode_file, discover};

/// Name of the file, in the columnar store, holding the time (Unix ns) from which every
/// request the receiver kept as a raw file is also in the columnar store.
const RAW_SINCE: &str = ".raw-since";

/// What [`maintain`] does.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// An hour is compacted once it ended this long ago (ns): the agents' period and their
    /// export retry window, after which no profile starts in it any more.
    pub grace: i64,
    /// Data older than this (ns) is deleted: columnar hours, raw request and metrics days.
    pub retention: Option<i64>,
    /// Raw requests whose profiles are in the columnar store are removed this long (ns) after
    /// they arrived.
    pub keep_raw: Option<i64>,
}

/// What one [`maintain`] pass changed.
#[derive(Debug, Default)]
pub struct Done {
    pub compacted: Vec<PathBuf>,
    pub expired: Vec<PathBuf>,
    pub raw_removed: usize,
}

/// One maintenance pass over `store` at `now` (Unix ns).
pub fn maintain(store: &Path, now: i64, policy: &Policy) -> Result<Done, Error> {
    let mut done = Done {
        compacted: columnar::compact(store, now, policy.grace)?,
        ..Done::default()
    };
    if let Some(retention) = policy.retention {
        done.expired = columnar::retain(store, retention, now)?;
        let cutoff = now.saturating_sub(retention.max(0));
        for signal in [Signal::Profiles, Signal::Metrics] {
            done.expired
                .extend(expire_days(&store.join(signal.dir()), cutoff)?);
        }
    }
    if let (Some(keep), Some(since)) = (policy.keep_raw, raw_since(store)) {
        let cutoff = now.saturating_sub(keep.max(0));
        done.raw_removed = remove_raw(&store.join(Signal::Profiles.dir()), since, cutoff)?;
    }
    Ok(done)
}

/// Day directories under `dir` whose whole day is before `cutoff`, removed.
fn expire_days(dir: &Path, cutoff: i64) -> Result<Vec<PathBuf>, Error> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(removed);
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(start) = name.to_str().and_then(day_start) else {
            continue;
        };
        if start.saturating_add(24 * columnar::schema::HOUR) <= cutoff {
            let path = entry.path();
            std::fs::remove_dir_all(&path).map_err(Error::io("remove", &path))?;
            removed.push(path);
        }
    }
    removed.sort();
    Ok(removed)
}

/// The start (Unix ns) of a day directory's date (`2025-01-31`).
fn day_start(name: &str) -> Option<i64> {
    if name.len() != 10 || name.starts_with('.') {
        return None;
    }
    crate::time::parse_time(&format!("{name}T00:00:00Z"), 0).ok()
}

/// The receipt time a stored request's name starts with.
fn received_at(name: &str) -> Option<i64> {
    name.split('-').next()?.parse().ok()
}

/// Removes the raw profile requests under `dir` received in `[since, cutoff)`; returns how
/// many. Empty day directories go too.
fn remove_raw(dir: &Path, since: i64, cutoff: i64) -> Result<usize, Error> {
    let mut removed = 0;
    let Ok(days) = std::fs::read_dir(dir) else {
        return Ok(0);
    };
    for day in days.flatten() {
        let Ok(files) = std::fs::read_dir(day.path()) else {
            continue;
        };
        let mut left = 0;
        for file in files.flatten() {
            let at = file.file_name().to_str().and_then(received_at);
            match at {
                Some(at) if at >= since && at < cutoff => {
                    let path = file.path();
                    std::fs::remove_file(&path).map_err(Error::io("remove", &path))?;
                    removed += 1;
                }
                _ => left += 1,
            }
        }
        if left == 0 {
            let _ = std::fs::remove_dir(day.path());
        }
    }
    Ok(removed)
}

/// From when on the raw requests of `store` are also in its columnar store.
fn raw_since(store: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(store.join(columnar::DIR).join(RAW_SINCE)).ok()?;
    text.trim().parse().ok()
}

/// Makes `store` ready for a receiver that writes the columnar store: converts the profile
/// requests of a store that has none yet (a store written before it existed), and notes from
/// when on raw requests are copies. Returns how many requests were converted, and the files
/// that could not be (they stay where they are, and are not read). The conversion
/// is written beside the store and renamed into place when it is complete, so a crash leaves
/// the store as it was (and the next start converts again), never half converted.
pub fn prepare_for_ingest(store: &Path, now: i64) -> Result<Converted, Error> {
    let target = store.join(columnar::DIR);
    if target.is_dir() {
        return Ok((0, Vec::new()));
    }
    let (files, mut skipped) = discover(&[store.join(Signal::Profiles.dir())]);
    let mut converted = 0;
    if !files.is_empty() {
        let scratch = store.join(".converting");
        let _ = std::fs::remove_dir_all(&scratch);
        let writer = ColumnarWriter::open(&scratch)?;
        let mut buf = Vec::new();
        for path in &files {
            // A file a reader would skip stays where it is, reported; conversion goes on
            // with the others.
            let decoded = match decode_file(path, &mut buf) {
                Ok((decoded, _)) => decoded,
                Err(e) => {
                    skipped.push((path.clone(), e));
                    continue;
                }
            };
            let profiles: Vec<(Vec<KeyValue>, Profile)> = decoded
                .into_iter()
                .map(|d| (d.resource, d.profile))
                .collect();
            let stem = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.split('.').next())
                .map(str::to_owned);
            writer.write_as(&profiles, now, stem.as_deref())?;
            converted += 1;
        }
        let built = writer.root().to_path_buf();
        std::fs::rename(&built, &target).map_err(Error::io("move into place", &built))?;
        let _ = std::fs::remove_dir_all(&scratch);
    } else {
        std::fs::create_dir_all(&target).map_err(Error::io("create", &target))?;
    }
    let since = target.join(RAW_SINCE);
    std::fs::write(&since, format!("{now}\n")).map_err(Error::io("write", &since))?;
    crate::writer::sync_dir(&target)?;
    crate::writer::sync_dir(store)?;
    Ok((converted, skipped))
}

/// Requests converted, and the files that could not be, with the reason.
pub type Converted = (usize, Vec<(PathBuf, FileError)>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout;

    #[test]
    fn receipt_times_come_from_stored_names() {
        let name = layout::file_name(Signal::Profiles, 1_738_324_800_000_000_000, 42, 7, true);
        assert_eq!(received_at(&name), Some(1_738_324_800_000_000_000));
        assert_eq!(received_at("notes.txt"), None);
        assert_eq!(day_start("2025-01-31"), Some(1_738_281_600_000_000_000));
        assert_eq!(day_start("1738324800"), None);
    }
}
