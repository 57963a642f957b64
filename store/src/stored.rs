//! What a reading command reads when it is given paths: the columnar store of every store
//! directory that has one, with the raw requests it has not converted yet, and the profile
//! files of everything else (agent output, copied requests, stores written before the
//! columnar store existed).
//!
//! A store whose receiver converts ([`crate::maintain`]) answers from its columnar store and
//! from the raw requests received at or after the conversion's marker: those before it are in
//! the columnar store already (kept a while as OTLP for replay), and reading both would count
//! them twice. A columnar store without a marker (written by [`crate::columnar::convert`])
//! answers alone.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::columnar::ColumnarSource;
use crate::error::{Error, FileError};
use crate::layout::Signal;
use crate::linked::{rows_of, LinkedRow};
use crate::reader::{discover, Decoded, Profiles, SkipReporter, Source};
use crate::select::Selector;

/// The profiles under a command's paths, from columnar stores and from files.
pub struct StoreSource {
    columnar: Vec<ColumnarSource>,
    files: Option<Source>,
}

impl StoreSource {
    /// Opens the paths: a store directory with a columnar store is read from it (its raw
    /// requests are not read), anything else as files ([`Source::open`]). `report` hears of
    /// every path skipped. Fails when nothing at all can be read.
    pub fn open(paths: &[PathBuf], report: SkipReporter) -> Result<StoreSource, Error> {
        let report: Arc<SkipReporter> = Arc::new(report);
        let share = |r: &Arc<SkipReporter>| -> SkipReporter {
            let r = Arc::clone(r);
            Box::new(move |path: &Path, err: &FileError| r(path, err))
        };
        let mut columnar = Vec::new();
        let mut others = Vec::new();
        let mut fresh = Vec::new();
        for path in paths {
            if ColumnarSource::exists(path) {
                match ColumnarSource::open(path, share(&report)) {
                    Ok(source) => columnar.push(source),
                    // A store that has received nothing yet: nothing to read there.
                    Err(Error::NothingReadable) => {}
                    Err(e) => return Err(e),
                }
                // Whatever else the store holds that is not a raw request (pprof files copied
                // into it, say) is still read.
                others.extend(files_beside_columnar(path, &report));
                if let Some(until) = crate::columnar::converted_until(path) {
                    fresh.extend(not_converted(path, until, &report));
                }
            } else {
                others.push(path.clone());
            }
        }
        let files = if others.is_empty() && fresh.is_empty() {
            None
        } else {
            let opened = if others.is_empty() {
                Ok(Source::from_files(Vec::new(), share(&report)))
            } else {
                Source::open(&others, share(&report))
            };
            match opened {
                Ok(mut source) => {
                    source.files.extend(fresh);
                    Some(source)
                }
                Err(Error::NothingReadable) if !fresh.is_empty() => {
                    Some(Source::from_files(fresh, share(&report)))
                }
                Err(Error::NothingReadable) if !columnar.is_empty() => None,
                Err(e) => return Err(e),
            }
        };
        if columnar.is_empty() && files.is_none() {
            return Err(Error::NothingReadable);
        }
        Ok(StoreSource { columnar, files })
    }

    /// Whether any of the paths is read from a columnar store.
    pub fn is_columnar(&self) -> bool {
        !self.columnar.is_empty()
    }

    /// Reads from now on only the columnar partitions `selector` can touch
    /// ([`ColumnarSource::narrow_to`]); files are read whole as before.
    pub fn narrow_to(mut self, selector: &Selector) -> StoreSource {
        self.columnar = self
            .columnar
            .into_iter()
            .map(|c| c.narrow_to(selector))
            .collect();
        self
    }

    /// [`StoreSource::narrow_to`] for a pass that merges several selections at once
    /// ([`ColumnarSource::narrow_to_any`]).
    pub fn narrow_to_any(mut self, selectors: &[Selector]) -> StoreSource {
        self.columnar = self
            .columnar
            .into_iter()
            .map(|c| c.narrow_to_any(selectors))
            .collect();
        self
    }

    /// Answers compacted hours the selection covers whole from their rollups
    /// ([`ColumnarSource::use_rollups`]); only for answers that need neither time slices
    /// finer than an hour nor each sample's span (`spans`); `by` is the key the answer
    /// groups by.
    pub fn use_rollups(mut self, spans: bool, by: Option<&str>) -> StoreSource {
        self.columnar = self
            .columnar
            .into_iter()
            .map(|c| c.use_rollups(spans, by))
            .collect();
        self
    }

    /// Answers the covered slots of compacted hours from their slot rollups, never whole
    /// hours ([`ColumnarSource::use_slots`]): for merges cut in slices of a slot or more,
    /// grouped by `by`.
    pub fn use_slots(mut self, by: Option<&str>) -> StoreSource {
        self.columnar = self.columnar.into_iter().map(|c| c.use_slots(by)).collect();
        self
    }

    /// Answers compacted hours from their series ([`ColumnarSource::use_series`]): for
    /// answers that need no stack, trace link or timestamp finer than ten seconds.
    pub fn use_series(mut self, by: Option<&str>) -> StoreSource {
        self.columnar = self
            .columnar
            .into_iter()
            .map(|c| c.use_series(by))
            .collect();
        self
    }

    /// Answers compacted hours from their spans ([`ColumnarSource::use_spans`]): for
    /// per-span statistics that need no stack (the list of traces).
    pub fn use_spans(mut self, by: Option<&str>) -> StoreSource {
        self.columnar = self.columnar.into_iter().map(|c| c.use_spans(by)).collect();
        self
    }
}

/// The top-level entries of store `root` other than its raw profile requests and the columnar
/// store itself; metrics requests are never profiles ([`discover`] skips them).
fn files_beside_columnar(root: &Path, report: &Arc<SkipReporter>) -> Vec<PathBuf> {
    let skip = [Signal::Profiles.dir(), crate::columnar::DIR];
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) => {
            report(root, &FileError::List(e));
            return Vec::new();
        }
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            !crate::layout::is_hidden(&name) && !skip.iter().any(|s| name == *s)
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    // Only paths that hold a profile file: an empty `metrics/` is not worth a "nothing here".
    let (found, _) = discover(&out);
    if found.is_empty() {
        Vec::new()
    } else {
        out
    }
}

/// The raw profile requests of store `root` received at or after `until`: those its columnar
/// store does not hold yet. A file whose name gives no receipt time is not a request the
/// receiver wrote; it is read too.
fn not_converted(root: &Path, until: i64, report: &Arc<SkipReporter>) -> Vec<PathBuf> {
    let dir = root.join(Signal::Profiles.dir());
    let (files, failures) = discover(std::slice::from_ref(&dir));
    // All converted and removed: an empty or absent `profiles/` is no news.
    for (path, err) in failures.iter().filter(|(path, _)| *path != dir) {
        report(path, err);
    }
    files
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(crate::maintain::received_at)
                .is_none_or(|at| at >= until)
        })
        .collect()
}

impl StoreSource {
    /// Whether some of the profiles are read from files rather than a columnar store.
    pub fn reads_files(&self) -> bool {
        self.files.is_some()
    }

    /// Reads like [`Profiles::scan`], a group at a time, each profile with its linked
    /// samples apart ([`crate::linked`]): the profiles of each hour the columnar stores hold
    /// (by start, every service; oldest first), then those read from files (`None`). `done`
    /// gets each group's states before the next group is read, so a question over a day can
    /// keep what it needs of one hour at a time. `links_apart`: the selection names a trace
    /// or span ([`Selector::names_links`]). Fails only when nothing at all could be read.
    pub fn scan_linked_by_hour<S: Send>(
        &self,
        links_apart: bool,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded, &[LinkedRow]) + Sync,
        mut done: impl FnMut(Option<i64>, Vec<S>),
    ) -> Result<(), Error> {
        let mut hours: Vec<i64> = self.columnar.iter().flat_map(|c| c.hours()).collect();
        hours.sort_unstable();
        hours.dedup();
        let mut first_error = None;
        let mut read_any = false;
        let mut take = |part: Result<Vec<S>, Error>, states: &mut Vec<S>| match part {
            Ok(s) => {
                read_any = true;
                states.extend(s);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        };
        for hour in hours {
            let mut states = Vec::new();
            for c in &self.columnar {
                take(
                    c.scan_hour_linked(hour, links_apart, &init, &visit),
                    &mut states,
                );
            }
            done(Some(hour), states);
        }
        if let Some(f) = &self.files {
            let mut states = Vec::new();
            take(f.scan(&init, |s, d| visit(s, d, &rows_of(d))), &mut states);
            done(None, states);
        }
        match first_error {
            Some(e) if !read_any => Err(e),
            _ => Ok(()),
        }
    }
}

impl Profiles for StoreSource {
    fn scan<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded) + Sync,
    ) -> Result<Vec<S>, Error> {
        let mut states = Vec::new();
        let mut first_error = None;
        let mut read_any = false;
        let parts = self
            .columnar
            .iter()
            .map(|c| c.scan(&init, &visit))
            .chain(self.files.iter().map(|f| f.scan(&init, &visit)));
        for part in parts {
            match part {
                Ok(s) => {
                    read_any = true;
                    states.extend(s);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if !read_any => Err(e),
            _ => Ok(states),
        }
    }

    fn pprof_files(&self) -> usize {
        self.files.as_ref().map_or(0, Source::pprof_files)
    }
}
