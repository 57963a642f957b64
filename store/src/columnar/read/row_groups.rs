//! The row groups a question reads: planned per partition from the statistics of their
//! `time` and `duration` columns, then read one at a time into profiles.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::file::reader::FileReader;
use rustc_hash::FxHashMap;

use super::columns::{guarded, open};
use super::dictionary::DictionaryBuilder;
use super::live::{live_files, LiveFiles};
use super::partitions::Partition;
use super::rows::group_profiles;
use super::stacks::partition_stacks;
use crate::columnar::schema::{self, sample_col as sc, Frame, HOUR};
use crate::error::{ColumnarFileError, FileError};
use crate::reader::Decoded;

/// One row group of one samples file to read, with its partition's stacks.
pub(in crate::columnar) struct Task {
    pub(in crate::columnar) path: PathBuf,
    pub(in crate::columnar) group: usize,
    pub(in crate::columnar) stacks: Arc<FxHashMap<i64, Vec<Frame>>>,
    /// The partition's stacks, functions and strings already interned: each row group
    /// starts from a copy instead of interning every frame again.
    pub(in crate::columnar) base: Arc<DictionaryBuilder>,
    /// For a rollup: how many profiles each of its profiles adds up, by id.
    pub(in crate::columnar) stands_for: Option<Arc<FxHashMap<i64, String>>>,
    /// Whether the samples' trace links are read ([`ColumnarSource::use_rollups`]).
    links: bool,
    /// Profiles that start in these slots are answered by the slot rollup: skipped here.
    pub(in crate::columnar) skip_slots: Option<Arc<[bool; schema::SLOTS]>>,
}

/// One file a partition's question reads, and what of it.
pub(super) struct FilePlan {
    pub(super) path: PathBuf,
    /// For a rollup: how many profiles each of its profiles adds up, by id; a profile that
    /// is not in it is not read (a slot rollup's slots that rows answer).
    pub(super) stands_for: Option<Arc<FxHashMap<i64, String>>>,
    /// Profiles that start in these slots are skipped (a slot rollup answers them).
    pub(super) skip_slots: Option<Arc<[bool; schema::SLOTS]>>,
}

impl FilePlan {
    pub(super) fn rows(path: PathBuf) -> FilePlan {
        FilePlan {
            path,
            stands_for: None,
            skip_slots: None,
        }
    }
}

/// Plans the reading of one partition: reads its stacks (`with_stacks`), and pushes a task
/// per row group of its samples files (or of its rollup, when `rollup_covers` its window) that may hold a
/// profile overlapping `window`; failures are pushed to `failed`.
pub(super) fn plan_partition(
    p: &Partition,
    failed: &mut Vec<(PathBuf, FileError)>,
    pick: impl Fn(LiveFiles) -> Vec<FilePlan>,
    window: (Option<i64>, Option<i64>),
    links: bool,
    with_stacks: bool,
    tasks: &mut Vec<Task>,
) {
    let live = live_files(&p.dir, failed);
    let (stacks, base) = if with_stacks {
        partition_stacks(&live.stacks, failed)
    } else {
        Default::default()
    };
    for plan in pick(live) {
        match guarded(|| groups_in_window(&plan.path, window, plan.skip_slots.as_deref())) {
            Ok(groups) => tasks.extend(groups.into_iter().map(|group| Task {
                path: plan.path.clone(),
                group,
                stacks: stacks.clone(),
                base: base.clone(),
                stands_for: plan.stands_for.clone(),
                links,
                skip_slots: plan.skip_slots.clone(),
            })),
            Err(e) => failed.push((plan.path, FileError::Columnar(e))),
        }
    }
}

/// The row groups of samples file `path` that may hold a profile overlapping `window` (a
/// profile ends before `from` or starts at or after `to` is never selected), by the min and
/// max of their `time` and `duration` columns; a group without statistics is read.
fn groups_in_window(
    path: &Path,
    (from, to): (Option<i64>, Option<i64>),
    skip_slots: Option<&[bool; schema::SLOTS]>,
) -> Result<Vec<usize>, ColumnarFileError> {
    let reader = open(path)?;
    let meta = reader.metadata();
    let mut out = Vec::new();
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let stat = |name: &str| {
            let column = rg
                .columns()
                .iter()
                .find(|c| c.column_path().string() == name)?;
            match column.statistics()? {
                parquet::file::statistics::Statistics::Int64(v) => {
                    Some((*v.min_opt()?, *v.max_opt()?))
                }
                _ => None,
            }
        };
        let keep = match (stat(sc::TIME), stat(sc::DURATION)) {
            (Some((first, last)), Some((_, longest))) => {
                let ends_before = from.is_some_and(|f| last.saturating_add(longest.max(0)) < f);
                let starts_after = to.is_some_and(|t| first >= t);
                // Every profile of the group starts in a slot the slot rollup answers (the
                // group lies within its hour: a partition holds the profiles that start in it).
                let answered = skip_slots.is_some_and(|skip| {
                    last.saturating_sub(first) < HOUR
                        && (schema::slot_of(first)..=schema::slot_of(last))
                            .all(|k| skip.get(k).copied().unwrap_or(false))
                        && schema::slot_of(first) <= schema::slot_of(last)
                });
                !ends_before && !starts_after && !answered
            }
            _ => true,
        };
        if keep {
            out.push(g);
        }
    }
    Ok(out)
}

/// What a worker keeps from one row group for the next: the dictionary it built from its
/// partition's (the strings, functions, locations and stacks of the partition, and those the
/// row group added), when no visitor kept a profile of it. The next row group of the same
/// partition starts from it instead of a copy of the partition's: a copy per row group was
/// memory the kernel zeroed for each (most of a first question's time in `serve`).
#[derive(Default)]
pub(in crate::columnar) struct Reuse(Option<(Arc<DictionaryBuilder>, DictionaryBuilder)>);

impl Reuse {
    /// A dictionary that starts with every entry of `base`: the one kept, when it grew from
    /// `base`, else a copy of it.
    fn builder(&mut self, base: &Arc<DictionaryBuilder>) -> DictionaryBuilder {
        match self.0.take() {
            Some((from, b)) if Arc::ptr_eq(&from, base) => b,
            _ => (**base).clone(),
        }
    }
}

/// Reads one row group and hands its profiles to `visit` one at a time (their dictionary
/// shared, made for this group, from the one `reuse` kept when it can); returns how many.
pub(in crate::columnar) fn read_group(
    task: &Task,
    reuse: &mut Reuse,
    mut visit: impl FnMut(&Decoded),
) -> Result<usize, ColumnarFileError> {
    let reader = open(&task.path)?;
    let rg = reader.get_row_group(task.group)?;
    let mut b = reuse.builder(&task.base);
    let mut pending = group_profiles(rg.as_ref(), &mut b, &task.stacks, task.links)?;
    if let Some(skip) = &task.skip_slots {
        pending.retain(|p| !skip.get(schema::slot_of(p.time)).copied().unwrap_or(false));
    }
    if let Some(counts) = &task.stands_for {
        pending.retain(|p| counts.contains_key(&p.id));
        for p in &mut pending {
            if let Some(n) = counts.get(&p.id) {
                let note = format!("{}{n}", crate::merge::STANDS_FOR);
                p.comments.push(b.intern(&note));
            }
        }
    }
    let dictionary = Arc::new(std::mem::take(&mut b.dictionary));
    let n = pending.len();
    for p in pending {
        visit(&p.into_decoded(&dictionary));
    }
    // Only ever appended to: ids stay those of the profiles visited, for the next group.
    if let Ok(d) = Arc::try_unwrap(dictionary) {
        b.dictionary = d;
        reuse.0 = Some((task.base.clone(), b));
    }
    Ok(n)
}
