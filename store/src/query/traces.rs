//! The traces with the most time in a selection: each with its time, samples, spans,
//! endpoints and window, most time first (the web UI's Traces view, `otelprof traces`).
//!
//! A day can hold millions of traces (a fifth of the samples of a busy fleet are in one),
//! and only the first rows are shown. The question is therefore answered an hour at a time
//! ([`StoreSource::scan_linked_by_hour`]): each hour's traces are added up from the linked
//! rows of its profiles ([`crate::linked`]), and of them only the `limit` with the most time
//! are kept, with every trace that may go on in another hour (one with a sample in a profile
//! that reaches within [`EDGE`] of the hour's start or end). A trace that lies wholly inside
//! an hour and is not among the hour's first `limit` cannot be among the day's: `limit`
//! others in that hour have more time already. After each hour, the traces kept that no
//! later hour can add to and that are not among the first are dropped. So the rows are those
//! of adding up every trace of the selection, and memory holds one hour's traces and the
//! day's edge, not the day's. The one exception: a trace that runs longer than [`EDGE`]
//! across an hour's start or end may lose the time of an hour where it was not among the
//! first (said in [`Traces::total`]'s doc). Profiles read from files rather than the columnar
//! store are one group, all kept.
//!
//! Traces are kept in shards by trace id ([`hour`]), so that the work of each hour after its
//! rows are read (adding up the workers' traces, keeping, pruning) runs on all cores too.

mod hour;

use hour::Shards;

use crate::columnar::schema::HOUR;
use crate::error::Error;
use crate::merge::{Merged, Merger};
use crate::select::ProfileType;
use crate::stored::StoreSource;

use super::Spec;

/// How close to an hour's start or end a trace's profiles must come for the trace to be
/// kept whatever its time in that hour (it may go on in the next or the previous one).
pub const EDGE: i64 = 5 * 60 * 1_000_000_000;

/// One trace and what its selected samples add up to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceRow {
    pub trace_id: [u8; 16],
    pub value: f64,
    pub count: f64,
    /// Spans with samples.
    pub spans: usize,
    /// Endpoints its samples carried, sorted.
    pub endpoints: Vec<String>,
    /// Earliest and latest sample timestamp, when its samples had timestamps.
    pub first: Option<i64>,
    pub last: Option<i64>,
    /// Earliest start and latest end of the profiles its samples are in: the time range that
    /// selects every sample of it (and no sample of it is outside).
    pub profiles: Option<(i64, i64)>,
}

impl TraceRow {
    pub fn trace_id_hex(&self) -> String {
        otel_bridge::model::hex(&self.trace_id)
    }
}

/// The answer.
#[derive(Debug)]
pub struct Traces {
    /// The merge of the selection (its totals, profiles, instances and window), without
    /// per-span statistics, and without the frames of its stacks (not read).
    pub merged: Merged,
    pub ty: ProfileType,
    /// The traces with the most time, at most `limit`, most time first.
    pub rows: Vec<TraceRow>,
    /// How many traces have selected samples. A trace that runs longer than [`EDGE`] across
    /// an hour's start or end, and is not among the first of one of its hours, counts once
    /// per hour.
    pub total: usize,
}

/// Per type: the day's merge so far and the traces kept.
struct Kept {
    ty: ProfileType,
    merger: Merger,
    day: Shards,
    total: usize,
}

/// The `limit` traces with the most time that `spec` selects from `source` (per-span
/// statistics are not gathered: the traces are added up from the linked rows).
pub fn top_traces(source: &StoreSource, spec: Spec, limit: usize) -> Result<Traces, Error> {
    let mut spec = spec;
    spec.spans = false;
    let make = || {
        super::mergers_of(&spec)
            .into_iter()
            .map(|(ty, merger)| (ty, merger, Shards::new()))
            .collect::<Vec<_>>()
    };
    let mut kept: Vec<Kept> = make()
        .into_iter()
        .map(|(ty, merger, day)| Kept {
            ty,
            merger,
            day,
            total: 0,
        })
        .collect();
    // A trace dropped after its hour must not come back: only the columnar hours are
    // pruned, and only when no files are read after them.
    let prune = !source.reads_files();
    source.scan_linked_by_hour(
        spec.selector.names_links(),
        make,
        |state, d, rows| {
            for (ty, merger, traces) in state.iter_mut() {
                merger.add(&d.resource, &d.profile);
                traces.add(*ty, &spec, d, rows);
            }
        },
        |hour, states| {
            let mut parts: Vec<Vec<Shards>> = kept.iter().map(|_| Vec::new()).collect();
            for state in states {
                for ((k, part), (_, m, traces)) in kept.iter_mut().zip(&mut parts).zip(state) {
                    k.merger.absorb(m);
                    part.push(traces);
                }
            }
            for (k, part) in kept.iter_mut().zip(parts) {
                k.total += k.day.add_hour(part, hour, limit, prune);
            }
        },
    )?;
    // The type as a merge picks it ([`super::merge`]).
    let pick = super::pick_index(kept.iter().map(|k| (k.ty, k.merger.profiles_seen())));
    let Some(k) = kept.into_iter().nth(pick) else {
        return Err(Error::NothingReadable);
    };
    let mut rows = k.day.into_rows(limit);
    sort(&mut rows);
    let (merged, ty, total) = (k.merger.finish(), k.ty, k.total);
    Ok(Traces {
        merged,
        ty,
        rows,
        total,
    })
}

/// Of traces `(time, id)`, the last of the first `limit` (most time first, equal times by
/// id: [`sort`]'s order); `None` when there are no more than `limit`.
fn nth_first(mut keys: Vec<(f64, [u8; 16])>, limit: usize) -> Option<(f64, [u8; 16])> {
    if keys.len() <= limit {
        return None;
    }
    let Some(n) = limit.checked_sub(1) else {
        // Nothing is among the first none.
        return Some((f64::INFINITY, [0; 16]));
    };
    keys.select_nth_unstable_by(n, |a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    keys.get(n).copied()
}

/// Whether the trace `id` with time `value` comes no later than `nth` in [`sort`]'s order.
fn is_first(value: f64, id: &[u8; 16], nth: (f64, [u8; 16])) -> bool {
    value.total_cmp(&nth.0).then_with(|| nth.1.cmp(id)).is_ge()
}

/// Whether profiles spanning `(start, end)` come within [`EDGE`] of `hour`'s start or end.
fn near_edge((start, end): (i64, i64), hour: i64) -> bool {
    start < hour.saturating_add(EDGE) || end > hour.saturating_add(HOUR - EDGE)
}

/// Whether profiles that end at `end` may have a trace that goes on after `hour`.
fn open_after(end: i64, hour: i64) -> bool {
    end > hour.saturating_add(HOUR - EDGE)
}

/// Most time first; equal times by trace id, so that the order never depends on hashing.
fn sort(rows: &mut [TraceRow]) {
    rows.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u8, value: f64) -> TraceRow {
        TraceRow {
            trace_id: [id; 16],
            value,
            count: value,
            spans: 1,
            profiles: Some((0, 1)),
            ..TraceRow::default()
        }
    }

    #[test]
    fn rows_sort_by_time_then_trace_id() {
        let mut rows = vec![row(3, 1.0), row(1, 2.0), row(2, 1.0)];
        sort(&mut rows);
        let order: Vec<u8> = rows.iter().map(|t| t.trace_id[0]).collect();
        assert_eq!(order, [1, 2, 3]);
    }

    #[test]
    fn the_first_are_found_in_sort_order() {
        let keys = vec![(1.0, [3; 16]), (2.0, [1; 16]), (1.0, [2; 16])];
        let nth = nth_first(keys.clone(), 2).unwrap();
        assert_eq!(nth, (1.0, [2; 16]));
        assert!(is_first(1.0, &[2; 16], nth));
        assert!(!is_first(1.0, &[3; 16], nth));
        assert!(nth_first(keys.clone(), 3).is_none());
        assert!(!is_first(9.0, &[0; 16], nth_first(keys, 0).unwrap()));
    }
}
