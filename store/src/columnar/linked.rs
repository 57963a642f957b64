//! Reading a row group for the list of traces without making a sample of each row: a
//! profile's rows are added up per attribute set and stack into a few samples (what its
//! totals need), and each linked row is handed on as a [`LinkedRow`] that borrows the
//! columns. On an hour of spans that is a dozen samples a profile instead of four hundred,
//! and no allocation per row.
//!
//! The totals are those of the rows, exactly, because only rows whose share the selection
//! decides by their labels alone are added up: a row with timestamps (a time window may cut
//! it), a linked row when the selection names a trace or span, and every row of a profile
//! whose type counts its observations by sample rows (no count value) stay samples of their
//! own ([`crate::Merger::add`] gives such a sample one observation).

use std::sync::Arc;

use otel_bridge::model::{Label, LabelValue, Link, Profile, ProfileBuilder, Sample, StrId};
use parquet::file::reader::FileReader;
use rustc_hash::FxHashMap;

use super::compact::counted;
use super::read::columns::open;
use super::read::dictionary::{DictionaryBuilder, Interned};
use super::read::row_groups::{read_group, Task};
use super::read::rows::{GroupColumns, Pending};
use super::read::{ColumnarSource, Partition};
use super::schema::Frame;
use crate::error::ColumnarFileError;
use crate::error::Error;
use crate::linked::{rows_of, LinkedRow};
use crate::reader::Decoded;

impl ColumnarSource {
    /// [`ColumnarSource::scan`] of the selected partitions of one `hour` (every service: the
    /// profiles that start in it), for the list of traces: each profile with its linked
    /// samples apart ([`crate::linked`]). Rows are read without a sample each where the
    /// totals allow (this module); `links_apart`: the selection names a trace or span.
    pub fn scan_hour_linked<S: Send>(
        &self,
        hour: i64,
        links_apart: bool,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded, &[LinkedRow]) + Sync,
    ) -> Result<Vec<S>, Error> {
        let partitions: Vec<&Partition> = self
            .selected()
            .into_iter()
            .filter(|p| p.hour == hour)
            .collect();
        let empty = partitions.is_empty();
        // The traces need no frames, unless a focus decides on them: then the stacks are read,
        // and each linked row is noted with a sample of its own stack.
        let by_stack = self.needs_stacks();
        let (tasks, failures) = self.plan(partitions, by_stack);
        self.run(&tasks, failures, empty, init, |state, reuse, task| {
            if task.stands_for.is_none() && task.skip_slots.is_none() {
                let how = (links_apart, by_stack);
                read_linked_group(task, how, |d, rows| visit(state, d, rows))
            } else {
                read_group(task, reuse, |d| visit(state, d, &rows_of(d)))
            }
        })
    }
}

/// Reads `task`'s row group and hands each profile to `visit` with its linked rows;
/// `links_apart`: the selection names a trace or span; `by_stack`: a linked row's sample must
/// have the row's stack (a focus decides on it), not only its labels. Returns how many
/// profiles.
fn read_linked_group(
    task: &Task,
    (links_apart, by_stack): (bool, bool),
    mut visit: impl FnMut(&Decoded, &[LinkedRow]),
) -> Result<usize, ColumnarFileError> {
    let reader = open(&task.path)?;
    let rg = reader.get_row_group(task.group)?;
    let mut b = (*task.base).clone();
    let cols = GroupColumns::read(rg.as_ref(), true)?;
    let mut strings = Interned::default();
    let mut group = LinkedProfiles::with_capacity(cols.runs.len());
    let mut run = 0;
    for r in 0..cols.rows {
        if r > 0 && cols.id(r - 1) != cols.id(r) {
            run += 1;
        }
        if group.pending.len() == run {
            let p = cols.header(run, r, &mut b)?;
            group.start(p, &b);
        }
        if cols.is_placeholder(r) {
            continue;
        }
        let set = group.attribute_set(&cols, r, &mut strings, &mut b)?;
        let row = Row {
            r,
            set,
            links_apart,
            by_stack,
        };
        group.add(&cols, row, &mut b, &task.stacks);
    }
    let dictionary = Arc::new(b.dictionary);
    let n = group.pending.len();
    let mut out = Vec::new();
    for (p, rows) in group.pending.into_iter().zip(group.linked) {
        out.clear();
        out.extend(rows.into_iter().map(|(sample, r, link)| LinkedRow {
            sample,
            link,
            values: cols.row_values(r),
            timestamps: cols.row_timestamps(r),
        }));
        visit(&p.into_decoded(&dictionary), &out);
    }
    Ok(n)
}

/// The profiles of one row group being rebuilt by [`read_linked_group`].
struct LinkedProfiles {
    /// Attribute sets, by their interned (key, value) pairs.
    sets: FxHashMap<Vec<(StrId, StrId)>, u32>,
    /// The current row's attribute set.
    set: Vec<(StrId, StrId)>,
    pending: Vec<Pending>,
    /// Per profile, its linked rows: (sample of its labels, row).
    linked: Vec<Vec<(usize, usize, Link)>>,
    /// The current profile's samples by (attribute set, stack id), and by attribute set
    /// alone (the sample whose labels its linked rows share).
    summed: FxHashMap<(u32, i64), usize>,
    labelled: FxHashMap<u32, usize>,
    /// Whether the current profile's type counts its observations by a value, so that its
    /// rows may be added up ([`counted`]).
    whole: bool,
}

/// A row to add: its index, its attribute set, and whether linked rows stay apart.
struct Row {
    r: usize,
    set: u32,
    links_apart: bool,
    /// The linked row's sample has its stack too (see [`read_linked_group`]).
    by_stack: bool,
}

impl LinkedProfiles {
    fn with_capacity(profiles: usize) -> LinkedProfiles {
        LinkedProfiles {
            sets: FxHashMap::default(),
            set: Vec::new(),
            pending: Vec::with_capacity(profiles),
            linked: Vec::with_capacity(profiles),
            summed: FxHashMap::default(),
            labelled: FxHashMap::default(),
            whole: true,
        }
    }

    /// Starts the next profile, `p` (its header; its strings in `b`).
    fn start(&mut self, p: Pending, b: &DictionaryBuilder) {
        self.whole = counted(&header_profile(&p, b));
        self.pending.push(p);
        self.linked.push(Vec::new());
        self.summed.clear();
        self.labelled.clear();
    }

    /// The id of row `r`'s attribute set (kept in `self.set`), its strings interned.
    fn attribute_set(
        &mut self,
        cols: &GroupColumns,
        r: usize,
        strings: &mut Interned,
        b: &mut DictionaryBuilder,
    ) -> Result<u32, ColumnarFileError> {
        self.set.clear();
        for (k, v) in cols.attrs(r) {
            self.set.push((strings.get(k, b)?, strings.get(v, b)?));
        }
        let next = u32::try_from(self.sets.len()).unwrap_or(u32::MAX);
        Ok(match self.sets.get(self.set.as_slice()) {
            Some(&id) => id,
            None => {
                self.sets.insert(self.set.clone(), next);
                next
            }
        })
    }

    /// Adds `row` to the current profile: a sample of its own when it must stay apart (a
    /// type counted by rows, timestamps, or a linked row when links stay apart), else
    /// added up into the sample of its attribute set and stack; a linked row is noted with
    /// the sample of its labels.
    fn add(
        &mut self,
        cols: &GroupColumns,
        row: Row,
        b: &mut DictionaryBuilder,
        stacks: &FxHashMap<i64, Vec<Frame>>,
    ) {
        let (Some(p), Some(rows)) = (self.pending.last_mut(), self.linked.last_mut()) else {
            return;
        };
        let r = row.r;
        let stack_id = cols.stack.get(r).copied().unwrap_or(0);
        let link = cols.link(r);
        let values = cols.row_values(r);
        let timestamps = cols.row_timestamps(r);
        let set = &self.set;
        let labels = || -> Vec<Label> {
            set.iter()
                .map(|&(key, value)| Label {
                    key,
                    value: LabelValue::Str(value),
                })
                .collect()
        };
        let apart = !self.whole || !timestamps.is_empty() || (row.links_apart && link.is_some());
        let at = if apart {
            p.samples.push(Sample {
                stack: b.stack(stack_id, stacks),
                values: values.to_vec(),
                labels: labels(),
                link,
                timestamps: timestamps.to_vec(),
            });
            p.samples.len() - 1
        } else {
            let at = *self.summed.entry((row.set, stack_id)).or_insert_with(|| {
                p.samples.push(Sample {
                    stack: b.stack(stack_id, stacks),
                    values: vec![0; values.len()],
                    labels: labels(),
                    link: None,
                    timestamps: Vec::new(),
                });
                p.samples.len() - 1
            });
            if let Some(s) = p.samples.get_mut(at) {
                if s.values.len() < values.len() {
                    s.values.resize(values.len(), 0);
                }
                for (sum, v) in s.values.iter_mut().zip(values) {
                    *sum = sum.saturating_add(*v);
                }
            }
            at
        };
        if let Some(link) = link {
            let sample = if row.by_stack {
                at
            } else {
                *self.labelled.entry(row.set).or_insert(at)
            };
            rows.push((sample, r, link));
        }
    }
}

/// The header of `p` (types, period, window) as a profile without samples: what the
/// questions about its types ask ([`super::compact::counted`]).
fn header_profile(p: &Pending, b: &DictionaryBuilder) -> Profile {
    let name = |id: StrId| {
        b.dictionary
            .strings
            .get(id.0 as usize)
            .map_or("", String::as_str)
    };
    let types: Vec<(&str, &str)> = p
        .sample_types
        .iter()
        .map(|t| (name(t.ty), name(t.unit)))
        .collect();
    let period = (name(p.period_type.ty), name(p.period_type.unit));
    ProfileBuilder::new(&types, period, p.period).build(p.time, p.duration)
}
