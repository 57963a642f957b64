//! Profiles rebuilt from the sample rows of a row group: the columns read once per row
//! group (a profile's header once per run of its rows), each row turned into a sample.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opentelemetry::KeyValue;
use otel_bridge::model::{Dictionary, Label, LabelValue, Link, Profile, Sample, StrId, ValueType};
use parquet::data_type::ByteArray;
use parquet::file::reader::{FileReader, RowGroupReader};
use rustc_hash::FxHashMap;

use super::columns::{
    column_index, guarded, list_offsets, open, optional_i64, optional_text, read_column, read_runs,
    required_i64, required_runs, row_count, text, Column,
};
use super::dictionary::{parse_types, DictionaryBuilder, Interned};
use super::live::{live_files, LiveFiles};
use super::stacks::read_stacks;
use crate::columnar::schema::{self, sample_col as sc, Frame};
use crate::error::{ColumnarFileError, FileError};
use crate::reader::Decoded;

/// A profile being rebuilt from its rows: its header, resource and samples (dictionary ids).
pub(in crate::columnar) struct Pending {
    pub(in crate::columnar) id: i64,
    pub(in crate::columnar) resource: Vec<KeyValue>,
    pub(in crate::columnar) sample_types: Vec<ValueType>,
    pub(in crate::columnar) period_type: ValueType,
    pub(in crate::columnar) period: i64,
    pub(in crate::columnar) time: i64,
    pub(in crate::columnar) duration: i64,
    pub(in crate::columnar) samples: Vec<Sample>,
    pub(in crate::columnar) comments: Vec<StrId>,
}

impl Pending {
    pub(in crate::columnar) fn into_decoded(self, dictionary: &Arc<Dictionary>) -> Decoded {
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

/// The profiles of one samples file (or rollup), with their resources; for compaction.
pub(crate) fn read_samples_file(
    path: &Path,
    stacks: &FxHashMap<i64, Vec<Frame>>,
) -> Result<Vec<Decoded>, ColumnarFileError> {
    guarded(|| read_samples(path, stacks))
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
pub(in crate::columnar) struct GroupColumns {
    pub(in crate::columnar) rows: usize,
    profile: Vec<i64>,
    /// Rows of each profile, in order.
    pub(in crate::columnar) runs: Vec<usize>,
    time: Vec<i64>,
    duration: Vec<i64>,
    period: Vec<i64>,
    sample_types: Vec<ByteArray>,
    period_type: Vec<ByteArray>,
    rkeys: Column<ByteArray>,
    rvals: Column<ByteArray>,
    resource_at: Vec<usize>,
    pub(in crate::columnar) values: Column<i64>,
    values_at: Vec<usize>,
    pub(in crate::columnar) akeys: Column<ByteArray>,
    pub(in crate::columnar) avals: Column<ByteArray>,
    attrs_at: Vec<usize>,
    links: Links,
    pub(in crate::columnar) stack: Vec<i64>,
    pub(in crate::columnar) ts: Column<i64>,
    ts_at: Vec<usize>,
}

impl GroupColumns {
    /// Reads row group `rg`; without `links` (a question that needs none), the trace and span
    /// columns are not even read.
    pub(in crate::columnar) fn read(
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
    pub(in crate::columnar) fn id(&self, r: usize) -> i64 {
        self.profile.get(r).copied().unwrap_or(0)
    }

    /// The header of the profile of run `run` (its first row `r`), without samples; its
    /// strings interned in `b`.
    pub(in crate::columnar) fn header(
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

    /// Whether row `r` is the one standing for a profile without samples ([`crate::columnar::write`]).
    pub(in crate::columnar) fn is_placeholder(&self, r: usize) -> bool {
        self.values_at.get(r) == self.values_at.get(r + 1) && self.stack.get(r) == Some(&0)
    }

    /// Row `r`'s attributes, as `(key, value)` values of [`GroupColumns::akeys`] and
    /// [`GroupColumns::avals`].
    pub(in crate::columnar) fn attrs(
        &self,
        r: usize,
    ) -> impl Iterator<Item = (&ByteArray, &ByteArray)> {
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
    pub(in crate::columnar) fn link(&self, r: usize) -> Option<Link> {
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
    pub(in crate::columnar) fn row_values(&self, r: usize) -> &[i64] {
        self.values
            .values
            .get(Self::range(&self.values_at, r))
            .unwrap_or(&[])
    }

    /// Row `r`'s sample timestamps.
    pub(in crate::columnar) fn row_timestamps(&self, r: usize) -> &[i64] {
        self.ts
            .values
            .get(Self::range(&self.ts_at, r))
            .unwrap_or(&[])
    }
}

/// The profiles of one row group, their strings, functions, locations and stacks added to
/// `b`.
pub(super) fn group_profiles(
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
