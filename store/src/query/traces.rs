//! The traces with the most time in a selection: each with its time, samples, spans,
//! endpoints and window, most time first (the web UI's Traces view, `otelprof traces`).
//!
//! A day can hold millions of traces (a fifth of the samples of a busy fleet are in one),
//! and only the first rows are shown. The question is therefore answered an hour at a time
//! ([`StoreSource::scan_by_hour`]): each hour's traces are added up, and of them only the
//! `limit` with the most time are kept, with every trace that may go on in another hour (one
//! with a sample in a profile that reaches within [`EDGE`] of the hour's start or end). A
//! trace that lies wholly inside an hour and is not among the hour's first `limit` cannot
//! be among the day's: `limit` others in that hour have more time already. So the rows are
//! those of adding up every trace of the selection, and memory holds one hour's traces, not
//! the day's. The one exception: a trace that runs longer than [`EDGE`] across an hour's
//! start or end may lose the time of an hour where it was not among the first (said in
//! [`Traces::total`]'s doc). Profiles read from files rather than the columnar store are one
//! group, all kept.

use otelprof_profile::Link;
use rustc_hash::FxHashMap;

use crate::columnar::schema::HOUR;
use crate::error::Error;
use crate::merge::{Merged, Merger, SpanStats};
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
    /// Their ids, while the trace is being added up (an hour's spans come from several
    /// workers, which may each have met a span).
    span_ids: Vec<[u8; 8]>,
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
        otelprof_profile::model::hex(&self.trace_id)
    }

    fn add_span(&mut self, span_id: [u8; 8], s: &SpanStats) {
        self.value += s.value;
        self.count += s.count;
        if !self.span_ids.contains(&span_id) {
            self.span_ids.push(span_id);
            self.spans += 1;
        }
        for e in &s.endpoints {
            if !self.endpoints.contains(e) {
                self.endpoints.push(e.clone());
            }
        }
        self.first = min_some(self.first, s.first);
        self.last = max_some(self.last, s.last);
        self.profiles = match (self.profiles, s.window) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
    }

    fn absorb(&mut self, o: TraceRow) {
        self.value += o.value;
        self.count += o.count;
        for id in o.span_ids {
            if !self.span_ids.contains(&id) {
                self.span_ids.push(id);
                self.spans += 1;
            }
        }
        for e in o.endpoints {
            if !self.endpoints.contains(&e) {
                self.endpoints.push(e);
            }
        }
        self.first = min_some(self.first, o.first);
        self.last = max_some(self.last, o.last);
        self.profiles = match (self.profiles, o.profiles) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
    }
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

fn max_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// The answer.
#[derive(Debug)]
pub struct Traces {
    /// The merge of the selection (its totals, profiles, instances and window), without
    /// per-span statistics.
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
    traces: FxHashMap<[u8; 16], TraceRow>,
    total: usize,
}

/// The `limit` traces with the most time that `spec` selects from `source` (the spec's
/// per-span statistics are gathered whether it asks or not).
pub fn top_traces(source: &StoreSource, spec: Spec, limit: usize) -> Result<Traces, Error> {
    let spec = spec.spans();
    let make = || super::mergers_of(&spec);
    let mut kept: Vec<Kept> = make()
        .into_iter()
        .map(|(ty, merger)| Kept {
            ty,
            merger,
            traces: FxHashMap::default(),
            total: 0,
        })
        .collect();
    source.scan_by_hour(
        make,
        |state, d| {
            for (_, m) in state.iter_mut() {
                m.add(&d.resource, &d.profile);
            }
        },
        |hour, states| {
            // Per type, the hour's traces from every worker's spans (a span met by two
            // workers is one span of its trace: [`TraceRow::add_span`]).
            let mut hour_traces: Vec<FxHashMap<[u8; 16], TraceRow>> =
                kept.iter().map(|_| FxHashMap::default()).collect();
            for state in states {
                for ((k, traces), (_, mut m)) in kept.iter_mut().zip(&mut hour_traces).zip(state) {
                    add_spans(traces, m.take_spans());
                    k.merger.absorb(m);
                }
            }
            for (k, traces) in kept.iter_mut().zip(hour_traces) {
                let traces: Vec<TraceRow> = traces.into_values().collect();
                k.total += traces.len();
                for row in keep(traces, hour, limit) {
                    match k.traces.entry(row.trace_id) {
                        std::collections::hash_map::Entry::Occupied(mut o) => {
                            // Met in an hour before: counted there already.
                            k.total = k.total.saturating_sub(1);
                            o.get_mut().absorb(row);
                        }
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(row);
                        }
                    }
                }
            }
        },
    )?;
    // The type as a merge picks it ([`super::merge`]).
    let pick = super::pick_index(kept.iter().map(|k| (k.ty, k.merger.profiles_seen())));
    let Some(k) = kept.into_iter().nth(pick) else {
        return Err(Error::NothingReadable);
    };
    let mut rows: Vec<TraceRow> = k.traces.into_values().collect();
    sort(&mut rows);
    rows.truncate(limit);
    for r in &mut rows {
        r.endpoints.sort();
        r.span_ids = Vec::new();
    }
    let (merged, ty, total) = (k.merger.finish(), k.ty, k.total);
    Ok(Traces {
        merged,
        ty,
        rows,
        total,
    })
}

/// Most time first; equal times by trace id, so that the order never depends on hashing.
fn sort(rows: &mut [TraceRow]) {
    rows.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    });
}

/// Adds `spans` to the traces they are in.
fn add_spans(traces: &mut FxHashMap<[u8; 16], TraceRow>, spans: FxHashMap<Link, SpanStats>) {
    for (link, s) in &spans {
        traces
            .entry(link.trace_id)
            .or_insert_with(|| TraceRow {
                trace_id: link.trace_id,
                ..TraceRow::default()
            })
            .add_span(link.span_id, s);
    }
}

/// What an hour's traces leave for the answer: the `limit` with the most time, and every
/// trace whose profiles come within [`EDGE`] of the hour's start or end. A group of files
/// (`hour` `None`) keeps everything.
fn keep(mut traces: Vec<TraceRow>, hour: Option<i64>, limit: usize) -> Vec<TraceRow> {
    let Some(hour) = hour else {
        return traces;
    };
    if traces.len() <= limit {
        return traces;
    }
    // The first `limit` in front (in no order; the answer is sorted at the end).
    traces.select_nth_unstable_by(limit, |a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.trace_id.cmp(&b.trace_id))
    });
    let mut edge = traces.split_off(limit);
    edge.retain(|t| {
        t.profiles.is_none_or(|(start, end)| {
            start < hour.saturating_add(EDGE) || end > hour.saturating_add(HOUR - EDGE)
        })
    });
    traces.extend(edge);
    traces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u8, value: f64, profiles: (i64, i64)) -> TraceRow {
        TraceRow {
            trace_id: [id; 16],
            value,
            count: value,
            spans: 1,
            profiles: Some(profiles),
            ..TraceRow::default()
        }
    }

    #[test]
    fn an_hour_keeps_its_first_traces_and_those_near_its_edges() {
        let hour = 10 * HOUR;
        let minute = 60_000_000_000;
        let inside = (hour + 20 * minute, hour + 21 * minute);
        let traces = vec![
            row(1, 5.0, inside),
            row(2, 9.0, inside),
            row(3, 1.0, inside),
            // Small, but in a profile that reaches the next hour, or starts the hour.
            row(4, 0.5, (hour + 59 * minute, hour + 61 * minute)),
            row(5, 0.5, (hour, hour + minute)),
        ];
        let mut kept: Vec<u8> = keep(traces.clone(), Some(hour), 2)
            .iter()
            .map(|t| t.trace_id[0])
            .collect();
        kept.sort();
        assert_eq!(kept, [1, 2, 4, 5]);
        assert_eq!(keep(traces.clone(), None, 2).len(), 5);
        assert_eq!(keep(traces, Some(hour), 10).len(), 5);
    }

    #[test]
    fn rows_sort_by_time_then_trace_id() {
        let mut rows = vec![
            row(3, 1.0, (0, 1)),
            row(1, 2.0, (0, 1)),
            row(2, 1.0, (0, 1)),
        ];
        sort(&mut rows);
        let order: Vec<u8> = rows.iter().map(|t| t.trace_id[0]).collect();
        assert_eq!(order, [1, 2, 3]);
    }
}
