//! Reading the columnar store: the partitions a selection can touch, their stacks once, and
//! their samples files as the profiles they came from, handed to the same visitors as the
//! OTLP reader's ([`crate::Source::scan`]), so that every query gives the same answer.
//!
//! Outside input: a Parquet file may be corrupt or hostile. Every file is read within
//! [`MAX_FILE_BYTES`], a row group within [`MAX_ROWS`] rows and [`MAX_VALUES`] values per
//! column, levels are checked against the schema before use, a column of another type is an
//! error, and a panic inside the `parquet` crate on a malformed file is caught and reported as
//! that file's error: one bad file is skipped with its reason and never hides the others.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::KeyValue;
use otel_bridge::model::{
    Dictionary, Function, FunctionId, Label, LabelValue, Line, Lines, Link, Location, LocationId,
    Profile, Sample, StackId, StrId, ValueType,
};
use otel_bridge::FrameKind;
use parquet::column::reader::ColumnReader;
use parquet::data_type::ByteArray;
use parquet::file::reader::{FileReader, RowGroupReader, SerializedFileReader};
use rustc_hash::{FxHashMap, FxHashSet};

use super::schema::{self, sample_col as sc, stack_col, Frame, HOUR};
use crate::error::{ColumnarFileError, Error, FileError};
use crate::parallel;
use crate::reader::{Decoded, Profiles, SkipReporter};
use crate::select::{Op, Selector};

/// The most of one columnar file read, as for OTLP files.
pub const MAX_FILE_BYTES: u64 = crate::reader::MAX_FILE_BYTES;
/// Rows of one row group read at most (an hour's compacted samples of a large fleet fit).
pub const MAX_ROWS: usize = 50_000_000;
/// Values of one column of one row group read at most (lists included).
pub const MAX_VALUES: usize = 200_000_000;
/// Frames of one stack kept at most (the OTLP decoder's limit).
pub const MAX_FRAMES: usize = 16_384;

/// One hour partition of one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub dir: PathBuf,
    pub service: String,
    /// Start of the hour, Unix ns.
    pub hour: i64,
}

/// The partitions of a columnar store, listed once; [`ColumnarSource::scan`] reads those a
/// selection can touch.
pub struct ColumnarSource {
    pub partitions: Vec<Partition>,
    report: SkipReporter,
    reported: Mutex<FxHashSet<PathBuf>>,
    /// The selections whose partitions [`ColumnarSource::scan`] reads (none: all).
    selections: Vec<Selector>,
    /// Whether a compacted hour may be answered from its rollup ([`ColumnarSource::use_rollups`]).
    rollups: bool,
    /// Whether a compacted hour is answered from its series ([`ColumnarSource::use_series`]).
    series: bool,
    /// Whether a compacted hour is answered from its spans ([`ColumnarSource::use_spans`]).
    spans: bool,
    /// Whether a covered hour may be answered from its hourly rollup (not with
    /// [`ColumnarSource::use_slots`]).
    hourly: bool,
    /// Whether samples need their trace links ([`ColumnarSource::use_rollups`]): when not,
    /// the trace and span columns are not read.
    links: bool,
    /// Partitions answered from a rollup or a series, over every scan so far.
    derived_reads: AtomicUsize,
}

impl ColumnarSource {
    /// The partitions under `store` (a store directory or its `columnar/`). Fails when there
    /// are none.
    pub fn open(store: &Path, report: SkipReporter) -> Result<ColumnarSource, Error> {
        let partitions = list_partitions(&columnar_root(store))?;
        if partitions.is_empty() {
            return Err(Error::NothingReadable);
        }
        Ok(ColumnarSource {
            partitions,
            report,
            reported: Mutex::new(FxHashSet::default()),
            selections: Vec::new(),
            rollups: false,
            series: false,
            spans: false,
            links: true,
            hourly: true,
            derived_reads: AtomicUsize::new(0),
        })
    }

    /// How many partitions the scans so far answered from a rollup or a series instead of
    /// their sample rows: what a test or a benchmark checks to know which files answered.
    pub fn derived_reads(&self) -> usize {
        self.derived_reads.load(Ordering::Relaxed)
    }

    /// Whether `store` holds a columnar store.
    pub fn exists(store: &Path) -> bool {
        store.join(super::DIR).is_dir()
    }

    /// Reads from now on only the partitions `selector` can select samples in (by service
    /// name and by hour): a 1 h question reads one or two hours, not the day. A merge's
    /// `profiles_seen` then counts the profiles of the partitions read, not of the store.
    pub fn narrow_to(self, selector: &Selector) -> ColumnarSource {
        self.narrow_to_any(std::slice::from_ref(selector))
    }

    /// [`ColumnarSource::narrow_to`] for a pass that merges several selections at once (the
    /// two sides of a diff): the partitions any of them can select in.
    pub fn narrow_to_any(mut self, selectors: &[Selector]) -> ColumnarSource {
        self.selections = selectors.to_vec();
        self
    }

    /// Whether the selections, or the key `by` groups by, need what neither rollup nor
    /// series keeps: a trace or span, or a per-thread or per-request attribute
    /// ([`super::schema::DROPPED_LABELS`]).
    fn needs_rows(&self, by: Option<&str>) -> bool {
        self.needs_labels(by) || self.selections.iter().any(Selector::names_links)
    }

    /// Whether the selections, or the key `by` groups by, name a label that every derived
    /// file drops ([`super::schema::DROPPED_LABELS`]).
    fn needs_labels(&self, by: Option<&str>) -> bool {
        let dropped = |k: &str| super::schema::DROPPED_LABELS.contains(&k);
        by.is_some_and(dropped)
            || self
                .selections
                .iter()
                .any(|s| s.conditions.iter().any(|c| dropped(&c.key)))
    }

    /// Answers from now on every compacted hour that the selection covers whole from its
    /// rollup ([`super::compact`]) instead of its sample rows, unless `spans` (per-span
    /// statistics need each sample's trace link), or the selection or `by` (the key the
    /// answer groups by) needs the rows ([`ColumnarSource::needs_rows`]).
    /// Call after [`ColumnarSource::narrow_to`]; without a selection no time range is known
    /// and every compacted hour is covered. The merged stacks, groups, type, instances and
    /// window are those of the sample rows; `profiles_used` and `profiles_seen` count a
    /// rollup's profiles, one per resource and type an hour.
    pub fn use_rollups(mut self, spans: bool, by: Option<&str>) -> ColumnarSource {
        self.rollups = !spans && !self.needs_rows(by);
        // Nor do their sample rows need each sample's trace link, unless a selection names a
        // trace or span: the trace and span columns are not read.
        self.links = spans || self.selections.iter().any(Selector::names_links);
        self
    }

    /// Answers from now on the slots of compacted hours that the selections cover whole
    /// from their slot rollups ([`super::compact`]), never whole hours from their hourly
    /// rollups: for merges cut in slices of a slot or more, whose profiles must fall in their
    /// own slices (a diff's noise estimate of a 1 h side). Otherwise as
    /// [`ColumnarSource::use_rollups`] without spans, grouped by `by`.
    pub fn use_slots(self, by: Option<&str>) -> ColumnarSource {
        let mut s = self.use_rollups(false, by);
        s.hourly = false;
        s
    }

    /// Answers from now on every compacted hour from its series ([`super::compact`]): each
    /// profile with its resource, type, times and sample attributes, but without stacks
    /// (only a thread role's), trace links, or timestamps finer than
    /// [`super::schema::SERIES_TICK`]. For answers that need none of those: a timeline, the
    /// values present, the instances. Not when the selection or `by` needs the rows
    /// ([`ColumnarSource::needs_rows`]).
    pub fn use_series(mut self, by: Option<&str>) -> ColumnarSource {
        self.series = !self.needs_rows(by);
        self
    }

    /// Answers from now on every compacted hour from its spans ([`super::compact`]): the
    /// series with each linked sample's trace link kept (its timestamps only the first and
    /// the last). For per-span statistics without stacks: the list of traces, with any
    /// trace or span condition. A time cut inside a span's own first and last sample is
    /// shared out between them. Not when the selection or `by` names a label that derived
    /// files drop.
    pub fn use_spans(mut self, by: Option<&str>) -> ColumnarSource {
        self.spans = !self.needs_labels(by);
        self
    }

    /// Whether a rollup whose profiles span `[start, end]` answers every current selection
    /// as the sample rows would: for each, every profile of the hour lies inside its time
    /// range (no sample is cut by time; the rollup has no timestamps) or none can reach it
    /// (ends by `from`, or starts at or after `to`: [`Selector::profile_verdict`]).
    fn rollup_covers(&self, start: i64, end: i64) -> bool {
        self.rollups
            && self.selections.iter().all(|s| {
                let inside =
                    s.from.is_none_or(|from| from <= start) && s.to.is_none_or(|to| end <= to);
                let outside = s
                    .from
                    .is_some_and(|from| end < from || (end == from && end > start))
                    || s.to.is_some_and(|to| start >= to);
                inside || outside
            })
    }

    /// What answers a compacted hour that its hourly rollup does not cover: its slot
    /// rollup for the slots whose every profile the selections cover whole (or leave
    /// whole: [`ColumnarSource::rollup_covers`]), its sample rows for the others (and their
    /// profiles only).
    fn plan_slots(&self, slots: Slots, samples: Vec<PathBuf>) -> Vec<FilePlan> {
        let mut covered = [true; schema::SLOTS];
        for p in &slots.profiles {
            if !self.rollup_covers(p.start, p.end) {
                if let Some(c) = covered.get_mut(p.slot) {
                    *c = false;
                }
            }
        }
        let counts: FxHashMap<i64, String> = slots
            .profiles
            .iter()
            .filter(|p| covered.get(p.slot).copied().unwrap_or(false))
            .map(|p| (p.id, p.counts.clone()))
            .collect();
        if counts.is_empty() {
            return samples.into_iter().map(FilePlan::rows).collect();
        }
        self.derived_reads.fetch_add(1, Ordering::Relaxed);
        let skip = Arc::new(covered);
        let mut plans = vec![FilePlan {
            path: slots.path,
            stands_for: Some(Arc::new(counts)),
            skip_slots: None,
        }];
        plans.extend(samples.into_iter().map(|path| FilePlan {
            path,
            stands_for: None,
            skip_slots: Some(skip.clone()),
        }));
        plans
    }

    /// The partitions the current selection can touch.
    pub fn selected(&self) -> Vec<&Partition> {
        self.partitions
            .iter()
            .filter(|p| {
                self.selections.is_empty() || self.selections.iter().any(|s| may_select(s, p))
            })
            .collect()
    }

    /// Reads the selected partitions on all cores and hands each stored profile to `visit`
    /// with the worker's own state (made by `init`); returns the states, to be combined by the
    /// caller ([`crate::Source::scan`]'s contract).
    ///
    /// Two passes, both on all cores: the partitions' stacks and the row groups of their
    /// samples files that can hold a profile of the time window (their `time` and `duration`
    /// statistics), then those row groups, each read and visited a profile at a time. A 1 h
    /// question on one hour partition is thus spread over every core, and memory holds the
    /// columns of one row group per core, not the hour.
    pub fn scan<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded) + Sync,
    ) -> Result<Vec<S>, Error> {
        self.scan_partitions(self.selected(), init, visit)
    }

    /// The hours (Unix ns) of the selected partitions, oldest first.
    pub fn hours(&self) -> Vec<i64> {
        let mut hours: Vec<i64> = self.selected().iter().map(|p| p.hour).collect();
        hours.dedup();
        hours
    }

    fn scan_partitions<S: Send>(
        &self,
        partitions: Vec<&Partition>,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded) + Sync,
    ) -> Result<Vec<S>, Error> {
        let empty = partitions.is_empty();
        let (tasks, failures) = self.plan(partitions, true);
        self.run(&tasks, failures, empty, init, |state, reuse, task| {
            read_group(task, reuse, |d| visit(state, d))
        })
    }

    /// The row groups `partitions` answer from, read on all cores ([`ColumnarSource::scan`]'s
    /// first pass), and the files that failed; without `stacks`, no stacks file is read (every
    /// sample's stack is empty).
    pub(super) fn plan(
        &self,
        partitions: Vec<&Partition>,
        stacks: bool,
    ) -> (Vec<Task>, Vec<(PathBuf, FileError)>) {
        // The union of the selections' time ranges (unbounded without a selection).
        let mut window = (None, None);
        if let Some(first) = self.selections.first() {
            window = (first.from, first.to);
            for s in &self.selections {
                window.0 = window.0.zip(s.from).map(|(a, b)| a.min(b));
                window.1 = window.1.zip(s.to).map(|(a, b)| a.max(b));
            }
        }
        let planned = parallel::for_each(
            &partitions,
            || (Vec::new(), Vec::new()),
            |(tasks, failed), p| {
                let pick = |live: LiveFiles| match live {
                    LiveFiles {
                        series: Some(series),
                        ..
                    } if self.series => {
                        self.derived_reads.fetch_add(1, Ordering::Relaxed);
                        vec![FilePlan::rows(series)]
                    }
                    LiveFiles {
                        spans: Some(spans), ..
                    } if self.spans => {
                        self.derived_reads.fetch_add(1, Ordering::Relaxed);
                        vec![FilePlan::rows(spans)]
                    }
                    LiveFiles {
                        rollup: Some(r), ..
                    } if self.hourly && self.rollup_covers(r.start, r.end) => {
                        self.derived_reads.fetch_add(1, Ordering::Relaxed);
                        vec![FilePlan {
                            path: r.path,
                            stands_for: Some(r.stands_for),
                            skip_slots: None,
                        }]
                    }
                    LiveFiles {
                        slots: Some(slots),
                        samples,
                        ..
                    } if self.rollups => self.plan_slots(slots, samples),
                    _ => live.samples.into_iter().map(FilePlan::rows).collect(),
                };
                plan_partition(p, failed, pick, window, self.links, stacks, tasks);
            },
        );
        let mut failures = Vec::new();
        let mut tasks = Vec::new();
        for (t, f) in planned {
            tasks.extend(t);
            failures.extend(f);
        }
        (tasks, failures)
    }

    /// Runs `read` on every task on all cores, each worker with its own state (made by
    /// `init`); reports the failed files (`failures` too) once each. Fails when nothing was
    /// there to read (`empty`: no partition).
    pub(super) fn run<S: Send>(
        &self,
        tasks: &[Task],
        mut failures: Vec<(PathBuf, FileError)>,
        empty: bool,
        init: impl Fn() -> S + Sync,
        read: impl Fn(&mut S, &mut Reuse, &Task) -> Result<usize, ColumnarFileError> + Sync,
    ) -> Result<Vec<S>, Error> {
        let _scanning = Scanning::start();
        let workers = parallel::for_each(
            tasks,
            || (init(), Vec::new(), 0usize, Reuse::default()),
            |(state, failed, profiles, reuse), task: &Task| match guarded(|| {
                read(state, reuse, task)
            }) {
                Ok(n) => *profiles += n,
                Err(e) => failed.push((task.path.clone(), FileError::Columnar(e))),
            },
        );
        let mut profiles = 0;
        let states: Vec<S> = workers
            .into_iter()
            .map(|(state, failed, n, _)| {
                failures.extend(failed);
                profiles += n;
                state
            })
            .collect();
        failures.sort_by(|a, b| a.0.cmp(&b.0));
        failures.dedup_by(|a, b| a.0 == b.0);
        if let Ok(mut reported) = self.reported.lock() {
            for (path, err) in &failures {
                if reported.insert(path.clone()) {
                    (self.report)(path, err);
                }
            }
        }
        if profiles == 0 && empty {
            return Err(Error::NothingReadable);
        }
        Ok(states)
    }
}

impl Profiles for ColumnarSource {
    fn scan<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded) + Sync,
    ) -> Result<Vec<S>, Error> {
        ColumnarSource::scan(self, init, visit)
    }
}

/// Whether partition `p` can hold samples `s` selects: its service is not excluded by a
/// `service.name` condition, and its hour (or the profiles starting in the hour before, which
/// may reach into it) meets the time window.
fn may_select(s: &Selector, p: &Partition) -> bool {
    for c in s.conditions.iter().filter(|c| c.key == "service.name") {
        let same = c.value == p.service;
        if (c.op == Op::Eq) != same {
            return false;
        }
    }
    // A profile lasts at most an hour in practice (the agent's period is 60 s): one hour of
    // slack before `from`.
    let starts_too_late = s.to.is_some_and(|to| p.hour >= to);
    let ends_too_early = s
        .from
        .is_some_and(|from| p.hour.saturating_add(2 * HOUR) <= from);
    !starts_too_late && !ends_too_early
}

/// The columnar store of `store`: its `columnar/` directory, or `store` itself when it has
/// none (it may be the `columnar/` directory already).
fn columnar_root(store: &Path) -> PathBuf {
    let dir = store.join(super::DIR);
    if dir.is_dir() {
        dir
    } else {
        store.to_path_buf()
    }
}

/// The hour partitions under the columnar store's `root`, by hour then service.
pub(crate) fn list_partitions(root: &Path) -> Result<Vec<Partition>, Error> {
    let mut out = Vec::new();
    for service in std::fs::read_dir(root).map_err(Error::io("list", root))? {
        let service = service.map_err(Error::io("list", root))?;
        let name = service.file_name();
        let Some(service_name) = name.to_str().and_then(schema::service_of_dir) else {
            continue;
        };
        let Ok(hours) = std::fs::read_dir(service.path()) else {
            continue;
        };
        for hour in hours.flatten() {
            let name = hour.file_name();
            let Some(start) = name.to_str().and_then(schema::hour_of_dir) else {
                continue;
            };
            if hour.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(Partition {
                    dir: hour.path(),
                    service: service_name.clone(),
                    hour: start,
                });
            }
        }
    }
    out.sort_by(|a, b| (a.hour, &a.service).cmp(&(b.hour, &b.service)));
    Ok(out)
}

/// Files of a partition whose names start with `prefix`, sorted (by arrival).
pub(crate) fn files_in(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(prefix) && name.ends_with(".parquet")
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    files
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

/// The files of a partition that count: a compacted file ([`super::compact`]) replaces the
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
/// A partition's slot rollup ([`super::compact`]): its file and its profiles.
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

pub(crate) struct Rollup {
    pub path: PathBuf,
    pub start: i64,
    pub end: i64,
    pub stands_for: Arc<FxHashMap<i64, String>>,
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
/// ([`super::schema::DERIVED_VERSION`]).
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
    meta(kv, META_DERIVED) == Some(super::schema::DERIVED_VERSION)
}

/// The files of partition `dir` that count; unreadable compacted files and rollups are
/// pushed to `failed` (a compacted file that cannot be read replaces nothing, so the files
/// it was made from still answer).
pub(crate) fn live_files(dir: &Path, failed: &mut Vec<(PathBuf, FileError)>) -> LiveFiles {
    let mut replaced: FxHashSet<std::ffi::OsString> = FxHashSet::default();
    let mut skip: FxHashSet<PathBuf> = FxHashSet::default();
    // A conversion's files wait for the marker ([`super::commit`]).
    let marker = dir
        .parent()
        .and_then(Path::parent)
        .and_then(super::commit::marker_in);
    let counts = |files: Vec<PathBuf>| -> Vec<PathBuf> {
        files
            .into_iter()
            .filter(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                super::commit::committed(&name, marker)
            })
            .collect()
    };
    let stacks = counts(files_in(dir, "stacks-"));
    let samples = counts(files_in(dir, "samples-"));
    let name_of = |p: &Path| {
        p.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
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
    let stacks = keep(stacks);
    let samples = keep(samples);
    let mut rollup = None;
    let (mut series, mut spans, mut slots) = (None, None, None);
    if let [only] = samples.as_slice() {
        let only = name_of(only);
        let made_of_only = |prefix| {
            files_in(dir, prefix).into_iter().rev().find(|path| {
                footer(path).is_ok_and(|kv| {
                    meta(&kv, META_ROLLUP_OF) == Some(only.as_str()) && current(&kv)
                })
            })
        };
        series = made_of_only(SERIES);
        spans = made_of_only(SPANS);
        slots = made_of_only(SLOTS_FILE).and_then(|path| {
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
        });
        for path in files_in(dir, ROLLUP) {
            let Ok(kv) = footer(&path) else { continue };
            if meta(&kv, META_ROLLUP_OF) != Some(only.as_str()) || !current(&kv) {
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
    }
    LiveFiles {
        stacks,
        samples,
        rollup,
        series,
        spans,
        slots,
    }
}

/// One row group of one samples file to read, with its partition's stacks.
pub(super) struct Task {
    pub(super) path: PathBuf,
    pub(super) group: usize,
    pub(super) stacks: Arc<FxHashMap<i64, Vec<Frame>>>,
    /// The partition's stacks, functions and strings already interned: each row group
    /// starts from a copy instead of interning every frame again.
    pub(super) base: Arc<DictionaryBuilder>,
    /// For a rollup: how many profiles each of its profiles adds up, by id.
    pub(super) stands_for: Option<Arc<FxHashMap<i64, String>>>,
    /// Whether the samples' trace links are read ([`ColumnarSource::use_rollups`]).
    links: bool,
    /// Profiles that start in these slots are answered by the slot rollup: skipped here.
    pub(super) skip_slots: Option<Arc<[bool; schema::SLOTS]>>,
}

/// One file a partition's question reads, and what of it.
struct FilePlan {
    path: PathBuf,
    /// For a rollup: how many profiles each of its profiles adds up, by id; a profile that
    /// is not in it is not read (a slot rollup's slots that rows answer).
    stands_for: Option<Arc<FxHashMap<i64, String>>>,
    /// Profiles that start in these slots are skipped (a slot rollup answers them).
    skip_slots: Option<Arc<[bool; schema::SLOTS]>>,
}

impl FilePlan {
    fn rows(path: PathBuf) -> FilePlan {
        FilePlan {
            path,
            stands_for: None,
            skip_slots: None,
        }
    }
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
fn partition_stacks(files: &[PathBuf], failed: &mut Vec<(PathBuf, FileError)>) -> PartitionStacks {
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
struct Scanning;

impl Scanning {
    fn start() -> Scanning {
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

/// Plans the reading of one partition: reads its stacks (`with_stacks`), and pushes a task
/// per row group of its samples files (or of its rollup, when `rollup_covers` its window) that may hold a
/// profile overlapping `window`; failures are pushed to `failed`.
fn plan_partition(
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
pub(super) struct Reuse(Option<(Arc<DictionaryBuilder>, DictionaryBuilder)>);

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
pub(super) fn read_group(
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

/// A partition's live files, its stacks and its profiles from the sample rows.
pub(crate) type Detailed = (LiveFiles, FxHashMap<i64, Vec<Frame>>, Vec<Decoded>);

/// Reads the stacks and the sample rows (never the rollup) of partition `dir` as the
/// profiles they store, for compaction; fails on the first file that cannot be read, so that
/// compaction never drops what it could not read.
pub(crate) fn read_detailed(dir: &Path) -> Result<Detailed, (PathBuf, ColumnarFileError)> {
    let mut failed = Vec::new();
    let live = live_files(dir, &mut failed);
    if let Some((path, FileError::Columnar(e))) = failed.pop() {
        return Err((path, e));
    }
    let mut stacks: FxHashMap<i64, Vec<Frame>> = FxHashMap::default();
    for path in &live.stacks {
        for (id, frames) in guarded(|| read_stacks(path)).map_err(|e| (path.clone(), e))? {
            stacks.entry(id).or_insert(frames);
        }
    }
    let mut profiles = Vec::new();
    for path in &live.samples {
        profiles.extend(guarded(|| read_samples(path, &stacks)).map_err(|e| (path.clone(), e))?);
    }
    Ok((live, stacks, profiles))
}

/// Runs a file's decoding, turning a panic of the `parquet` crate on malformed input into
/// that file's error (the release profile unwinds; see the workspace `Cargo.toml`).
fn guarded<T>(read: impl FnOnce() -> Result<T, ColumnarFileError>) -> Result<T, ColumnarFileError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
        .unwrap_or(Err(ColumnarFileError::Malformed))
}

pub(super) fn open(path: &Path) -> Result<SerializedFileReader<File>, ColumnarFileError> {
    let file = File::open(path).map_err(ColumnarFileError::Read)?;
    let meta = file.metadata().map_err(ColumnarFileError::Read)?;
    if !meta.is_file() {
        return Err(ColumnarFileError::NotAFile);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ColumnarFileError::TooLarge);
    }
    Ok(SerializedFileReader::new(file)?)
}

/// One leaf column of a row group: values, and definition and repetition levels.
pub(super) struct Column<T> {
    pub(super) values: Vec<T>,
    def: Vec<i16>,
    rep: Vec<i16>,
}

/// Index of the leaf column at `path` in a row group.
fn column_index(rg: &dyn RowGroupReader, path: &str) -> Result<usize, ColumnarFileError> {
    rg.metadata()
        .columns()
        .iter()
        .position(|c| c.column_path().string() == path)
        .ok_or_else(|| ColumnarFileError::MissingColumn(path.to_owned()))
}

/// Reads `rows` records of one column in batches, within [`MAX_VALUES`].
macro_rules! read_column {
    ($rg:expr, $path:expr, $rows:expr, $variant:ident) => {{
        let i = column_index($rg, $path)?;
        let ColumnReader::$variant(mut reader) = $rg.get_column_reader(i)? else {
            return Err(ColumnarFileError::ColumnType($path.to_owned()));
        };
        let mut col = Column {
            values: Vec::new(),
            def: Vec::new(),
            rep: Vec::new(),
        };
        let mut read = 0;
        while read < $rows {
            let batch = ($rows - read).min(65_536);
            let (records, _, _) = reader.read_records(
                batch,
                Some(&mut col.def),
                Some(&mut col.rep),
                &mut col.values,
            )?;
            if records == 0 {
                return Err(ColumnarFileError::ShortColumn($path.to_owned()));
            }
            read += records;
            if col.values.len() > MAX_VALUES || col.def.len() > MAX_VALUES {
                return Err(ColumnarFileError::TooManyValues);
            }
        }
        col
    }};
}

/// The `i64` column at `path`, required: one value a row.
fn required_i64(
    rg: &dyn RowGroupReader,
    path: &str,
    rows: usize,
) -> Result<Vec<i64>, ColumnarFileError> {
    let col = read_column!(rg, path, rows, Int64ColumnReader);
    if col.values.len() != rows {
        return Err(ColumnarFileError::ShortColumn(path.to_owned()));
    }
    Ok(col.values)
}

/// An optional top-level column: per row, the index of its value or `None`.
fn optional_text(
    rg: &dyn RowGroupReader,
    path: &str,
    rows: usize,
) -> Result<(Vec<ByteArray>, Vec<Option<usize>>), ColumnarFileError> {
    let col = read_column!(rg, path, rows, ByteArrayColumnReader);
    let index = optional_index(&col.def, col.values.len(), rows, path)?;
    Ok((col.values, index))
}

/// An optional top-level `i64` column: per row, the index of its value or `None`.
fn optional_i64(
    rg: &dyn RowGroupReader,
    path: &str,
    rows: usize,
) -> Result<(Vec<i64>, Vec<Option<usize>>), ColumnarFileError> {
    let col = read_column!(rg, path, rows, Int64ColumnReader);
    let index = optional_index(&col.def, col.values.len(), rows, path)?;
    Ok((col.values, index))
}

fn optional_index(
    def: &[i16],
    values: usize,
    rows: usize,
    path: &str,
) -> Result<Vec<Option<usize>>, ColumnarFileError> {
    if def.len() != rows {
        return Err(ColumnarFileError::ShortColumn(path.to_owned()));
    }
    let mut next = 0;
    let mut out = Vec::with_capacity(rows);
    for &d in def {
        if d == 1 {
            out.push(Some(next));
            next += 1;
        } else {
            out.push(None);
        }
    }
    if next != values {
        return Err(ColumnarFileError::ShortColumn(path.to_owned()));
    }
    Ok(out)
}

/// The rows of a list (or map) column as ranges of its values: `offsets[r]..offsets[r + 1]`.
fn list_offsets<T>(
    col: &Column<T>,
    rows: usize,
    path: &str,
) -> Result<Vec<usize>, ColumnarFileError> {
    if col.def.len() != col.rep.len() {
        return Err(ColumnarFileError::BadLevels(path.to_owned()));
    }
    let mut offsets = Vec::with_capacity(rows + 1);
    let mut values = 0;
    for (&d, &r) in col.def.iter().zip(&col.rep) {
        if r == 0 {
            offsets.push(values);
        }
        if d == 1 {
            values += 1;
        } else if d != 0 || r != 0 {
            return Err(ColumnarFileError::BadLevels(path.to_owned()));
        }
    }
    offsets.push(values);
    if offsets.len() != rows + 1 || values != col.values.len() {
        return Err(ColumnarFileError::BadLevels(path.to_owned()));
    }
    Ok(offsets)
}

fn text(b: &ByteArray) -> Result<&str, ColumnarFileError> {
    b.as_utf8().map_err(|_| ColumnarFileError::NotUtf8)
}

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

fn row_count(rg: &dyn RowGroupReader) -> Result<usize, ColumnarFileError> {
    let rows = usize::try_from(rg.metadata().num_rows()).unwrap_or(usize::MAX);
    if rows > MAX_ROWS {
        return Err(ColumnarFileError::TooManyValues);
    }
    Ok(rows)
}

/// The tables of the profiles of one samples file, shared by them (as an OTLP request's).
#[derive(Clone, Default)]
pub(super) struct DictionaryBuilder {
    pub(super) dictionary: Dictionary,
    strings: FxHashMap<String, StrId>,
    functions: FxHashMap<(StrId, StrId), FunctionId>,
    locations: FxHashMap<(FunctionId, i64), LocationId>,
    stacks: FxHashMap<i64, StackId>,
    frames: Vec<LocationId>,
}

impl DictionaryBuilder {
    pub(super) fn intern(&mut self, s: &str) -> StrId {
        if s.is_empty() {
            return StrId(0);
        }
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = StrId(u32::try_from(self.dictionary.strings.len()).unwrap_or(u32::MAX));
        self.dictionary.strings.push(s.to_owned());
        self.strings.insert(s.to_owned(), id);
        id
    }

    pub(super) fn stack(&mut self, id: i64, stacks: &FxHashMap<i64, Vec<Frame>>) -> StackId {
        if let Some(&s) = self.stacks.get(&id) {
            return s;
        }
        // A stack id without a stored stack (a stacks file skipped as unreadable) becomes
        // the empty stack; its samples still count.
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        for f in stacks.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
            let name = self.intern(&f.function);
            let file = self.intern(&f.file);
            let next =
                FunctionId(u32::try_from(self.dictionary.functions.len()).unwrap_or(u32::MAX));
            let function = *self.functions.entry((name, file)).or_insert_with(|| {
                self.dictionary.functions.push(Function {
                    name,
                    system_name: name,
                    filename: file,
                    start_line: 0,
                });
                next
            });
            let next =
                LocationId(u32::try_from(self.dictionary.locations.len()).unwrap_or(u32::MAX));
            let location = *self.locations.entry((function, f.line)).or_insert_with(|| {
                self.dictionary.locations.push(Location {
                    lines: Lines::from_vec(vec![Line {
                        function,
                        line: f.line,
                    }]),
                    kind: FrameKind::Jvm,
                    address: 0,
                });
                next
            });
            frames.push(location);
        }
        let s = self.dictionary.stacks.push(&frames);
        self.frames = frames;
        self.stacks.insert(id, s);
        s
    }
}

/// `type/unit` pairs, comma-separated, percent-encoded ([`super::write`]).
fn parse_types(text: &str, b: &mut DictionaryBuilder) -> Vec<ValueType> {
    let dec = |s: &str| {
        s.replace("%2F", "/")
            .replace("%2C", ",")
            .replace("%25", "%")
    };
    text.split(schema::TYPE_SEPARATOR)
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (ty, unit) = t.split_once('/').unwrap_or((t, ""));
            ValueType {
                ty: b.intern(&dec(ty)),
                unit: b.intern(&dec(unit)),
            }
        })
        .collect()
}

/// The stacks of one stacks file; for compaction.
pub(crate) fn read_stacks_file(path: &Path) -> Result<Vec<(i64, Vec<Frame>)>, ColumnarFileError> {
    guarded(|| read_stacks(path))
}

/// The profiles of one samples file (or rollup), with their resources; for compaction.
pub(crate) fn read_samples_file(
    path: &Path,
    stacks: &FxHashMap<i64, Vec<Frame>>,
) -> Result<Vec<Decoded>, ColumnarFileError> {
    guarded(|| read_samples(path, stacks))
}

/// A profile being rebuilt from its rows: its header, resource and samples (dictionary ids).
pub(super) struct Pending {
    pub(super) id: i64,
    pub(super) resource: Vec<KeyValue>,
    pub(super) sample_types: Vec<ValueType>,
    pub(super) period_type: ValueType,
    pub(super) period: i64,
    pub(super) time: i64,
    pub(super) duration: i64,
    pub(super) samples: Vec<Sample>,
    pub(super) comments: Vec<StrId>,
}

impl Pending {
    pub(super) fn into_decoded(self, dictionary: &Arc<Dictionary>) -> Decoded {
        Decoded {
            resource: self.resource,
            profile: Profile {
                dictionary: dictionary.clone(),
                sample_types: self.sample_types,
                period_type: self.period_type,
                period: self.period,
                time_nanos: self.time,
                duration_nanos: self.duration,
                samples: self.samples,
                comments: self.comments,
            },
        }
    }
}

/// The profiles of one samples file, with their resources, one dictionary for all.
fn read_samples(
    path: &Path,
    stacks: &FxHashMap<i64, Vec<Frame>>,
) -> Result<Vec<Decoded>, ColumnarFileError> {
    let reader = open(path)?;
    let mut b = DictionaryBuilder::default();
    let mut pending: Vec<Pending> = Vec::new();
    for g in 0..reader.num_row_groups() {
        let rg = reader.get_row_group(g)?;
        let mut more = group_profiles(rg.as_ref(), &mut b, stacks, true)?;
        // A profile is written within one row group; rows of one id in two groups (a file
        // written elsewhere) still make one profile.
        if let (Some(last), Some(first)) = (pending.last_mut(), more.first_mut()) {
            if last.id == first.id {
                last.samples.append(&mut first.samples);
                more.remove(0);
            }
        }
        pending.extend(more);
    }
    let dictionary = Arc::new(b.dictionary);
    Ok(pending
        .into_iter()
        .map(|p| p.into_decoded(&dictionary))
        .collect())
}

/// Reads, of the column at `path`, the first record of each run of `runs` rows and skips
/// the others: the columns that repeat a profile's header on each of its rows.
macro_rules! read_runs {
    ($rg:expr, $path:expr, $runs:expr, $variant:ident) => {{
        let i = column_index($rg, $path)?;
        let ColumnReader::$variant(mut reader) = $rg.get_column_reader(i)? else {
            return Err(ColumnarFileError::ColumnType($path.to_owned()));
        };
        let mut col = Column {
            values: Vec::new(),
            def: Vec::new(),
            rep: Vec::new(),
        };
        for &run in $runs {
            let (records, _, _) =
                reader.read_records(1, Some(&mut col.def), Some(&mut col.rep), &mut col.values)?;
            if records != 1 || (run > 1 && reader.skip_records(run - 1)? != run - 1) {
                return Err(ColumnarFileError::ShortColumn($path.to_owned()));
            }
            if col.values.len() > MAX_VALUES || col.def.len() > MAX_VALUES {
                return Err(ColumnarFileError::TooManyValues);
            }
        }
        col
    }};
}

/// The value of each profile of a required column: [`read_runs`], checked to hold one value a
/// run.
macro_rules! required_runs {
    ($rg:expr, $path:expr, $runs:expr, $variant:ident) => {{
        let col = read_runs!($rg, $path, $runs, $variant);
        if col.values.len() != $runs.len() {
            return Err(ColumnarFileError::ShortColumn($path.to_owned()));
        }
        col.values
    }};
}

/// Interns the strings of a row group's columns: a value read from a column's dictionary
/// page shares that page's bytes with every other row holding it, so its address and length
/// find its id without hashing or checking the text again (a column written without a
/// dictionary misses and is interned by text, with the same result).
#[derive(Default)]
pub(super) struct Interned(FxHashMap<(usize, usize), StrId>);

impl Interned {
    pub(super) fn get(
        &mut self,
        bytes: &ByteArray,
        b: &mut DictionaryBuilder,
    ) -> Result<StrId, ColumnarFileError> {
        let data = bytes.data();
        let key = (data.as_ptr() as usize, data.len());
        if let Some(&id) = self.0.get(&key) {
            return Ok(id);
        }
        let id = b.intern(text(bytes)?);
        self.0.insert(key, id);
        Ok(id)
    }
}

/// The trace links of a row group's rows: per row, the index of its link's values or `None`.
enum Links {
    /// Not asked for.
    NotRead,
    /// Hex text ([`schema::SAMPLES`]).
    Text {
        trace: Vec<ByteArray>,
        trace_at: Vec<Option<usize>>,
        span: Vec<ByteArray>,
        span_at: Vec<Option<usize>>,
    },
    /// Integers ([`schema::SPANS`]).
    Bits {
        hi: Vec<i64>,
        lo: Vec<i64>,
        span: Vec<i64>,
        at: Vec<Option<usize>>,
    },
}

/// The columns of one row group, read: a profile's header columns once per profile (a run
/// of rows with its id), the others once per row.
pub(super) struct GroupColumns {
    pub(super) rows: usize,
    profile: Vec<i64>,
    /// Rows of each profile, in order.
    pub(super) runs: Vec<usize>,
    time: Vec<i64>,
    duration: Vec<i64>,
    period: Vec<i64>,
    sample_types: Vec<ByteArray>,
    period_type: Vec<ByteArray>,
    rkeys: Column<ByteArray>,
    rvals: Column<ByteArray>,
    resource_at: Vec<usize>,
    pub(super) values: Column<i64>,
    values_at: Vec<usize>,
    pub(super) akeys: Column<ByteArray>,
    pub(super) avals: Column<ByteArray>,
    attrs_at: Vec<usize>,
    links: Links,
    pub(super) stack: Vec<i64>,
    pub(super) ts: Column<i64>,
    ts_at: Vec<usize>,
}

impl GroupColumns {
    /// Reads row group `rg`; without `links` (a question that needs none), the trace and span
    /// columns are not even read.
    pub(super) fn read(
        rg: &dyn RowGroupReader,
        links: bool,
    ) -> Result<GroupColumns, ColumnarFileError> {
        let rows = row_count(rg)?;
        let profile = required_i64(rg, sc::PROFILE, rows)?;
        // Runs of rows of one profile: its header is read once.
        let mut runs: Vec<usize> = Vec::new();
        for (r, id) in profile.iter().enumerate() {
            if r == 0 || profile.get(r - 1) != Some(id) {
                runs.push(0);
            }
            if let Some(n) = runs.last_mut() {
                *n += 1;
            }
        }
        let n = runs.len();
        let time = required_runs!(rg, sc::TIME, &runs, Int64ColumnReader);
        let duration = required_runs!(rg, sc::DURATION, &runs, Int64ColumnReader);
        let period = required_runs!(rg, sc::PERIOD, &runs, Int64ColumnReader);
        let sample_types = required_runs!(rg, sc::SAMPLE_TYPES, &runs, ByteArrayColumnReader);
        let period_type = required_runs!(rg, sc::PERIOD_TYPE, &runs, ByteArrayColumnReader);
        let rkeys = read_runs!(rg, sc::RESOURCE_KEY, &runs, ByteArrayColumnReader);
        let rvals = read_runs!(rg, sc::RESOURCE_VALUE, &runs, ByteArrayColumnReader);
        let resource_at = list_offsets(&rkeys, n, sc::RESOURCE_KEY)?;
        if list_offsets(&rvals, n, sc::RESOURCE_VALUE)? != resource_at {
            return Err(ColumnarFileError::BadLevels(sc::RESOURCE_VALUE.to_owned()));
        }
        let values = read_column!(rg, sc::VALUES, rows, Int64ColumnReader);
        let values_at = list_offsets(&values, rows, sc::VALUES)?;
        let akeys = read_column!(rg, sc::ATTR_KEY, rows, ByteArrayColumnReader);
        let avals = read_column!(rg, sc::ATTR_VALUE, rows, ByteArrayColumnReader);
        let attrs_at = list_offsets(&akeys, rows, sc::ATTR_KEY)?;
        if list_offsets(&avals, rows, sc::ATTR_VALUE)? != attrs_at {
            return Err(ColumnarFileError::BadLevels(sc::ATTR_VALUE.to_owned()));
        }
        let links = if !links {
            Links::NotRead
        } else if column_index(rg, sc::TRACE_LO).is_ok() {
            let (hi, at) = optional_i64(rg, sc::TRACE_HI, rows)?;
            let (lo, lo_at) = optional_i64(rg, sc::TRACE_LO, rows)?;
            let (span, span_at) = optional_i64(rg, sc::SPAN_BITS, rows)?;
            if lo_at != at || span_at != at {
                return Err(ColumnarFileError::BadLevels(sc::SPAN_BITS.to_owned()));
            }
            Links::Bits { hi, lo, span, at }
        } else {
            let (trace, trace_at) = optional_text(rg, sc::TRACE_ID, rows)?;
            let (span, span_at) = optional_text(rg, sc::SPAN_ID, rows)?;
            Links::Text {
                trace,
                trace_at,
                span,
                span_at,
            }
        };
        let stack = required_i64(rg, sc::STACK_ID, rows)?;
        let ts = read_column!(rg, sc::TIMESTAMPS, rows, Int64ColumnReader);
        let ts_at = list_offsets(&ts, rows, sc::TIMESTAMPS)?;
        Ok(GroupColumns {
            rows,
            profile,
            runs,
            time,
            duration,
            period,
            sample_types,
            period_type,
            rkeys,
            rvals,
            resource_at,
            values,
            values_at,
            akeys,
            avals,
            attrs_at,
            links,
            stack,
            ts,
            ts_at,
        })
    }

    fn range(offsets: &[usize], r: usize) -> std::ops::Range<usize> {
        let a = offsets.get(r).copied().unwrap_or(0);
        a..offsets.get(r + 1).copied().unwrap_or(a)
    }

    /// The profile id of row `r`.
    pub(super) fn id(&self, r: usize) -> i64 {
        self.profile.get(r).copied().unwrap_or(0)
    }

    /// The header of the profile of run `run` (its first row `r`), without samples; its
    /// strings interned in `b`.
    pub(super) fn header(
        &self,
        run: usize,
        r: usize,
        b: &mut DictionaryBuilder,
    ) -> Result<Pending, ColumnarFileError> {
        let mut resource = Vec::new();
        for v in Self::range(&self.resource_at, run) {
            if let (Some(k), Some(val)) = (self.rkeys.values.get(v), self.rvals.values.get(v)) {
                resource.push(KeyValue::new(text(k)?.to_owned(), text(val)?.to_owned()));
            }
        }
        let sample_types = match self.sample_types.get(run) {
            Some(t) => parse_types(text(t)?, b),
            None => Vec::new(),
        };
        let period_type = match self.period_type.get(run) {
            Some(t) => parse_types(text(t)?, b).pop().unwrap_or_default(),
            None => ValueType::default(),
        };
        Ok(Pending {
            id: self.id(r),
            resource,
            sample_types,
            period_type,
            period: self.period.get(run).copied().unwrap_or(0),
            time: self.time.get(run).copied().unwrap_or(0),
            duration: self.duration.get(run).copied().unwrap_or(0),
            samples: Vec::new(),
            comments: Vec::new(),
        })
    }

    /// Whether row `r` is the one standing for a profile without samples ([`super::write`]).
    pub(super) fn is_placeholder(&self, r: usize) -> bool {
        self.values_at.get(r) == self.values_at.get(r + 1) && self.stack.get(r) == Some(&0)
    }

    /// Row `r`'s attributes, as `(key, value)` values of [`GroupColumns::akeys`] and
    /// [`GroupColumns::avals`].
    pub(super) fn attrs(&self, r: usize) -> impl Iterator<Item = (&ByteArray, &ByteArray)> {
        Self::range(&self.attrs_at, r)
            .filter_map(|v| Some((self.akeys.values.get(v)?, self.avals.values.get(v)?)))
    }

    /// Row `r`'s attributes as labels, their strings interned.
    fn labels(
        &self,
        r: usize,
        strings: &mut Interned,
        b: &mut DictionaryBuilder,
    ) -> Result<Vec<Label>, ColumnarFileError> {
        let mut labels = Vec::with_capacity(Self::range(&self.attrs_at, r).len());
        for (k, val) in self.attrs(r) {
            labels.push(Label {
                key: strings.get(k, b)?,
                value: LabelValue::Str(strings.get(val, b)?),
            });
        }
        Ok(labels)
    }

    /// Row `r`'s trace link, when it has one (and the columns were read).
    pub(super) fn link(&self, r: usize) -> Option<Link> {
        fn bytes<'a>(col: &'a [ByteArray], at: &[Option<usize>], r: usize) -> Option<&'a [u8]> {
            let i = at.get(r).copied().flatten()?;
            col.get(i).map(ByteArray::data)
        }
        match &self.links {
            Links::NotRead => None,
            Links::Text {
                trace,
                trace_at,
                span,
                span_at,
            } => Link::from_hex_bytes(bytes(trace, trace_at, r)?, bytes(span, span_at, r)?),
            Links::Bits { hi, lo, span, at } => {
                let i = at.get(r).copied().flatten()?;
                Some(schema::link_of_bits(
                    *hi.get(i)?,
                    *lo.get(i)?,
                    *span.get(i)?,
                ))
            }
        }
    }

    /// Row `r`'s values, one per sample type.
    pub(super) fn row_values(&self, r: usize) -> &[i64] {
        self.values
            .values
            .get(Self::range(&self.values_at, r))
            .unwrap_or(&[])
    }

    /// Row `r`'s sample timestamps.
    pub(super) fn row_timestamps(&self, r: usize) -> &[i64] {
        self.ts
            .values
            .get(Self::range(&self.ts_at, r))
            .unwrap_or(&[])
    }
}

/// The profiles of one row group, their strings, functions, locations and stacks added to
/// `b`.
fn group_profiles(
    rg: &dyn RowGroupReader,
    b: &mut DictionaryBuilder,
    stacks: &FxHashMap<i64, Vec<Frame>>,
    links: bool,
) -> Result<Vec<Pending>, ColumnarFileError> {
    let cols = GroupColumns::read(rg, links)?;
    let mut strings = Interned::default();
    let mut pending: Vec<Pending> = Vec::with_capacity(cols.runs.len());
    let mut run = 0;
    for r in 0..cols.rows {
        if r > 0 && cols.id(r - 1) != cols.id(r) {
            run += 1;
        }
        if pending.len() == run {
            pending.push(cols.header(run, r, b)?);
        }
        if cols.is_placeholder(r) {
            continue;
        }
        let sample = Sample {
            stack: b.stack(cols.stack.get(r).copied().unwrap_or(0), stacks),
            values: cols.row_values(r).to_vec(),
            labels: cols.labels(r, &mut strings, b)?,
            link: cols.link(r),
            timestamps: cols.row_timestamps(r).to_vec(),
        };
        if let Some(p) = pending.last_mut() {
            p.samples.push(sample);
        }
    }
    Ok(pending)
}
