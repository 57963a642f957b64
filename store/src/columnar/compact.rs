//! Compaction and rollup of a closed hour partition: its per-request files merged into one
//! samples file and one stacks file, and a rollup and a series of the samples beside them (see
//! the module docs of [`crate::columnar`] for what those keep and drop).
//!
//! Crash safety without a lock or a log: a compacted file's footer names the files it
//! replaces ([`META_REPLACES`]), and a reader skips them once the compacted file is in place.
//! Files are written under `.tmp/`, synced, then renamed into the partition one at a time:
//! the stacks file, the rollup, the series, and last the samples file, whose rename is the
//! single step that swaps old samples for new. A crash before it leaves the old files answering (the new
//! stacks file holds every old stack, a rollup whose samples file is absent is not used); a
//! crash after it leaves replaced files that readers skip and the next compaction deletes.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use otel_bridge::model::{Dictionary, Label, LabelValue, Link, Profile, Sample, StackId, StrId};
use rustc_hash::FxHashMap;

use super::read::live::{
    live_files, LiveFiles, COMPACTED_SAMPLES, COMPACTED_STACKS, META_DERIVED, META_PROFILES,
    META_REPLACES, META_ROLLUP_OF, META_SLOTS, META_WINDOW, ROLLUP, SERIES, SLOTS_FILE, SPANS,
};
use super::read::partitions::{files_in, list_partitions};
use super::read::rows::{read_detailed, read_samples_file};
use super::read::stacks::read_stacks_file;
use super::schema::{self, DERIVED_VERSION, DROPPED_LABELS, HOUR, SERIES_TICK};
use super::write::{write_stacks, Meta, SamplesFile};
use crate::error::{Error, FileError};
use crate::reader::Decoded;
use crate::select::{Measure, ProfileType};

/// The steps of [`compact_partition`] that change the partition, in order; a crash between
/// any two leaves the partition readable with nothing counted twice (a test stops after each).
pub const STEPS: usize = 7;

/// Compacts every hour partition of `store` that closed at least `grace` ns before `now`
/// (no profile starts in it any more: the agents' period plus their export retry window) and
/// is not compacted yet; returns the partitions compacted.
pub fn compact(store: &Path, now: i64, grace: i64) -> Result<Vec<PathBuf>, Error> {
    let root = store.join(super::DIR);
    let mut done = Vec::new();
    let Ok(partitions) = list_partitions(&root) else {
        return Ok(done);
    };
    let mut dirs: Vec<PathBuf> = partitions
        .into_iter()
        .filter(|p| p.hour.saturating_add(HOUR).saturating_add(grace.max(0)) <= now)
        .map(|p| p.dir)
        .collect();
    dirs.sort();
    for dir in dirs {
        if compact_partition(&root, &dir, now, STEPS)? {
            done.push(dir);
        }
    }
    Ok(done)
}

/// Compacts partition `dir` of the columnar store at `root`, performing at most `steps` of
/// the [`STEPS`] changes (fewer only to test a crash); returns whether anything changed.
#[doc(hidden)]
pub fn compact_partition(root: &Path, dir: &Path, now: i64, steps: usize) -> Result<bool, Error> {
    // Decided from names and footers alone: a compacted hour is not read again (this runs
    // on every maintenance pass, over every closed hour of the store).
    let files = PartitionFiles::list(root, dir)?;
    let compacted = files.compacted();
    if files.live.samples.is_empty() || (compacted && files.derived()) {
        return Ok(false);
    }
    if compacted {
        // Compacted before this version of the rollup, series and spans: only they are
        // written.
        let olds = files
            .rollups
            .into_iter()
            .chain(files.series)
            .chain(files.spans);
        let olds = olds.chain(files.slots).collect();
        return add_derived(root, dir, &files.live, now, olds);
    }
    let (_, stacks, profiles) =
        read_detailed(dir).map_err(|(path, source)| Error::Uncompactable { path, source })?;
    let tmp = root.join(crate::layout::TMP);
    std::fs::create_dir_all(&tmp).map_err(Error::io("create", &tmp))?;
    let names = Compacted::named(now);
    write_compacted(&tmp, &names, &files, stacks, &profiles)?;
    if !publish(dir, &tmp, &names, steps)? {
        return Ok(true);
    }
    remove_replaced(dir, &names, files)?;
    Ok(true)
}

/// A partition's files as compaction sees them: those that count, and every file by kind
/// (a conversion's files past the marker left out: they are not the partition's yet).
struct PartitionFiles {
    live: LiveFiles,
    all_samples: Vec<String>,
    all_stacks: Vec<String>,
    rollups: Vec<PathBuf>,
    series: Vec<PathBuf>,
    spans: Vec<PathBuf>,
    slots: Vec<PathBuf>,
}

impl PartitionFiles {
    /// Lists partition `dir` of the store at `root`; fails when a compacted file's footer
    /// cannot be read (compaction never drops what it could not read).
    fn list(root: &Path, dir: &Path) -> Result<PartitionFiles, Error> {
        // A conversion's files past the marker are not the partition's yet ([`super::commit`]).
        let marker = super::commit::marker_in(root);
        let committed = |files: Vec<PathBuf>| -> Vec<String> {
            files
                .iter()
                .map(|p| file_name(p))
                .filter(|n| super::commit::committed(n, marker))
                .collect()
        };
        let mut failed = Vec::new();
        let live = live_files(dir, &mut failed);
        if let Some((path, FileError::Columnar(source))) = failed.pop() {
            return Err(Error::Uncompactable { path, source });
        }
        Ok(PartitionFiles {
            live,
            all_samples: committed(files_in(dir, "samples-")),
            all_stacks: committed(files_in(dir, "stacks-")),
            rollups: files_in(dir, ROLLUP),
            series: files_in(dir, SERIES),
            spans: files_in(dir, SPANS),
            slots: files_in(dir, SLOTS_FILE),
        })
    }

    /// Whether the partition is one compacted samples file and one stacks file.
    fn compacted(&self) -> bool {
        self.live.samples.len() == 1
            && self
                .live
                .samples
                .iter()
                .all(|p| file_name(p).starts_with(COMPACTED_SAMPLES))
            && self.all_samples.len() == 1
            && self.all_stacks.len() == 1
    }

    /// Whether the partition has one rollup, series, spans and slot rollup of this version,
    /// made of its samples file.
    fn derived(&self) -> bool {
        self.live.rollup.is_some()
            && self.live.series.is_some()
            && self.live.spans.is_some()
            && self.live.slots.is_some()
            && self.rollups.len() == 1
            && self.series.len() == 1
            && self.spans.len() == 1
            && self.slots.len() == 1
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The names of the files one compaction writes.
struct Compacted {
    samples: String,
    stacks: String,
    rollup: String,
    series: String,
    spans: String,
    slots: String,
}

impl Compacted {
    /// Names unique to this process and time.
    fn named(now: i64) -> Compacted {
        let stem = format!("{now}-{:05}", std::process::id() % 100_000);
        Compacted {
            samples: format!("{COMPACTED_SAMPLES}{stem}.parquet"),
            stacks: format!("{COMPACTED_STACKS}{stem}.parquet"),
            rollup: format!("{ROLLUP}{stem}.parquet"),
            series: format!("{SERIES}{stem}.parquet"),
            spans: format!("{SPANS}{stem}.parquet"),
            slots: format!("{SLOTS_FILE}{stem}.parquet"),
        }
    }

    /// The files in the order they are published, the one that keeps every moment readable
    /// and counted once: the stacks first (they hold every old stack), the samples last
    /// (their rename swaps the old samples for the new).
    fn in_order(&self) -> [&String; 6] {
        [
            &self.stacks,
            &self.rollup,
            &self.series,
            &self.spans,
            &self.slots,
            &self.samples,
        ]
    }
}

/// Writes under `tmp` the partition's compacted samples file, its rollup, series, spans and
/// slot rollup, and its compacted stacks file, named as `names` says.
fn write_compacted(
    tmp: &Path,
    names: &Compacted,
    files: &PartitionFiles,
    stacks: FxHashMap<i64, Vec<schema::Frame>>,
    profiles: &[Decoded],
) -> Result<(), Error> {
    // The samples, profile after profile (a profile's rows stay together: the reader rebuilds
    // a profile from consecutive rows), ordered by type and time.
    let mut order: Vec<&Decoded> = profiles.iter().collect();
    order.sort_by_key(|d| (d.profile.sample_types.len(), d.profile.time_nanos));
    let replaces =
        |replaced: &[String]| vec![Meta::new(META_REPLACES.to_owned(), replaced.join("\n"))];
    let samples_tmp = tmp.join(&names.samples);
    write_tmp(&samples_tmp, |f| {
        let mut out = SamplesFile::new(f, replaces(&files.all_samples))?;
        let mut seen = FxHashMap::default();
        for (n, d) in order.iter().enumerate() {
            let id = schema::stack_id([(names.samples.as_str(), "", n as i64)]);
            out.add_profile(id, &d.resource, &d.profile, &mut seen)?;
        }
        out.finish()
    })?;

    // The rollup, from the compacted file: one dictionary for all its profiles.
    let rolled =
        read_samples_file(&samples_tmp, &stacks).map_err(|source| Error::Uncompactable {
            path: samples_tmp.clone(),
            source,
        })?;
    let rolled = relabel(&rolled);
    write_rollup(&tmp.join(&names.rollup), &rolled, &names.samples)?;
    write_series(&tmp.join(&names.series), &rolled, &names.samples, false)?;
    write_series(&tmp.join(&names.spans), &rolled, &names.samples, true)?;
    write_slots(&tmp.join(&names.slots), &rolled, &names.samples)?;

    let mut all: Vec<(i64, Vec<schema::Frame>)> = stacks.into_iter().collect();
    all.sort_by_key(|(id, _)| *id);
    write_tmp(&tmp.join(&names.stacks), |f| {
        write_stacks(f, &all, replaces(&files.all_stacks))
    })
}

/// Moves the files written under `tmp` into partition `dir` ([`Compacted::in_order`]), each
/// one a step of at most `steps`; returns whether the removal of the replaced files, the
/// last step, is still to be done.
fn publish(dir: &Path, tmp: &Path, names: &Compacted, steps: usize) -> Result<bool, Error> {
    let in_order = names.in_order();
    for (step, name) in in_order.iter().enumerate() {
        if step >= steps {
            return Ok(false);
        }
        let to = dir.join(name);
        std::fs::rename(tmp.join(name), &to).map_err(Error::io("move into", &to))?;
        crate::writer::sync_dir(dir)?;
    }
    Ok(in_order.len() < steps)
}

/// Removes the files the compaction replaced and the old rollups, series, spans and slot
/// rollups (readers skip them already).
fn remove_replaced(dir: &Path, names: &Compacted, files: PartitionFiles) -> Result<(), Error> {
    let new = names.in_order();
    let olds = files
        .all_samples
        .iter()
        .chain(&files.all_stacks)
        .map(|n| dir.join(n))
        .chain(files.rollups)
        .chain(files.series)
        .chain(files.spans)
        .chain(files.slots)
        .filter(|p| !new.contains(&&file_name(p)));
    for old in olds {
        std::fs::remove_file(&old).map_err(Error::io("remove", &old))?;
    }
    crate::writer::sync_dir(dir)
}

/// Writes the rollup, series and spans of a compacted partition that has none of this
/// version (compacted before it): read from the compacted samples file, published beside it,
/// older ones (`olds`) removed.
fn add_derived(
    root: &Path,
    dir: &Path,
    live: &LiveFiles,
    now: i64,
    olds: Vec<PathBuf>,
) -> Result<bool, Error> {
    let [samples] = live.samples.as_slice() else {
        return Ok(false);
    };
    let uncompactable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Uncompactable { path, source }
    };
    let mut stacks: FxHashMap<i64, Vec<schema::Frame>> = FxHashMap::default();
    for path in &live.stacks {
        let found = read_stacks_file(path).map_err(uncompactable(path))?;
        for (id, frames) in found {
            stacks.entry(id).or_insert(frames);
        }
    }
    let profiles = read_samples_file(samples, &stacks).map_err(uncompactable(samples))?;
    let profiles = relabel(&profiles);
    let tmp = root.join(crate::layout::TMP);
    std::fs::create_dir_all(&tmp).map_err(Error::io("create", &tmp))?;
    let stem = format!("{now}-{:05}", std::process::id() % 100_000);
    let of = samples
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let rollup_name = format!("{ROLLUP}{stem}.parquet");
    let series_name = format!("{SERIES}{stem}.parquet");
    let spans_name = format!("{SPANS}{stem}.parquet");
    let slots_name = format!("{SLOTS_FILE}{stem}.parquet");
    write_rollup(&tmp.join(&rollup_name), &profiles, &of)?;
    write_series(&tmp.join(&series_name), &profiles, &of, false)?;
    write_series(&tmp.join(&spans_name), &profiles, &of, true)?;
    write_slots(&tmp.join(&slots_name), &profiles, &of)?;
    for name in [&rollup_name, &series_name, &spans_name, &slots_name] {
        let to = dir.join(name);
        std::fs::rename(tmp.join(name), &to).map_err(Error::io("move into", &to))?;
    }
    crate::writer::sync_dir(dir)?;
    let new = [
        dir.join(&rollup_name),
        dir.join(&series_name),
        dir.join(&spans_name),
        dir.join(&slots_name),
    ];
    for old in olds.iter().filter(|p| !new.contains(p)) {
        std::fs::remove_file(old).map_err(Error::io("remove", old))?;
    }
    crate::writer::sync_dir(dir)?;
    Ok(true)
}

/// Writes the rollup ([`roll_up`]) of `profiles` (relabelled), the profiles of compacted
/// samples file `of`.
fn write_rollup(path: &Path, profiles: &[Decoded], of: &str) -> Result<(), Error> {
    let (rolled, counts, window) = roll_up(profiles, false);
    let id = profile_ids(path);
    let stands_for: Vec<String> = counts
        .iter()
        .enumerate()
        .map(|(n, (all, with_samples))| format!("{} {all} {with_samples}", id(n)))
        .collect();
    let meta = vec![
        Meta::new(META_ROLLUP_OF.to_owned(), of.to_owned()),
        Meta::new(META_WINDOW.to_owned(), format!("{} {}", window.0, window.1)),
        Meta::new(META_DERIVED.to_owned(), DERIVED_VERSION.to_owned()),
        Meta::new(META_PROFILES.to_owned(), stands_for.join("\n")),
    ];
    write_tmp(path, |f| {
        let mut out = SamplesFile::new(f, meta)?;
        let mut seen = FxHashMap::default();
        for (n, d) in rolled.iter().enumerate() {
            out.add_profile(id(n), &d.resource, &d.profile, &mut seen)?;
        }
        out.finish()
    })
}

/// Writes the slot rollup of `profiles` (relabelled), the profiles of compacted samples file
/// `of`: [`roll_up`] by slot, each profile's slot, window and counts in the footer
/// ([`META_SLOTS`]), so that a reader picks the slots a question covers before reading.
fn write_slots(path: &Path, profiles: &[Decoded], of: &str) -> Result<(), Error> {
    let (rolled, counts, _) = roll_up(profiles, true);
    let id = profile_ids(path);
    let lines: Vec<String> = rolled
        .iter()
        .zip(&counts)
        .enumerate()
        .map(|(n, (d, (all, with_samples)))| {
            let p = &d.profile;
            let end = p.time_nanos.saturating_add(p.duration_nanos.max(0));
            format!(
                "{} {} {} {end} {all} {with_samples}",
                id(n),
                schema::slot_of(p.time_nanos),
                p.time_nanos
            )
        })
        .collect();
    let meta = vec![
        Meta::new(META_ROLLUP_OF.to_owned(), of.to_owned()),
        Meta::new(META_DERIVED.to_owned(), DERIVED_VERSION.to_owned()),
        Meta::new(META_SLOTS.to_owned(), lines.join("\n")),
    ];
    write_tmp(path, |f| {
        let mut out = SamplesFile::new(f, meta)?;
        let mut seen = FxHashMap::default();
        for (n, d) in rolled.iter().enumerate() {
            out.add_profile(id(n), &d.resource, &d.profile, &mut seen)?;
        }
        out.finish()
    })
}

/// Writes the series ([`series`]) of `profiles`, the profiles of compacted samples file `of`,
/// or with `links` its spans.
fn write_series(path: &Path, profiles: &[Decoded], of: &str, links: bool) -> Result<(), Error> {
    let series = series(profiles, links);
    let id = profile_ids(path);
    write_tmp(path, |f| {
        let meta = vec![
            Meta::new(META_ROLLUP_OF.to_owned(), of.to_owned()),
            Meta::new(META_DERIVED.to_owned(), DERIVED_VERSION.to_owned()),
        ];
        let mut out = if links {
            SamplesFile::spans(f, meta)?
        } else {
            SamplesFile::new(f, meta)?
        };
        let mut seen = FxHashMap::default();
        for (n, d) in series.iter().enumerate() {
            out.add_profile(id(n), &d.resource, &d.profile, &mut seen)?;
        }
        out.finish()
    })
}

/// The ids of the profiles of derived file `path`, by position: the same hash of the file's
/// name and the position in every writer.
fn profile_ids(path: &Path) -> impl Fn(usize) -> i64 {
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    move |n| schema::stack_id([(name.as_str(), "", n as i64)])
}

fn write_tmp(
    path: &Path,
    fill: impl FnOnce(std::fs::File) -> Result<std::fs::File, parquet::errors::ParquetError>,
) -> Result<(), Error> {
    let file = std::fs::File::create(path).map_err(Error::io("create", path))?;
    let done = fill(file)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|f| f.sync_all());
    if let Err(e) = done {
        let _ = std::fs::remove_file(path);
        return Err(Error::io("write", path)(e));
    }
    Ok(())
}

/// `profiles` (one dictionary, as [`super::read`] gives them) with [`DROPPED_LABELS`]
/// removed from their samples, and a `thread.pool` label made from a dropped thread name
/// when the sample has no pool: what rollups and series are made from.
fn relabel(profiles: &[Decoded]) -> Vec<Decoded> {
    let Some(first) = profiles.first() else {
        return Vec::new();
    };
    let mut dictionary = (*first.profile.dictionary).clone();
    let mut strings: FxHashMap<String, StrId> = FxHashMap::default();
    let mut intern = |d: &mut Dictionary, s: &str| {
        *strings.entry(s.to_owned()).or_insert_with(|| {
            d.strings.push(s.to_owned());
            StrId(u32::try_from(d.strings.len() - 1).unwrap_or(u32::MAX))
        })
    };
    let pool_key = intern(&mut dictionary, "thread.pool");
    // Per key id: whether it is dropped, a thread's name, a pool.
    let mut kinds: FxHashMap<u32, (bool, bool, bool)> = FxHashMap::default();
    let mut pools: FxHashMap<u32, StrId> = FxHashMap::default();
    let mut out = Vec::with_capacity(profiles.len());
    for d in profiles {
        let p = &d.profile;
        let mut samples = Vec::with_capacity(p.samples.len());
        for s in &p.samples {
            let mut labels = Vec::with_capacity(s.labels.len() + 1);
            let mut name = None;
            let mut has_pool = false;
            for l in &s.labels {
                let (dropped, thread_name, pool) = *kinds.entry(l.key.0).or_insert_with(|| {
                    let k = p.str(l.key);
                    (
                        DROPPED_LABELS.contains(&k),
                        k == "thread.name" || k == "thread_name",
                        k == "thread.pool" || k == "thread_pool",
                    )
                });
                has_pool |= pool;
                if let (true, LabelValue::Str(v)) = (thread_name, l.value) {
                    name = Some(v);
                }
                if !dropped {
                    labels.push(*l);
                }
            }
            if let (Some(v), false) = (name, has_pool) {
                let pool = match pools.get(&v.0) {
                    Some(&id) => id,
                    None => {
                        let text = otelprof_primitives::thread_pool::pool_of(p.str(v)).into_owned();
                        let id = intern(&mut dictionary, &text);
                        pools.insert(v.0, id);
                        id
                    }
                };
                labels.push(Label {
                    key: pool_key,
                    value: LabelValue::Str(pool),
                });
            }
            samples.push(Sample {
                stack: s.stack,
                values: s.values.clone(),
                labels,
                link: s.link,
                timestamps: s.timestamps.clone(),
            });
        }
        out.push((d, samples));
    }
    let dictionary = Arc::new(dictionary);
    out.into_iter()
        .map(|(d, samples)| Decoded {
            resource: d.resource.clone(),
            profile: Profile {
                dictionary: dictionary.clone(),
                sample_types: d.profile.sample_types.clone(),
                period_type: d.profile.period_type,
                period: d.profile.period,
                time_nanos: d.profile.time_nanos,
                duration_nanos: d.profile.duration_nanos,
                samples,
                comments: Vec::new(),
            },
        })
        .collect()
}

/// A sample's labels as dictionary ids, for keys.
fn label_key(s: &Sample) -> Vec<(u32, u32)> {
    s.labels
        .iter()
        .map(|l| match l.value {
            LabelValue::Str(v) => (l.key.0, v.0),
            // The reader makes string labels only; a number keeps its bits apart.
            LabelValue::Num { value, .. } => (l.key.0, u32::MAX ^ (value as u32)),
        })
        .collect()
}

/// Whether the observations of `p`'s type are counted by one of its values; if not (the
/// merger counts 1 a sample row), its rows must be kept apart, or its counts would shrink.
pub(super) fn counted(p: &Profile) -> bool {
    [Measure::Amount, Measure::Count].into_iter().all(|m| {
        ProfileType::of(p)
            .and_then(|t| t.value_index(p, m))
            .is_none_or(|v| v.count.is_some())
    })
}

/// What a series sample is keyed by within its profile: labels, stack (a thread role's or
/// the empty one), the row kept apart (see [`counted`]), the tick of its timestamps, and in
/// a spans file its trace link.
type SeriesKey = (Vec<(u32, u32)>, u32, usize, Option<i64>, Option<Link>);

/// Each profile as the series keeps it ([`crate::columnar`]): its own resource, type, start
/// and duration, its samples added up per labels, their stacks and trace links dropped
/// (a thread role's one-frame stack kept: a sample without a span is grouped by it), and
/// their timestamps by [`SERIES_TICK`]: a sample's values are shared out among the ticks of
/// its timestamps in proportion, each tick's row one timestamp at the tick's middle. The
/// profiles must come from [`super::read`] (stack 0 is the empty stack).
///
/// With `links` (the hour's **spans** file), a sample with a trace link keeps it, apart from
/// the others of its labels, and its timestamps shrink to the first and the last: what the
/// list of traces needs (value, count, endpoints, window per span) in a row a span.
fn series(profiles: &[Decoded], links: bool) -> Vec<Decoded> {
    let mut out = Vec::with_capacity(profiles.len());
    let mut ticks: Vec<i64> = Vec::new();
    for d in profiles {
        let p = &d.profile;
        let counted = counted(p);
        let mut rows = SeriesRows::default();
        for (n, s) in p.samples.iter().enumerate() {
            let stack = if crate::merge::role_of(p, s.stack).is_some() {
                s.stack.0
            } else {
                0
            };
            let apart = if counted { 0 } else { n + 1 };
            rows.add_sample(s, stack, apart, links, &mut ticks);
        }
        out.push(Decoded {
            resource: d.resource.clone(),
            profile: Profile {
                dictionary: p.dictionary.clone(),
                sample_types: p.sample_types.clone(),
                period_type: p.period_type,
                period: p.period,
                time_nanos: p.time_nanos,
                duration_nanos: p.duration_nanos,
                samples: rows.samples,
                comments: Vec::new(),
            },
        });
    }
    out
}

/// A profile's series samples being added up ([`series`]).
#[derive(Default)]
struct SeriesRows {
    samples: Vec<Sample>,
    index: FxHashMap<SeriesKey, usize>,
}

impl SeriesRows {
    /// Adds sample `s` (its stack kept as `stack`, its row apart as `apart` says): with
    /// `links` and a trace link, to its span's row; without timestamps, to its labels' row;
    /// else shared out among the rows of its timestamps' ticks (`ticks` a scratch buffer).
    fn add_sample(
        &mut self,
        s: &Sample,
        stack: u32,
        apart: usize,
        links: bool,
        ticks: &mut Vec<i64>,
    ) {
        let labels = label_key(s);
        if let (true, Some(link)) = (links, s.link) {
            let span = s.timestamps.iter().fold(None, |w: Option<(i64, i64)>, &t| {
                Some(w.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
            });
            let key = (labels, stack, apart, None, Some(link));
            self.add(key, s, s.values.iter().copied(), span);
            return;
        }
        if s.timestamps.is_empty() {
            let key = (labels, stack, apart, None, None);
            self.add(key, s, s.values.iter().copied(), None);
            return;
        }
        ticks.clear();
        ticks.extend(s.timestamps.iter().map(|t| t.div_euclid(SERIES_TICK)));
        ticks.sort_unstable();
        // Each tick's share of every value, rounded so that the shares add up to it.
        let all = ticks.len() as i128;
        let mut before = 0i128;
        for run in ticks.chunk_by(|a, b| a == b) {
            let after = before + run.len() as i128;
            let tick = run.first().copied();
            let share = s.values.iter().map(|&v| {
                let v = i128::from(v);
                i64::try_from(v * after / all - v * before / all).unwrap_or(0)
            });
            self.add((labels.clone(), stack, apart, tick, None), s, share, None);
            before = after;
        }
    }

    /// Adds `values` of `s` to the row of `key`; `span` (a linked sample's first and last
    /// timestamps) widens the row's own.
    fn add(
        &mut self,
        key: SeriesKey,
        s: &Sample,
        values: impl Iterator<Item = i64>,
        span: Option<(i64, i64)>,
    ) {
        let stamp = key.3.map(|t| {
            t.saturating_mul(SERIES_TICK)
                .saturating_add(SERIES_TICK / 2)
        });
        let (stack, link) = (StackId(key.1), key.4);
        let samples = &mut self.samples;
        let i = *self.index.entry(key).or_insert_with(|| {
            samples.push(Sample {
                stack,
                values: vec![0; s.values.len()],
                labels: s.labels.clone(),
                link,
                timestamps: stamp.into_iter().collect(),
            });
            samples.len() - 1
        });
        if let Some(r) = samples.get_mut(i) {
            for (a, b) in r.values.iter_mut().zip(values) {
                *a = a.saturating_add(b);
            }
            if let Some((first, last)) = span {
                let (a, b) = match r.timestamps.as_slice() {
                    [a, b] => (first.min(*a), last.max(*b)),
                    [a] => (first.min(*a), last.max(*a)),
                    _ => (first, last),
                };
                r.timestamps = if a == b { vec![a] } else { vec![a, b] };
            }
        }
    }
}

/// What a rollup profile is keyed by: resource, the header of its type, and (in a slot
/// rollup) the slot of the profiles' starts.
type ProfileKey = (
    Vec<(String, String)>,
    Vec<(u32, u32)>,
    (u32, u32),
    i64,
    Option<usize>,
);
/// What a rollup sample is keyed by within its profile: labels and stack.
type SampleKey = (Vec<(u32, u32)>, u32, usize);

/// How many profiles a rollup profile adds up: all, and those with samples.
type StandsFor = (usize, usize);

/// The profiles of one file (one dictionary) added up per resource and type header (and with
/// `by_slot` per [`schema::SLOT`] of their starts), their samples per (labels, stack); trace
/// links and timestamps dropped. Each rollup profile spans
/// its profiles' window; the second value is how many profiles each adds up (all, and those
/// with samples), the third the window of all of them.
fn roll_up(profiles: &[Decoded], by_slot: bool) -> (Vec<Decoded>, Vec<StandsFor>, (i64, i64)) {
    struct Acc<'a> {
        first: &'a Decoded,
        start: i64,
        end: i64,
        samples: Vec<Sample>,
        index: FxHashMap<SampleKey, usize>,
        profiles: usize,
        with_samples: usize,
    }
    let key_of = |d: &Decoded| -> ProfileKey {
        let p = &d.profile;
        (
            d.resource
                .iter()
                .map(|kv| (kv.key.as_str().to_owned(), kv.value.to_string()))
                .collect(),
            p.sample_types.iter().map(|v| (v.ty.0, v.unit.0)).collect(),
            (p.period_type.ty.0, p.period_type.unit.0),
            p.period,
            by_slot.then(|| schema::slot_of(p.time_nanos)),
        )
    };
    // Snapshots (the live heap) are never added up: a group of them rolls up to its latest.
    let is_snapshot = |p: &Profile| ProfileType::of(p).is_some_and(ProfileType::is_snapshot);
    let mut latest: FxHashMap<ProfileKey, i64> = FxHashMap::default();
    for d in profiles.iter().filter(|d| is_snapshot(&d.profile)) {
        let t = latest.entry(key_of(d)).or_insert(i64::MIN);
        *t = (*t).max(d.profile.time_nanos);
    }
    let mut groups: Vec<Acc> = Vec::new();
    let mut by_key: FxHashMap<ProfileKey, usize> = FxHashMap::default();
    let mut window = (i64::MAX, i64::MIN);
    for d in profiles {
        let p = &d.profile;
        let end = p.time_nanos.saturating_add(p.duration_nanos.max(0));
        window = (window.0.min(p.time_nanos), window.1.max(end));
        let key = key_of(d);
        let superseded = latest.get(&key).is_some_and(|t| *t != p.time_nanos);
        let g = *by_key.entry(key).or_insert_with(|| {
            groups.push(Acc {
                first: d,
                start: p.time_nanos,
                end,
                samples: Vec::new(),
                index: FxHashMap::default(),
                profiles: 0,
                with_samples: 0,
            });
            groups.len() - 1
        });
        let Some(acc) = groups.get_mut(g) else {
            continue;
        };
        acc.start = acc.start.min(p.time_nanos);
        acc.profiles += 1;
        acc.with_samples += usize::from(!p.samples.is_empty());
        acc.end = acc.end.max(end);
        if superseded {
            continue;
        }
        let counted = counted(p);
        for s in &p.samples {
            let labels = label_key(s);
            let apart = if counted { 0 } else { acc.samples.len() + 1 };
            let i = *acc
                .index
                .entry((labels, s.stack.0, apart))
                .or_insert_with(|| {
                    acc.samples.push(Sample {
                        stack: StackId(s.stack.0),
                        values: vec![0; s.values.len()],
                        labels: s.labels.clone(),
                        link: None,
                        timestamps: Vec::new(),
                    });
                    acc.samples.len() - 1
                });
            if let Some(r) = acc.samples.get_mut(i) {
                if r.values.len() < s.values.len() {
                    r.values.resize(s.values.len(), 0);
                }
                for (a, b) in r.values.iter_mut().zip(&s.values) {
                    *a = a.saturating_add(*b);
                }
            }
        }
    }
    let counts = groups
        .iter()
        .map(|acc| (acc.profiles, acc.with_samples))
        .collect();
    let out = groups
        .into_iter()
        .map(|acc| Decoded {
            resource: acc.first.resource.clone(),
            profile: Profile {
                dictionary: acc.first.profile.dictionary.clone(),
                sample_types: acc.first.profile.sample_types.clone(),
                period_type: acc.first.profile.period_type,
                period: acc.first.profile.period,
                time_nanos: acc.start,
                duration_nanos: acc.end.saturating_sub(acc.start),
                samples: acc.samples,
                comments: Vec::new(),
            },
        })
        .collect();
    if window.0 > window.1 {
        window = (0, 0);
    }
    (out, counts, window)
}
