//! Keeping a store that a receiver writes to fast and small: converting what it received
//! into the columnar store, compacting closed hours, expiring old data, and removing raw
//! requests once the columnar store has them.
//!
//! The receiver writes each request as the OTLP file it came as (`profiles/DAY/…`, named
//! after its receipt time), and nothing else: that is cheap, and the request is durable
//! before it is acknowledged. Every pass of [`maintain`] then converts the requests received
//! in whole [`CHUNK`]s of receipt time that have ended (with [`LAG`] to spare for a request
//! still being written) into the columnar store, one samples file per partition and chunk,
//! and commits them with a single marker, `columnar/.converted-until`: the receipt time W
//! before which every request is in the columnar store. Readers ([`crate::StoreSource`]) read
//! the columnar store and the raw requests received at or after W, so a request is counted
//! once whatever the moment. The files of a chunk are named `samples-w<W>-…`: a crash before
//! the marker moves leaves files that readers ignore (their W is past the marker) and the next
//! pass removes before converting again.
//!
//! An hour partition is compacted (one samples file in time-ordered row groups, its stacks,
//! its rollup) once the marker has passed its end by `grace`: the last of its profiles, which
//! arrive after the hour ends, are converted by then, so an hour is compacted once.
//!
//! Raw requests are removed `keep_raw` after they arrived, and only once converted (received
//! before the marker). A store of OTLP files written before the columnar store existed is
//! converted by the first passes, a chunk at a time, oldest first.

use std::path::{Path, PathBuf};

use opentelemetry::KeyValue;
use otel_bridge::model::Profile;

use crate::columnar::{self, ColumnarWriter};
use crate::error::{Error, FileError};
use crate::layout::Signal;
use crate::reader::{decode_file, discover};

/// Receipt time converted at once: the raw requests read afterwards are at most this (plus
/// [`LAG`]) old, so that a question on the last hour decodes a few minutes of OTLP.
pub const CHUNK: i64 = 10 * 60 * 1_000_000_000;
/// How long after a chunk ends it is converted: a request's file is named when it arrives and
/// is in place once its body is read (within the receiver's 30 s body timeout).
pub const LAG: i64 = 2 * 60 * 1_000_000_000;
/// Suffix of a raw request that could not be converted: never read, never removed.
pub const UNCONVERTIBLE: &str = ".unconvertible";
/// Requests decoded and written together at most (their profiles are held in memory).
const BATCH: usize = 256;

/// What [`maintain`] does.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// An hour is compacted once the conversion has passed its end by this (ns): the agents'
    /// period and their export retry window, after which no profile starts in it any more.
    pub grace: i64,
    /// Requests are converted once their chunk of receipt time ended this long (ns) ago
    /// ([`LAG`] in service).
    pub lag: i64,
    /// Receipt time converted at once (ns; [`CHUNK`] in service).
    pub chunk: i64,
    /// Data older than this (ns) is deleted: columnar hours, raw request and metrics days.
    pub retention: Option<i64>,
    /// Raw requests are removed this long (ns) after they arrived, once converted; `None`
    /// keeps them.
    pub keep_raw: Option<i64>,
    /// The store is at rest (no receiver writes to it: [`MaintainLock`] is held): every
    /// request received before `now` is converted, not only whole chunks, and every hour is
    /// compacted, the current one included (a request that comes later into a compacted hour
    /// makes it answer from rows until it is compacted again).
    pub at_rest: bool,
}

impl Policy {
    /// A receiver's policy: an hour compacted `settle` (ns) after its end; requests converted
    /// in [`CHUNK`]s once [`LAG`] old, both shortened to `settle` when it is shorter (a store
    /// that must answer from its columnar form within seconds, as in tests: a request must
    /// then be written within `settle` of its receipt, or a conversion may pass it by).
    pub fn receiving(settle: i64, retention: Option<i64>, keep_raw: Option<i64>) -> Policy {
        let settle = settle.max(1);
        Policy {
            grace: settle,
            lag: LAG.min(settle),
            chunk: CHUNK.min(settle),
            retention,
            keep_raw,
            at_rest: false,
        }
    }

    /// The policy of a store at rest ([`Policy::at_rest`]): everything converted and
    /// compacted now.
    pub fn at_rest(retention: Option<i64>, keep_raw: Option<i64>) -> Policy {
        Policy {
            grace: 0,
            lag: 0,
            chunk: CHUNK,
            retention,
            keep_raw,
            at_rest: true,
        }
    }
}

/// The store's maintenance lock (`STORE/.maintain.lock`, an advisory `flock`): the process
/// holding it is the only one that converts, compacts and expires, so two receivers on one
/// store (`receive` and `serve`, or `otelprof compact` beside a receiver) never convert the
/// same chunk twice. A receiver holds it for its whole run; it is released when the process
/// exits, however it exits.
pub struct MaintainLock {
    _file: std::fs::File,
}

/// The name of the lock file in a store.
pub const LOCK_FILE: &str = ".maintain.lock";

impl MaintainLock {
    /// Takes the lock of `store` (created if missing), or `None` when another process holds
    /// it.
    pub fn try_take(store: &Path) -> Result<Option<MaintainLock>, Error> {
        let path = store.join(LOCK_FILE);
        std::fs::create_dir_all(store).map_err(Error::io("create", store))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(Error::io("open", &path))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(MaintainLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", &path)(e)),
        }
    }
}

/// What one [`maintain`] pass changed.
#[derive(Debug, Default)]
pub struct Done {
    /// Raw requests converted into the columnar store.
    pub converted: usize,
    /// Raw requests that could not be decoded: renamed with [`UNCONVERTIBLE`] beside, kept.
    pub unconvertible: Vec<(PathBuf, FileError)>,
    pub compacted: Vec<PathBuf>,
    pub expired: Vec<PathBuf>,
    pub raw_removed: usize,
}

/// One maintenance pass over `store` at `now` (Unix ns), by the holder of its
/// [`MaintainLock`].
pub fn maintain(
    store: &Path,
    now: i64,
    policy: &Policy,
    _lock: &MaintainLock,
) -> Result<Done, Error> {
    let mut done = Done::default();
    let until = convert_received(store, now, policy, &mut done)?;
    if let Some(until) = until {
        done.compacted = if policy.at_rest {
            // Every hour up to the one `until` falls in.
            columnar::compact(store, until.saturating_add(columnar::schema::HOUR), 0)?
        } else {
            columnar::compact(store, until, policy.grace)?
        };
    }
    if let Some(retention) = policy.retention {
        done.expired = columnar::retain(store, retention, now)?;
        let cutoff = now.saturating_sub(retention.max(0));
        for signal in [Signal::Profiles, Signal::Metrics] {
            done.expired
                .extend(expire_days(&store.join(signal.dir()), cutoff)?);
        }
    }
    if let (Some(keep), Some(until)) = (policy.keep_raw, until) {
        let cutoff = now.saturating_sub(keep.max(0)).min(until);
        done.raw_removed = remove_raw(&store.join(Signal::Profiles.dir()), cutoff)?;
    }
    Ok(done)
}

/// Converts the raw requests received before the last chunk that ended the policy's lag
/// before `now` (at rest: before `now`), chunk after chunk, moving the marker after each;
/// returns the marker.
fn convert_received(
    store: &Path,
    now: i64,
    policy: &Policy,
    done: &mut Done,
) -> Result<Option<i64>, Error> {
    let chunk = policy.chunk.max(1);
    let target = if policy.at_rest {
        now
    } else {
        now.saturating_sub(policy.lag).div_euclid(chunk) * chunk
    };
    let marked = columnar::converted_until(store);
    if marked.is_some_and(|m| m >= target) {
        return Ok(marked);
    }
    let writer = ColumnarWriter::open(store)?;
    remove_uncommitted(store, marked)?;
    let (files, _) = discover(&[store.join(Signal::Profiles.dir())]);
    let mut todo: Vec<(i64, PathBuf)> = files
        .into_iter()
        .filter_map(|path| {
            let at = path.file_name()?.to_str().and_then(received_at)?;
            let fresh = marked.is_none_or(|m| at >= m) && at < target;
            fresh.then_some((at, path))
        })
        .collect();
    todo.sort();
    let mut buf = Vec::new();
    let mut rest = todo.as_slice();
    while let Some((first, _)) = rest.first() {
        // The marker never passes `target`: a request received later must be read raw.
        let end = ((first.div_euclid(chunk) + 1) * chunk).min(target);
        let n = rest.iter().take_while(|(at, _)| *at < end).count();
        let (chunk, after) = rest.split_at(n);
        rest = after;
        for (k, batch) in chunk.chunks(BATCH).enumerate() {
            let mut profiles: Vec<(Vec<KeyValue>, Profile)> = Vec::new();
            for (_, path) in batch {
                match decode_file(path, &mut buf) {
                    Ok((decoded, _)) => {
                        profiles.extend(decoded.into_iter().map(|d| (d.resource, d.profile)));
                        done.converted += 1;
                    }
                    Err(e) => {
                        // Kept, renamed out of the readers' and the keep's way: the receiver
                        // checked it when it arrived, so this is damage to look at.
                        let mut aside = path.clone().into_os_string();
                        aside.push(UNCONVERTIBLE);
                        let aside = PathBuf::from(aside);
                        std::fs::rename(path, &aside).map_err(Error::io("move aside", path))?;
                        done.unconvertible.push((aside, e));
                    }
                }
            }
            let stem = columnar::conversion_stem(end, k);
            writer.write_as(&profiles, now, Some(&stem))?;
        }
        columnar::commit_until(store, end)?;
    }
    columnar::commit_until(store, target)?;
    Ok(Some(target))
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
pub(crate) fn received_at(name: &str) -> Option<i64> {
    name.split('-').next()?.parse().ok()
}

/// Removes the files a conversion wrote past the marker of `store` (a crash before its
/// commit): the next conversion writes them again.
fn remove_uncommitted(store: &Path, marker: Option<i64>) -> Result<(), Error> {
    let root = store.join(columnar::DIR);
    let Ok(partitions) = columnar::read::partitions::list_partitions(&root) else {
        return Ok(());
    };
    for p in partitions {
        let Ok(entries) = std::fs::read_dir(&p.dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !columnar::commit::committed(&name.to_string_lossy(), marker) {
                let path = entry.path();
                std::fs::remove_file(&path).map_err(Error::io("remove", &path))?;
            }
        }
    }
    Ok(())
}

/// Removes the raw profile requests under `dir` received before `cutoff`; returns how many.
/// Empty day directories go too.
fn remove_raw(dir: &Path, cutoff: i64) -> Result<usize, Error> {
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
            let name = file.file_name();
            let name = name.to_string_lossy();
            let request = name.ends_with(".pb") || name.ends_with(".pb.gz");
            let at = received_at(&name).filter(|_| request);
            match at {
                Some(at) if at < cutoff => {
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
