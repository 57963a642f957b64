//! A reader's local copy of a store in a bucket ([`crate::bucket`]): which of the store's
//! objects a question needs, and keeping the copies of every store under one cache directory
//! within a size.
//!
//! A question narrowed to selections ([`crate::StoreSource::narrow_to`]) reads only the hour
//! partitions they can select in (the engine's own rule,
//! [`crate::columnar::read::partitions::dirs_may_select`]), each with its stacks, rollups
//! and series, and the raw requests received at or after the conversion marker; raw requests
//! before the marker are never read. So a copy fetches those and leaves the rest in the
//! bucket: a partition it did not fetch, or fetched once and whose files have changed since,
//! is one the question does not read.
//!
//! Copies are used in the order of their modification times: each command sets those of the
//! copies it reads to now, and [`trim`] removes the oldest others until the cache is within
//! its size. The copies a command reads are never removed by it; another command running at
//! the same time on the same cache may lose a copy it was about to open (it reports that file
//! as skipped), which is why the copies it read last are the last to go.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::bucket::{Bucket, Mirrored};
use crate::columnar;
use crate::error::Error;
use crate::layout::Signal;
use crate::select::Selector;

/// Which objects of a store a question reads: `selectors` (`None`: every partition), with
/// the store's conversion marker `marker`.
pub fn needed(selectors: Option<&[Selector]>, marker: Option<i64>) -> impl Fn(&str) -> bool + '_ {
    move |key: &str| {
        let parts: Vec<&str> = key.split('/').collect();
        match parts.as_slice() {
            [dir, service, hour, _file] if *dir == columnar::DIR => selectors.is_none_or(|s| {
                columnar::read::partitions::dirs_may_select(s, service, hour).unwrap_or(true)
            }),
            [dir, _day, name] if *dir == Signal::Profiles.dir() => {
                let at = crate::maintain::received_at(name);
                marker.is_none_or(|m| at.is_none_or(|at| at >= m))
            }
            _ => true,
        }
    }
}

/// Copies into `dir` what a question narrowed to `selectors` (`None`: the whole store) reads
/// of the store in `bucket` ([`needed`], [`Bucket::mirror_needed`]).
pub fn mirror_to_read(
    bucket: &Bucket,
    dir: &Path,
    selectors: Option<&[Selector]>,
) -> Result<Mirrored, Error> {
    let marker = OnceLock::new();
    bucket.mirror_needed(dir, &|dir: &Path, key: &str| {
        let marker = *marker.get_or_init(|| columnar::converted_until(dir));
        needed(selectors, marker)(key)
    })
}

/// What [`trim`] did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Trimmed {
    /// Local copies removed, and their bytes.
    pub removed: usize,
    pub removed_bytes: u64,
    /// Bytes the cache holds afterwards.
    pub size: u64,
}

/// Sets the modification times of `files` (copies a command reads) to now: the last to go.
pub fn touch(files: &[PathBuf]) {
    let now = std::time::SystemTime::now();
    for f in files {
        // A copy that cannot be touched is only evicted sooner.
        if let Ok(file) = std::fs::File::options().write(true).open(f) {
            let _ = file.set_modified(now);
        }
    }
}

/// Removes the least recently used copies under the cache directory `base` (every store's
/// copy; receivers' working directories aside) but those in `in_use`, until the cache holds
/// at most `limit` bytes or only copies in use.
pub fn trim(base: &Path, limit: u64, in_use: &HashSet<PathBuf>) -> Result<Trimmed, Error> {
    let mut files = Vec::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                let working = name
                    .to_string_lossy()
                    .contains(crate::bucket::WORK_DIR_MARK);
                if !working && !crate::layout::is_hidden(&name) {
                    stack.push(entry.path());
                }
            } else {
                let used = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                files.push((used, meta.len(), entry.path()));
            }
        }
    }
    let mut done = Trimmed {
        size: files.iter().map(|(_, n, _)| n).sum(),
        ..Trimmed::default()
    };
    files.sort();
    for (_, n, path) in files {
        if done.size <= limit {
            break;
        }
        if in_use.contains(&path) {
            continue;
        }
        std::fs::remove_file(&path).map_err(Error::io("remove", &path))?;
        done.removed += 1;
        done.removed_bytes += n;
        done.size -= n;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_needs_its_hours_and_what_was_not_converted() {
        let hour = |h: &str| crate::time::parse_time(&format!("2025-01-31T{h}:00:00Z"), 0).unwrap();
        let one_hour = Selector {
            from: Some(hour("13")),
            to: Some(hour("14")),
            ..Selector::default()
        };
        let selectors = [one_hour];
        let wanted = needed(Some(&selectors), Some(2000));
        let part = |h: &str| format!("columnar/service=shop/hour=2025-01-31T{h}/samples-x.parquet");
        // The hour, and the one before (a profile starting there reaches into it).
        assert!(wanted(&part("13")) && wanted(&part("12")));
        assert!(!wanted(&part("11")) && !wanted(&part("14")));
        assert!(wanted("columnar/.converted-until"));
        assert!(wanted("profiles/2025-01-31/2000-w1-0.otlp.pb"));
        assert!(!wanted("profiles/2025-01-31/1999-w1-0.otlp.pb"));
        assert!(wanted("metrics/2025-01-31/1999-w1-0.otlp.pb"));
        let everything = needed(None, None);
        assert!(everything(&part("11")) && everything("profiles/2025-01-31/1-w1-0.otlp.pb"));
    }

    #[test]
    fn the_oldest_copies_not_in_use_go_first() {
        let dir = std::env::temp_dir().join(format!("otelprof-trim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = dir.join("s3___b_p-1234");
        let work = dir.join("s3___b_p-1234-maintain-w1");
        for d in [&store, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        let t = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        let files: Vec<PathBuf> = (0..4).map(|i| store.join(format!("f{i}"))).collect();
        for (i, f) in files.iter().enumerate() {
            std::fs::write(f, vec![0u8; 100]).unwrap();
            let file = std::fs::File::options().write(true).open(f).unwrap();
            file.set_modified(t(1000 + i as u64)).unwrap();
        }
        std::fs::write(work.join("big"), vec![0u8; 1000]).unwrap();
        // f0 is the oldest but in use: f1 and f2 go.
        let in_use: HashSet<PathBuf> = [files[0].clone()].into();
        let done = trim(&dir, 200, &in_use).unwrap();
        assert_eq!((done.removed, done.size), (2, 200));
        assert!(files[0].exists() && !files[1].exists() && !files[2].exists());
        assert!(files[3].exists() && work.join("big").exists());
        // Nothing but copies in use left to remove: the cache stays above its limit.
        let in_use: HashSet<PathBuf> = [files[0].clone(), files[3].clone()].into();
        assert_eq!(trim(&dir, 50, &in_use).unwrap().size, 200);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
