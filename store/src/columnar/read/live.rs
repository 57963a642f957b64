//! Which files of a partition count: a compacted file replaces the files its footer names,
//! and a rollup, series, spans or slot rollup answers only while the compacted samples file
//! it was made from is the partition's only one. The name prefixes and footer keys that
//! compaction writes and this reads live here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::file::reader::FileReader;
use rustc_hash::{FxHashMap, FxHashSet};

use super::columns::{guarded, open};
use super::partitions::files_in;
use crate::columnar::schema;
use crate::error::{ColumnarFileError, FileError};

/// The files of a partition that count: a compacted file ([`crate::columnar::compact`]) replaces the
/// files its footer names, which are skipped until compaction deletes them.
pub(crate) struct LiveFiles {
    pub stacks: Vec<PathBuf>,
    pub samples: Vec<PathBuf>,
    /// The rollup of the partition's samples, with the window of its profiles (Unix ns),
    /// when the partition's only samples file is the compacted one it was made from.
    pub rollup: Option<Rollup>,
    /// The series of the partition's samples, on the same condition.
    pub series: Option<PathBuf>,
    /// The spans of the partition's samples (a series that keeps trace links), likewise.
    pub spans: Option<PathBuf>,
    /// The slot rollup of the partition's samples, likewise.
    pub slots: Option<Slots>,
}

/// A partition's rollup: its file, the window of its profiles (Unix ns), and how many
/// profiles each of its profiles adds up (by profile id; [`META_PROFILES`]).
pub(crate) struct Rollup {
    pub path: PathBuf,
    pub start: i64,
    pub end: i64,
    pub stands_for: Arc<FxHashMap<i64, String>>,
}

/// A partition's slot rollup ([`crate::columnar::compact`]): its file and its profiles.
pub(crate) struct Slots {
    pub path: PathBuf,
    pub profiles: Vec<SlotProfile>,
}

/// One profile of a slot rollup: the profiles of one resource and type that start in one
/// slot, added up.
pub(crate) struct SlotProfile {
    pub id: i64,
    pub slot: usize,
    pub start: i64,
    pub end: i64,
    /// How many profiles it adds up, `all with_samples` ([`crate::merge::STANDS_FOR`]).
    pub counts: String,
}

/// Key of a compacted file's footer: the file names it replaces, one a line.
pub(crate) const META_REPLACES: &str = "otelprof.replaces";
/// Key of a rollup's footer: the compacted samples file it adds up.
pub(crate) const META_ROLLUP_OF: &str = "otelprof.rollup_of";
/// Key of a rollup's footer: `start end` of the profiles it adds up (Unix ns).
pub(crate) const META_WINDOW: &str = "otelprof.window";
/// Key of a rollup's footer: how many profiles each of its profiles adds up, `id all
/// with_samples` a line; the reader passes it on to the merger ([`crate::merge::STANDS_FOR`]).
pub(crate) const META_PROFILES: &str = "otelprof.profiles";
/// Key of a rollup's or series' footer: the version of what it keeps
/// ([`crate::columnar::schema::DERIVED_VERSION`]).
pub(crate) const META_DERIVED: &str = "otelprof.derived";

/// Name prefixes of the files compaction writes.
pub(crate) const COMPACTED_SAMPLES: &str = "samples-compacted-";
pub(crate) const COMPACTED_STACKS: &str = "stacks-compacted-";
pub(crate) const ROLLUP: &str = "rollup-";
pub(crate) const SERIES: &str = "series-";
pub(crate) const SPANS: &str = "spans-";
pub(crate) const SLOTS_FILE: &str = "slots-";
/// Key of a slot rollup's footer: each of its profiles, `id slot start end all with_samples`
/// a line (times Unix ns; the counts as [`META_PROFILES`] has them).
pub(crate) const META_SLOTS: &str = "otelprof.slots";

/// The key-value metadata of a Parquet file's footer.
fn footer(path: &Path) -> Result<Vec<(String, String)>, ColumnarFileError> {
    guarded(|| {
        let reader = open(path)?;
        Ok(reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .map(|kv| {
                kv.iter()
                    .map(|k| (k.key.clone(), k.value.clone().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default())
    })
}

fn meta<'a>(kv: &'a [(String, String)], key: &str) -> Option<&'a str> {
    kv.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Whether a rollup's or series' footer says it keeps what this version reads.
fn current(kv: &[(String, String)]) -> bool {
    meta(kv, META_DERIVED) == Some(crate::columnar::schema::DERIVED_VERSION)
}

/// The files of partition `dir` that count; unreadable compacted files and rollups are
/// pushed to `failed` (a compacted file that cannot be read replaces nothing, so the files
/// it was made from still answer).
pub(crate) fn live_files(dir: &Path, failed: &mut Vec<(PathBuf, FileError)>) -> LiveFiles {
    let (stacks, samples) = without_replaced(
        committed(dir, "stacks-"),
        committed(dir, "samples-"),
        failed,
    );
    let mut live = LiveFiles {
        stacks,
        samples,
        rollup: None,
        series: None,
        spans: None,
        slots: None,
    };
    if let [only] = live.samples.as_slice() {
        let only = name_of(only);
        live.series = made_of(dir, SERIES, &only);
        live.spans = made_of(dir, SPANS, &only);
        live.slots = made_of(dir, SLOTS_FILE, &only).and_then(read_slots);
        live.rollup = rollup_of(dir, &only);
    }
    live
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The files of partition `dir` whose names start with `prefix`, but those of a conversion
/// that still waits for its marker ([`crate::columnar::commit`]).
fn committed(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let marker = dir
        .parent()
        .and_then(Path::parent)
        .and_then(crate::columnar::commit::marker_in);
    files_in(dir, prefix)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            crate::columnar::commit::committed(&name, marker)
        })
        .collect()
}

/// `stacks` and `samples` without the files a compacted file among them replaces (its
/// footer names them), nor the compacted files whose footer cannot be read (pushed to
/// `failed`).
fn without_replaced(
    stacks: Vec<PathBuf>,
    samples: Vec<PathBuf>,
    failed: &mut Vec<(PathBuf, FileError)>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut replaced: FxHashSet<std::ffi::OsString> = FxHashSet::default();
    let mut skip: FxHashSet<PathBuf> = FxHashSet::default();
    for path in stacks.iter().chain(&samples) {
        let name = name_of(path);
        if !(name.starts_with(COMPACTED_SAMPLES) || name.starts_with(COMPACTED_STACKS)) {
            continue;
        }
        match footer(path) {
            Ok(kv) => replaced.extend(
                meta(&kv, META_REPLACES)
                    .unwrap_or("")
                    .lines()
                    .filter(|l| !l.is_empty() && *l != name)
                    .map(std::ffi::OsString::from),
            ),
            Err(e) => {
                failed.push((path.clone(), FileError::Columnar(e)));
                skip.insert(path.clone());
            }
        }
    }
    let keep = |files: Vec<PathBuf>| -> Vec<PathBuf> {
        files
            .into_iter()
            .filter(|p| !skip.contains(p) && !replaced.contains(p.file_name().unwrap_or_default()))
            .collect()
    };
    (keep(stacks), keep(samples))
}

/// The newest file of partition `dir` named with `prefix` whose footer says it was made
/// from samples file `only` by this version ([`current`]).
fn made_of(dir: &Path, prefix: &str, only: &str) -> Option<PathBuf> {
    files_in(dir, prefix).into_iter().rev().find(|path| {
        footer(path).is_ok_and(|kv| meta(&kv, META_ROLLUP_OF) == Some(only) && current(&kv))
    })
}

/// The profiles a slot rollup's footer lists ([`META_SLOTS`]); `None` when one is malformed.
fn read_slots(path: PathBuf) -> Option<Slots> {
    let kv = footer(&path).ok()?;
    let profiles = meta(&kv, META_SLOTS)?
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let [id, slot, start, end, all, with] = f.as_slice() else {
                return None;
            };
            Some(SlotProfile {
                id: id.parse().ok()?,
                slot: slot.parse::<usize>().ok().filter(|s| *s < schema::SLOTS)?,
                start: start.parse().ok()?,
                end: end.parse().ok()?,
                counts: format!("{all} {with}"),
            })
        })
        .collect::<Option<Vec<SlotProfile>>>()?;
    Some(Slots { path, profiles })
}

/// The rollup of partition `dir` made from samples file `only` by this version, with the
/// window its footer gives (the last of them, should there be several).
fn rollup_of(dir: &Path, only: &str) -> Option<Rollup> {
    let mut rollup = None;
    for path in files_in(dir, ROLLUP) {
        let Ok(kv) = footer(&path) else { continue };
        if meta(&kv, META_ROLLUP_OF) != Some(only) || !current(&kv) {
            continue;
        }
        let window = meta(&kv, META_WINDOW).and_then(|w| {
            let (a, b) = w.split_once(' ')?;
            Some((a.parse::<i64>().ok()?, b.parse::<i64>().ok()?))
        });
        let stands_for = meta(&kv, META_PROFILES)
            .unwrap_or("")
            .lines()
            .filter_map(|l| {
                let (id, counts) = l.split_once(' ')?;
                Some((id.parse::<i64>().ok()?, counts.to_owned()))
            })
            .collect();
        if let Some((start, end)) = window {
            rollup = Some(Rollup {
                path,
                start,
                end,
                stands_for: Arc::new(stands_for),
            });
        }
    }
    rollup
}
