//! A partition's stacks: read from its stacks files, interned once into the dictionary its
//! row groups start from, and kept for the next question in a per-process cache that
//! `serve` fills ahead of the first question ([`warm_stacks`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use parquet::file::reader::FileReader;
use rustc_hash::{FxHashMap, FxHashSet};

use super::columns::{
    guarded, list_offsets, open, read_column, required_i64, row_count, text, MAX_FRAMES,
};
use super::dictionary::DictionaryBuilder;
use super::live::live_files;
use super::partitions::{columnar_root, list_partitions};
use crate::columnar::schema::{stack_col, Frame};
use crate::error::{ColumnarFileError, FileError};

/// The stacks of one stacks file.
pub(crate) fn read_stacks(path: &Path) -> Result<Vec<(i64, Vec<Frame>)>, ColumnarFileError> {
    let reader = open(path)?;
    let mut out = Vec::new();
    for g in 0..reader.num_row_groups() {
        let rg = reader.get_row_group(g)?;
        let rows = row_count(rg.as_ref())?;
        let ids = required_i64(rg.as_ref(), stack_col::STACK_ID, rows)?;
        let functions = read_column!(
            rg.as_ref(),
            stack_col::FUNCTION,
            rows,
            ByteArrayColumnReader
        );
        let files = read_column!(rg.as_ref(), stack_col::FILE, rows, ByteArrayColumnReader);
        let lines = read_column!(rg.as_ref(), stack_col::LINE, rows, Int64ColumnReader);
        let offsets = list_offsets(&functions, rows, stack_col::FUNCTION)?;
        if list_offsets(&files, rows, stack_col::FILE)? != offsets
            || list_offsets(&lines, rows, stack_col::LINE)? != offsets
        {
            return Err(ColumnarFileError::BadLevels(stack_col::FILE.to_owned()));
        }
        for (r, id) in ids.into_iter().enumerate() {
            let (Some(&a), Some(&b)) = (offsets.get(r), offsets.get(r + 1)) else {
                continue;
            };
            if b - a > MAX_FRAMES {
                return Err(ColumnarFileError::TooManyValues);
            }
            let mut frames = Vec::with_capacity(b - a);
            for v in a..b {
                let (Some(f), Some(file), Some(&line)) = (
                    functions.values.get(v),
                    files.values.get(v),
                    lines.values.get(v),
                ) else {
                    continue;
                };
                frames.push(Frame {
                    function: text(f)?.to_owned(),
                    file: text(file)?.to_owned(),
                    line,
                });
            }
            out.push((id, frames));
        }
    }
    Ok(out)
}

/// The stacks of one stacks file; for compaction.
pub(crate) fn read_stacks_file(path: &Path) -> Result<Vec<(i64, Vec<Frame>)>, ColumnarFileError> {
    guarded(|| read_stacks(path))
}

/// The stack ids stored in partition `dir` (files that cannot be read left out).
pub(crate) fn stack_ids_in(dir: &Path) -> FxHashSet<i64> {
    let mut ids = FxHashSet::default();
    let mut ignored = Vec::new();
    for path in live_files(dir, &mut ignored).stacks {
        if let Ok(stacks) = guarded(|| read_stacks(&path)) {
            ids.extend(stacks.into_iter().map(|(id, _)| id));
        }
    }
    ids
}

/// A partition's stacks, read, and interned into the dictionary its row groups start from.
type PartitionStacks = (Arc<FxHashMap<i64, Vec<Frame>>>, Arc<DictionaryBuilder>);

/// The stacks of the partitions read last, by their stacks files (path, length and time of
/// change): a process that answers many questions (`serve`) reads and interns an hour's
/// stacks once, not once per question. Files are never changed in place (compaction writes
/// new ones), so a file's key names its content. Bounded by [`STACKS_CACHED`] partitions,
/// the least recently used dropped.
static STACKS_CACHE: Mutex<Vec<(StacksKey, PartitionStacks)>> = Mutex::new(Vec::new());

/// What names a partition's stacks: each stacks file's path, length and time of change.
type StacksKey = Vec<(PathBuf, u64, std::time::SystemTime)>;

/// Partitions whose stacks [`STACKS_CACHE`] keeps (a day of one service, and more).
const STACKS_CACHED: usize = 48;

/// The stacks of the partition whose stacks files are `files`: from [`STACKS_CACHE`], or
/// read (unreadable files pushed to `failed`, and nothing of them cached).
pub(super) fn partition_stacks(
    files: &[PathBuf],
    failed: &mut Vec<(PathBuf, FileError)>,
) -> PartitionStacks {
    let key: Option<StacksKey> = files
        .iter()
        .map(|path| {
            let m = std::fs::metadata(path).ok()?;
            Some((path.clone(), m.len(), m.modified().ok()?))
        })
        .collect();
    if let (Some(key), Ok(mut cache)) = (&key, STACKS_CACHE.lock()) {
        if let Some(i) = cache.iter().position(|(k, _)| k == key) {
            let hit = cache.remove(i);
            let stacks = hit.1.clone();
            cache.push(hit);
            return stacks;
        }
    }
    let mut stacks: FxHashMap<i64, Vec<Frame>> = FxHashMap::default();
    let mut complete = true;
    for path in files {
        match guarded(|| read_stacks(path)) {
            Ok(found) => {
                for (id, frames) in found {
                    stacks.entry(id).or_insert(frames);
                }
            }
            Err(e) => {
                complete = false;
                failed.push((path.clone(), FileError::Columnar(e)));
            }
        }
    }
    let mut base = DictionaryBuilder::default();
    let mut ids: Vec<i64> = stacks.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        base.stack(id, &stacks);
    }
    // Every stored stack is in `base` now: the frames as read are not needed any more (a
    // row's stack id that is not in `base` has no stored stack, and is the empty stack).
    let read: PartitionStacks = (Arc::new(FxHashMap::default()), Arc::new(base));
    if let (Some(key), true, Ok(mut cache)) = (key, complete, STACKS_CACHE.lock()) {
        if cache.len() >= STACKS_CACHED {
            cache.remove(0);
        }
        cache.push((key, read.clone()));
    }
    read
}

/// Scans of a columnar store in progress in this process ([`Scanning`]).
static SCANS: AtomicUsize = AtomicUsize::new(0);

/// A scan in progress, counted in [`SCANS`] until dropped.
pub(super) struct Scanning;

impl Scanning {
    pub(super) fn start() -> Scanning {
        SCANS.fetch_add(1, Ordering::Relaxed);
        Scanning
    }
}

impl Drop for Scanning {
    fn drop(&mut self) {
        SCANS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads the stacks of the newest partitions of the columnar store under `store` into the
/// cache a process keeps ([`STACKS_CACHE`], as many partitions as it holds), one partition at
/// a time on the calling thread, and none while a question is being answered: `serve` does it
/// once after it starts, so that the first question over recent hours does not pay for their
/// stacks. Returns how many partitions' stacks it read; unreadable files are skipped (the
/// question that needs them reports them).
pub fn warm_stacks(store: &Path) -> usize {
    let Ok(mut partitions) = list_partitions(&columnar_root(store)) else {
        return 0;
    };
    partitions.sort_by_key(|p| std::cmp::Reverse(p.hour));
    let mut read = 0;
    for p in partitions.iter().take(STACKS_CACHED) {
        // The read-ahead never takes the cores from a question being answered.
        while SCANS.load(Ordering::Relaxed) > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut failed = Vec::new();
        let live = live_files(&p.dir, &mut failed);
        if !live.stacks.is_empty() {
            let _ = partition_stacks(&live.stacks, &mut failed);
            read += 1;
        }
    }
    read
}
