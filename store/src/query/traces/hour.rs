//! Traces being added up: a worker's of one hour, from the linked rows of its profiles
//! ([`LinkedRow`]) as [`crate::Merger::add`] would add their samples' per-span statistics;
//! then the day's, an hour at a time. In a compact form (a quarter of a million traces an
//! hour on a busy fleet), in shards by trace id: the shards of an hour are added to the
//! day's on all cores, each shard on its own.

use std::collections::hash_map::Entry;
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::{is_first, near_edge, nth_first, open_after, Spec, TraceRow};
use crate::linked::LinkedRow;
use crate::parallel;
use crate::reader::Decoded;
use crate::select::{sample_value, ProfileType, ProfileVerdict, SampleText};

/// No endpoint ([`Acc::endpoint`]).
const NONE: u32 = u32::MAX;

/// One trace: most have one span of one endpoint in an hour, so the others are apart.
#[derive(Debug)]
struct Acc {
    value: f64,
    count: f64,
    span: [u8; 8],
    /// An id of the endpoints of the [`Shards`] it is in, or [`NONE`].
    endpoint: u32,
    more: Option<Box<More>>,
    /// Earliest and latest sample timestamp; `i64::MAX` and `i64::MIN` without any.
    first: i64,
    last: i64,
    /// Earliest start and latest end of the profiles its rows are in.
    profiles: (i64, i64),
}

/// A trace's other spans and endpoints.
#[derive(Debug, Default)]
struct More {
    spans: Vec<[u8; 8]>,
    endpoints: Vec<u32>,
}

impl Acc {
    fn add_span(&mut self, span: [u8; 8]) {
        if self.span == span {
            return;
        }
        let more = self.more.get_or_insert_with(Box::default);
        if !more.spans.contains(&span) {
            more.spans.push(span);
        }
    }

    fn add_endpoint(&mut self, e: u32) {
        if self.endpoint == NONE {
            self.endpoint = e;
        } else if self.endpoint != e {
            let more = self.more.get_or_insert_with(Box::default);
            if !more.endpoints.contains(&e) {
                more.endpoints.push(e);
            }
        }
    }

    fn endpoints(&self) -> impl Iterator<Item = u32> + '_ {
        let more = self
            .more
            .as_ref()
            .map_or(&[][..], |m| m.endpoints.as_slice());
        std::iter::once(self.endpoint)
            .filter(|&e| e != NONE)
            .chain(more.iter().copied())
    }

    /// Renames its endpoints by `remap` (ids of another table).
    fn rename(&mut self, remap: &[u32]) {
        let rename = |e: u32| remap.get(e as usize).copied().unwrap_or(NONE);
        if self.endpoint != NONE {
            self.endpoint = rename(self.endpoint);
        }
        if let Some(more) = &mut self.more {
            for e in &mut more.endpoints {
                *e = rename(*e);
            }
        }
    }

    /// Another part of the same trace (its endpoints of the same table).
    fn absorb(&mut self, o: Acc) {
        self.value += o.value;
        self.count += o.count;
        self.add_span(o.span);
        for e in o.endpoints() {
            self.add_endpoint(e);
        }
        if let Some(more) = o.more {
            for s in more.spans {
                self.add_span(s);
            }
        }
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
        self.profiles = (
            self.profiles.0.min(o.profiles.0),
            self.profiles.1.max(o.profiles.1),
        );
    }

    fn into_row(self, trace_id: [u8; 16], endpoints: &[String]) -> TraceRow {
        let names: Vec<String> = self
            .endpoints()
            .filter_map(|e| endpoints.get(e as usize).cloned())
            .collect();
        let spans = 1 + self.more.as_ref().map_or(0, |m| m.spans.len());
        let stamped = self.first <= self.last;
        let mut row = TraceRow {
            trace_id,
            value: self.value,
            count: self.count,
            spans,
            endpoints: names,
            first: stamped.then_some(self.first),
            last: stamped.then_some(self.last),
            profiles: Some(self.profiles),
        };
        row.endpoints.sort();
        row
    }
}

type Shard = FxHashMap<[u8; 16], Acc>;

/// Traces in shards by trace id, their endpoints as ids of one table.
pub(super) struct Shards {
    shards: Vec<Shard>,
    endpoints: Vec<String>,
    endpoint_ids: FxHashMap<String, u32>,
}

/// The shard of trace `id` of `n`.
fn shard_of(id: &[u8; 16], n: usize) -> usize {
    let mixed = id.iter().fold(0u8, |h, b| h.rotate_left(3) ^ b);
    usize::from(mixed) % n.max(1)
}

impl Shards {
    /// As many shards as cores.
    pub(super) fn new() -> Shards {
        Shards::with_shards(parallel::cores())
    }

    fn with_shards(n: usize) -> Shards {
        Shards {
            shards: (0..n.max(1)).map(|_| Shard::default()).collect(),
            endpoints: Vec::new(),
            endpoint_ids: FxHashMap::default(),
        }
    }

    fn endpoint(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.endpoint_ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.endpoints.len()).unwrap_or(NONE);
        self.endpoints.push(name.to_owned());
        self.endpoint_ids.insert(name.to_owned(), id);
        id
    }

    /// Adds the linked rows of profile `d` that `spec` selects, as type `ty`: each with the
    /// share, value and count that [`crate::Merger::add`] gives a sample.
    pub(super) fn add(&mut self, ty: ProfileType, spec: &Spec, d: &Decoded, rows: &[LinkedRow]) {
        let profile = &d.profile;
        let Some(vi) = ty.value_index(profile, spec.measure) else {
            return;
        };
        let ProfileVerdict::Included { sample_conditions } =
            spec.selector.profile_verdict(&d.resource, profile)
        else {
            return;
        };
        let window = (
            profile.time_nanos,
            profile
                .time_nanos
                .saturating_add(profile.duration_nanos.max(0)),
        );
        let n = self.shards.len();
        // Per sample of the profile that rows name: whether its labels are selected, and
        // its endpoint.
        let mut labels: Vec<Option<(bool, u32)>> = vec![None; profile.samples.len()];
        for row in rows {
            let Some(slot) = labels.get_mut(row.sample) else {
                continue;
            };
            let (selected, endpoint) = match *slot {
                Some(known) => known,
                None => {
                    let Some(sample) = profile.samples.get(row.sample) else {
                        continue;
                    };
                    let selected = spec
                        .selector
                        .labels_hold(profile, sample, &sample_conditions)
                        && crate::merge::focus_keeps_sample(&spec.selector.focus, profile, sample);
                    let endpoint = match sample_value(profile, sample, "span_name") {
                        Some(SampleText::Str(e)) => self.endpoint(e),
                        _ => NONE,
                    };
                    *slot = Some((selected, endpoint));
                    (selected, endpoint)
                }
            };
            if !selected {
                continue;
            }
            let share = spec.selector.link_share(Some(row.link), row.timestamps);
            if share <= 0.0 {
                continue;
            }
            let value = row.values.get(vi.value).copied().unwrap_or(0) as f64 * share;
            let count = match vi.count {
                Some(c) => row.values.get(c).copied().unwrap_or(0) as f64 * share,
                None => 1.0,
            };
            if value == 0.0 && count == 0.0 {
                continue;
            }
            let id = row.link.trace_id;
            if id == [0; 16] {
                // A span sent without its trace (see `otel_bridge::otlp::EncodeOptions`):
                // no trace to list.
                continue;
            }
            let Some(shard) = self.shards.get_mut(shard_of(&id, n)) else {
                continue;
            };
            if shard.capacity() == 0 {
                shard.reserve(1 << 17);
            }
            let acc = shard.entry(id).or_insert_with(|| Acc {
                value: 0.0,
                count: 0.0,
                span: row.link.span_id,
                endpoint,
                more: None,
                first: i64::MAX,
                last: i64::MIN,
                profiles: window,
            });
            acc.value += value;
            acc.count += count;
            acc.add_span(row.link.span_id);
            if endpoint != NONE {
                acc.add_endpoint(endpoint);
            }
            for &t in row.timestamps {
                acc.first = acc.first.min(t);
                acc.last = acc.last.max(t);
            }
            acc.profiles = (acc.profiles.0.min(window.0), acc.profiles.1.max(window.1));
        }
    }

    /// Adds the workers' traces of one `hour` (`None`: a group of files, all kept) to these,
    /// the day's, shard by shard on all cores: of the hour, the `limit` with the most time
    /// and those near its edges ([`near_edge`]); then, with `prune`, drops those that can be
    /// among the first no more. Returns how many of the hour's traces were not met before.
    pub(super) fn add_hour(
        &mut self,
        workers: Vec<Shards>,
        hour: Option<i64>,
        limit: usize,
        prune: bool,
    ) -> usize {
        let remaps: Vec<Vec<u32>> = workers
            .iter()
            .map(|w| w.endpoints.iter().map(|e| self.endpoint(e)).collect())
            .collect();
        let mut jobs: Vec<Job> = self
            .shards
            .iter_mut()
            .map(|day| Job {
                day: std::mem::take(day),
                parts: Vec::new(),
                new: 0,
            })
            .collect();
        for (w, remap) in workers.into_iter().zip(&remaps) {
            for (job, part) in jobs.iter_mut().zip(w.shards) {
                job.parts.push((part, remap));
            }
        }
        let jobs: Vec<Mutex<Job>> = jobs.into_iter().map(Mutex::new).collect();
        parallel::for_each(
            &jobs,
            || (),
            |_, job| {
                if let Ok(mut job) = job.lock() {
                    job.run(hour, limit, prune);
                }
            },
        );
        let mut new = 0;
        for (day, job) in self.shards.iter_mut().zip(jobs) {
            let job = job.into_inner().unwrap_or_else(|e| e.into_inner());
            *day = job.day;
            new += job.new;
        }
        new
    }

    /// The `limit` traces with the most time (in no order).
    pub(super) fn into_rows(self, limit: usize) -> Vec<TraceRow> {
        let mut all: Vec<([u8; 16], Acc)> = self.shards.into_iter().flatten().collect();
        if all.len() > limit {
            let keys = all.iter().map(|(id, a)| (a.value, *id)).collect();
            if let Some(nth) = nth_first(keys, limit) {
                all.retain(|(id, a)| is_first(a.value, id, nth));
            }
        }
        all.into_iter()
            .map(|(id, a)| a.into_row(id, &self.endpoints))
            .collect()
    }
}

/// One shard of the day and the workers' parts of it for one hour (with the renaming of
/// their endpoints into the day's).
struct Job<'a> {
    day: Shard,
    parts: Vec<(Shard, &'a [u32])>,
    new: usize,
}

impl Job<'_> {
    fn run(&mut self, hour: Option<i64>, limit: usize, prune: bool) {
        let mut traces = Shard::default();
        for (part, remap) in std::mem::take(&mut self.parts) {
            if traces.is_empty() {
                traces = part;
                traces.values_mut().for_each(|a| a.rename(remap));
                continue;
            }
            traces.reserve(part.len());
            for (id, mut acc) in part {
                acc.rename(remap);
                match traces.entry(id) {
                    Entry::Occupied(mut o) => o.get_mut().absorb(acc),
                    Entry::Vacant(v) => {
                        v.insert(acc);
                    }
                }
            }
        }
        let met = traces.len();
        if let Some(hour) = hour {
            let keys = traces.iter().map(|(id, a)| (a.value, *id)).collect();
            if let Some(nth) = nth_first(keys, limit) {
                traces.retain(|id, a| is_first(a.value, id, nth) || near_edge(a.profiles, hour));
            }
        }
        let mut before = 0;
        self.day.reserve(traces.len());
        for (id, acc) in traces {
            match self.day.entry(id) {
                Entry::Occupied(mut o) => {
                    // Met in an hour before: counted there already.
                    before += 1;
                    o.get_mut().absorb(acc);
                }
                Entry::Vacant(v) => {
                    v.insert(acc);
                }
            }
        }
        self.new = met - before;
        if let (Some(hour), true) = (hour, prune) {
            // What no later hour can add to, and is not among the first now, never will be.
            let keys = self.day.iter().map(|(id, a)| (a.value, *id)).collect();
            if let Some(nth) = nth_first(keys, limit) {
                self.day
                    .retain(|id, a| is_first(a.value, id, nth) || open_after(a.profiles.1, hour));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columnar::schema::HOUR;

    const MINUTE: i64 = 60_000_000_000;

    fn acc(value: f64, profiles: (i64, i64)) -> Acc {
        Acc {
            value,
            count: value,
            span: [1; 8],
            endpoint: NONE,
            more: None,
            first: i64::MAX,
            last: i64::MIN,
            profiles,
        }
    }

    /// One worker's `n` shards holding `traces`.
    fn worker(n: usize, traces: Vec<(u8, Acc)>) -> Shards {
        let mut w = Shards::with_shards(n);
        let n = w.shards.len();
        for (id, a) in traces {
            let id = [id; 16];
            w.shards[shard_of(&id, n)].insert(id, a);
        }
        w
    }

    fn ids(day: &Shards) -> Vec<u8> {
        let mut ids: Vec<u8> = day
            .shards
            .iter()
            .flat_map(|s| s.keys())
            .map(|t| t[0])
            .collect();
        ids.sort();
        ids
    }

    #[test]
    fn an_hour_keeps_its_first_traces_and_those_near_its_edges() {
        let hour = 10 * HOUR;
        let inside = (hour + 20 * MINUTE, hour + 21 * MINUTE);
        let traces = |n| {
            worker(
                n,
                vec![
                    (1, acc(5.0, inside)),
                    (2, acc(9.0, inside)),
                    (3, acc(1.0, inside)),
                    // Small, but in a profile that reaches the next hour, or starts the hour.
                    (4, acc(0.5, (hour + 59 * MINUTE, hour + 61 * MINUTE))),
                    (5, acc(0.5, (hour, hour + MINUTE))),
                ],
            )
        };
        let kept = |n: usize, hour: Option<i64>, limit: usize, prune: bool| {
            let mut day = Shards::with_shards(n);
            let new = day.add_hour(vec![traces(n)], hour, limit, prune);
            assert_eq!(new, 5);
            ids(&day)
        };
        assert_eq!(kept(1, Some(hour), 2, false), [1, 2, 4, 5]);
        assert_eq!(kept(1, Some(hour), 0, false), [4, 5]);
        assert_eq!(kept(1, None, 2, false), [1, 2, 3, 4, 5]);
        assert_eq!(kept(1, Some(hour), 10, false), [1, 2, 3, 4, 5]);
        // Pruned: 5 cannot grow any more, 4 may in the next hour.
        assert_eq!(kept(1, Some(hour), 2, true), [1, 2, 4]);
        // In shards, each shard's first are kept: at least the hour's first.
        for n in [2, 3, 5] {
            let some = kept(n, Some(hour), 2, false);
            assert!(
                some.starts_with(&[1, 2]) && some.ends_with(&[4, 5]),
                "{some:?}"
            );
            let pruned = kept(n, Some(hour), 2, true);
            assert!(
                pruned.starts_with(&[1, 2]) && pruned.contains(&4),
                "{pruned:?}"
            );
        }
    }

    #[test]
    fn a_trace_met_by_two_workers_and_two_hours_is_one_with_every_part() {
        let mut one = worker(3, vec![]);
        let mut two = worker(3, vec![]);
        let (a, b) = (one.endpoint("GET /a"), two.endpoint("GET /b"));
        let _ = two.endpoint("GET /a");
        let n = one.shards.len();
        let id = [7u8; 16];
        let mut x = acc(2.0, (0, 10));
        x.endpoint = a;
        one.shards[shard_of(&id, n)].insert(id, x);
        let mut y = acc(3.0, (5, 20));
        y.span = [2; 8];
        y.endpoint = b;
        y.first = 6;
        y.last = 9;
        two.shards[shard_of(&id, n)].insert(id, y);
        let mut day = Shards::with_shards(3);
        assert_eq!(day.add_hour(vec![one, two], None, 1, false), 1);
        let mut later = worker(3, vec![(7, acc(1.0, (30, 40)))]);
        later.shards[shard_of(&id, n)]
            .get_mut(&id)
            .unwrap()
            .add_endpoint(0);
        later.endpoint("GET /c");
        assert_eq!(day.add_hour(vec![later], None, 1, false), 0);
        let rows = day.into_rows(1);
        let [row] = rows.as_slice() else {
            panic!("one trace, got {rows:?}");
        };
        assert_eq!(row.value, 6.0);
        assert_eq!(row.spans, 2);
        assert_eq!(row.endpoints, ["GET /a", "GET /b", "GET /c"]);
        assert_eq!((row.first, row.last), (Some(6), Some(9)));
        assert_eq!(row.profiles, Some((0, 40)));
    }
}
