//! [`ColumnarSource`]: the partitions of a columnar store, what answers a question in each
//! (sample rows, a rollup, a series, spans or slot rollups), and the scan that reads them on
//! all cores and hands each profile to the query's visitor.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::{FxHashMap, FxHashSet};

use super::columns::guarded;
use super::live::{LiveFiles, Slots};
use super::partitions::{columnar_root, list_partitions, may_select, Partition};
use super::row_groups::{plan_partition, read_group, FilePlan, Reuse, Task};
use super::stacks::Scanning;
use crate::columnar::schema;
use crate::error::{ColumnarFileError, Error, FileError};
use crate::parallel;
use crate::reader::{Decoded, Profiles, SkipReporter};
use crate::select::Selector;

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
        store.join(crate::columnar::DIR).is_dir()
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
    /// ([`crate::columnar::schema::DROPPED_LABELS`]).
    fn needs_rows(&self, by: Option<&str>) -> bool {
        self.needs_labels(by) || self.selections.iter().any(Selector::names_links)
    }

    /// Whether a selection has a focus (`--include`, `--exclude`, `--hide`): it is decided on
    /// each stack's frames, which series do not keep.
    pub(crate) fn needs_stacks(&self) -> bool {
        self.selections.iter().any(|s| !s.focus.is_empty())
    }

    /// Whether the selections, or the key `by` groups by, name a label that every derived
    /// file drops ([`crate::columnar::schema::DROPPED_LABELS`]).
    fn needs_labels(&self, by: Option<&str>) -> bool {
        let dropped = |k: &str| crate::columnar::schema::DROPPED_LABELS.contains(&k);
        by.is_some_and(dropped)
            || self
                .selections
                .iter()
                .any(|s| s.conditions.iter().any(|c| dropped(&c.key)))
    }

    /// Answers from now on every compacted hour that the selection covers whole from its
    /// rollup ([`crate::columnar::compact`]) instead of its sample rows, unless `spans` (per-span
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
    /// from their slot rollups ([`crate::columnar::compact`]), never whole hours from their hourly
    /// rollups: for merges cut in slices of a slot or more, whose profiles must fall in their
    /// own slices (a diff's noise estimate of a 1 h side). Otherwise as
    /// [`ColumnarSource::use_rollups`] without spans, grouped by `by`.
    pub fn use_slots(self, by: Option<&str>) -> ColumnarSource {
        let mut s = self.use_rollups(false, by);
        s.hourly = false;
        s
    }

    /// Answers from now on every compacted hour from its series ([`crate::columnar::compact`]): each
    /// profile with its resource, type, times and sample attributes, but without stacks
    /// (only a thread role's), trace links, or timestamps finer than
    /// [`crate::columnar::schema::SERIES_TICK`]. For answers that need none of those: a timeline, the
    /// values present, the instances. Not when the selection or `by` needs the rows
    /// ([`ColumnarSource::needs_rows`]) or the selection has a focus.
    pub fn use_series(mut self, by: Option<&str>) -> ColumnarSource {
        self.series = !self.needs_rows(by) && !self.needs_stacks();
        self
    }

    /// Answers from now on every compacted hour from its spans ([`crate::columnar::compact`]): the
    /// series with each linked sample's trace link kept (its timestamps only the first and
    /// the last). For per-span statistics without stacks: the list of traces, with any
    /// trace or span condition. A time cut inside a span's own first and last sample is
    /// shared out between them. Not when the selection or `by` names a label that derived
    /// files drop, nor when the selection has a focus (spans keep no stacks).
    pub fn use_spans(mut self, by: Option<&str>) -> ColumnarSource {
        self.spans = !self.needs_labels(by) && !self.needs_stacks();
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
    pub(in crate::columnar) fn plan(
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
    pub(in crate::columnar) fn run<S: Send>(
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
