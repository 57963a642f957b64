//! The timeline: what a selection adds up to over time, stacked by a key (`span_name`,
//! `service.version`, …): one merge per time bucket, all made in one pass over the files. A
//! bucket of live-heap snapshots holds the latest snapshot of each instance in it
//! ([`crate::merge::Merger`]).
//!
//! Compacted hours hold their series with timestamps by the tick ([`SERIES_TICK`]): they
//! answer buckets of whole ticks, starting on one, exactly. Buckets finer than a tick (a window
//! of minutes) and time ranges too short for whole ticks are answered from the rows.

use std::collections::BTreeMap;

use super::{merge, Spec};
use crate::columnar::schema::SERIES_TICK;
use crate::error::Error;
use crate::merge::{Merged, Merger};
use crate::reader::Profiles as _;
use crate::select::{Measure, ProfileType, Selector};
use crate::stored::StoreSource;

/// A selection's value over time, stacked by a key.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    pub ty: ProfileType,
    pub unit: String,
    /// Where each bucket starts, then where the last one ends: one more than there are
    /// buckets. Empty when nothing was selected.
    pub times: Vec<i64>,
    /// Each value of the key with what it adds up to in each bucket, the largest sum first
    /// (values left out where they add up to nothing).
    pub series: Vec<(String, Vec<f64>)>,
}

/// The timeline of `spec`, stacked by the key `by`, in at most `buckets` buckets over the time
/// the selection covers (within the selector's range). `open` opens the store: once, or twice
/// when the buckets turn out finer than the series can answer.
pub fn timeline<E: From<Error>>(
    open: impl Fn() -> Result<StoreSource, E>,
    spec: Spec,
    by: &str,
    buckets: usize,
) -> Result<Timeline, E> {
    let (selector, measure) = (spec.selector.clone(), spec.measure);
    let plan = plan(&open, spec, Some(by), buckets)?;
    let merged = if plan.bounds.is_empty() {
        Vec::new()
    } else if plan.answers {
        merge_buckets(
            &plan.source,
            &plan.bounds,
            plan.ty,
            &selector,
            measure,
            Some(by),
        )?
    } else {
        let rows = open()?.narrow_to(&selector);
        merge_buckets(&rows, &plan.bounds, plan.ty, &selector, measure, Some(by))?
    };
    let series = stack(merged, plan.bounds.len());
    Ok(Timeline {
        ty: plan.ty,
        unit: plan.unit,
        times: plan.times,
        series,
    })
}

/// Where the buckets of a timeline of a selection fall, and what answers them.
pub(crate) struct Plan {
    pub ty: ProfileType,
    pub unit: String,
    /// Each bucket's start and end; empty when nothing was selected.
    pub bounds: Vec<(i64, i64)>,
    /// Where each bucket starts, then where the last one ends ([`Timeline::times`]).
    pub times: Vec<i64>,
    /// What the whole selection was merged from: the rows of a range too short for ticks,
    /// else the series (grouped by the `by` asked for) where the store has them.
    pub source: StoreSource,
    /// Whether `source` answers the buckets: they are whole ticks, or it is the rows.
    pub answers: bool,
    /// Whether `source` is the rows.
    pub rows: bool,
}

/// The buckets of a timeline of `spec` (at most `buckets`, whole ticks when the series can
/// answer them, see [`buckets_over`]), from one merge of the whole selection (from the series
/// grouped by `by` where they can answer). Every answer drawn under the timeline ([`timeline`],
/// [`super::trend`]) buckets time by this plan, so their buckets line up.
pub(crate) fn plan<E: From<Error>>(
    open: &impl Fn() -> Result<StoreSource, E>,
    spec: Spec,
    by: Option<&str>,
    buckets: usize,
) -> Result<Plan, E> {
    let selector = spec.selector.clone();
    let short = too_short_for_ticks(&selector, buckets);
    let source = open()?.narrow_to(&selector);
    let source = if short { source } else { source.use_series(by) };
    let (whole, ty) = merge(&source, spec)?;
    // Snapshots: every one reached, not only the latest kept (each bucket keeps its own latest
    // per instance: a line of live bytes over time, never a sum of snapshots).
    let Some((start, end)) = whole
        .snapshots_window
        // A bucket ends before its end: the last snapshot, an instant, must be inside one.
        .map(|(start, end)| (start, end.saturating_add(1)))
        .or(whole.window)
    else {
        return Ok(Plan {
            ty,
            unit: whole.unit,
            bounds: Vec::new(),
            times: Vec::new(),
            source,
            answers: false,
            rows: short,
        });
    };
    let from = selector.from.map_or(start, |f| f.max(start));
    let to = selector.to.map_or(end, |t| t.min(end)).max(from + 1);
    let (bounds, whole_ticks) = buckets_over(from, to, buckets, !short);
    let times = bounds
        .iter()
        .map(|b| b.0)
        .chain(std::iter::once(to))
        .collect();
    Ok(Plan {
        ty,
        unit: whole.unit,
        bounds,
        times,
        source,
        answers: whole_ticks || short,
        rows: short,
    })
}

/// Whether the selector's time range is shorter than `buckets` ticks: then the buckets cannot
/// be whole ticks, and the rows answer.
fn too_short_for_ticks(selector: &Selector, buckets: usize) -> bool {
    match (selector.from, selector.to) {
        (Some(a), Some(b)) => {
            i128::from(b) - i128::from(a) < buckets as i128 * i128::from(SERIES_TICK)
        }
        _ => false,
    }
}

/// Contiguous buckets over `[from, to]`: `buckets` of equal length (the first and last may be
/// cut short), or, when `ticks` allows and they would be a tick or longer, fewer of whole
/// ticks starting on one, that still cover the window. Returns the bounds and whether they
/// are whole ticks.
fn buckets_over(from: i64, to: i64, buckets: usize, ticks: bool) -> (Vec<(i64, i64)>, bool) {
    let tick = i128::from(SERIES_TICK);
    let mut count = buckets.max(1);
    let mut step = ((i128::from(to) - i128::from(from)) / count as i128).max(1);
    let whole_ticks = ticks && step >= tick;
    let first = if whole_ticks {
        step = (step + tick - 1) / tick * tick;
        let first = from.div_euclid(SERIES_TICK) * SERIES_TICK;
        // Longer buckets: fewer of them cover the window.
        let span = i128::from(to) - i128::from(first);
        count = usize::try_from((span + step - 1) / step)
            .unwrap_or(count)
            .clamp(1, count);
        first
    } else {
        from
    };
    let at = |k: i128| {
        i64::try_from(i128::from(first) + step * k)
            .unwrap_or(to)
            .clamp(from, to)
    };
    let bounds = (0..count as i128)
        .map(|k| {
            (
                at(k),
                if k + 1 == count as i128 {
                    to
                } else {
                    at(k + 1)
                },
            )
        })
        .collect();
    (bounds, whole_ticks)
}

/// One merge per bucket, grouped by `by`, in one pass over `source`: a profile is added to
/// the buckets its time overlaps, each of which keeps the samples with timestamps within it
/// and, of the samples without, the part of their value that its overlap is of the profile's
/// time ([`Merger::add_part`]).
///
/// Not the whole value: the agent's samples carry no timestamps unless asked, and profiles
/// (10 s to 60 s) are not aligned with buckets, so a bucket that holds a profile's boundary
/// overlaps two profiles. Counting each whole drew a steady load with a spike at every
/// period boundary (and made the buckets add up to more than the selection).
pub(crate) fn merge_buckets(
    source: &StoreSource,
    bounds: &[(i64, i64)],
    ty: ProfileType,
    selector: &Selector,
    measure: Measure,
    by: Option<&str>,
) -> Result<Vec<Option<Merged>>, Error> {
    let make = || -> Vec<Merger> {
        bounds
            .iter()
            .map(|&(a, b)| {
                let mut cut = selector.clone();
                cut.from = Some(a);
                cut.to = Some(b);
                Merger::new(ty, cut, by).measure(measure).lines(false)
            })
            .collect()
    };
    let states = source.scan(make, |mergers, d| {
        let p0 = d.profile.time_nanos;
        let p1 = p0.saturating_add(d.profile.duration_nanos.max(0));
        for (m, &(a, b)) in mergers.iter_mut().zip(bounds) {
            if p1 >= a && p0 < b {
                m.add_part(&d.resource, &d.profile, overlap(p0, p1, a, b));
            }
        }
    })?;
    let mut merged: Vec<Option<Merger>> = bounds.iter().map(|_| None).collect();
    for state in states {
        for (slot, m) in merged.iter_mut().zip(state) {
            match slot {
                Some(s) => s.absorb(m),
                None => *slot = Some(m),
            }
        }
    }
    Ok(merged.into_iter().map(|m| m.map(Merger::finish)).collect())
}

/// The part of a profile's time `[p0, p1)` inside the bucket `[a, b)`: 1 for an instant in it.
fn overlap(p0: i64, p1: i64, a: i64, b: i64) -> f64 {
    if p1 <= p0 {
        return if a <= p0 && p0 < b { 1.0 } else { 0.0 };
    }
    let inside = (i128::from(p1.min(b)) - i128::from(p0.max(a))).max(0);
    inside as f64 / (i128::from(p1) - i128::from(p0)) as f64
}

/// The buckets' merges as one series per group: what each group adds up to in each of the
/// `buckets` buckets, the largest sum first (groups of equal sums by name).
fn stack(merged: Vec<Option<Merged>>, buckets: usize) -> Vec<(String, Vec<f64>)> {
    let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (k, m) in merged.into_iter().enumerate() {
        let Some(m) = m else { continue };
        let mut per_group = vec![0.0; m.groups.len()];
        for s in &m.stacks {
            if let Some(v) = per_group.get_mut(s.group as usize) {
                *v += s.value;
            }
        }
        for (g, v) in m.groups.iter().zip(per_group) {
            if v != 0.0 {
                if let Some(slot) = series
                    .entry(g.clone())
                    .or_insert_with(|| vec![0.0; buckets])
                    .get_mut(k)
                {
                    *slot += v;
                }
            }
        }
    }
    let mut list: Vec<(String, Vec<f64>)> = series.into_iter().collect();
    list.sort_by(|a, b| {
        let sum = |v: &[f64]| v.iter().sum::<f64>();
        sum(&b.1).total_cmp(&sum(&a.1))
    });
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;

    const TICK: i64 = SERIES_TICK;

    fn contiguous(b: &[(i64, i64)], from: i64, to: i64) {
        assert_eq!(b.first().map(|b| b.0), Some(from), "{b:?}");
        assert_eq!(b.last().map(|b| b.1), Some(to), "{b:?}");
        assert!(b.windows(2).all(|w| w[0].1 == w[1].0), "{b:?}");
        assert!(b.iter().all(|&(a, z)| a < z), "{b:?}");
    }

    #[test]
    fn long_windows_get_buckets_of_whole_ticks_starting_on_one() {
        // An hour and a bit, not on a tick, in at most 60 buckets: 70 s each (7 ticks).
        let (from, to) = (1_000 * TICK + 3, 1_000 * TICK + 3 + 3_700 * 1_000_000_000);
        let (b, ticks) = buckets_over(from, to, 60, true);
        assert!(ticks);
        contiguous(&b, from, to);
        assert!(b.len() <= 60, "{}", b.len());
        // Every inner bound is on a tick, 7 ticks apart.
        assert!(b.iter().skip(1).all(|&(a, _)| a % TICK == 0), "{b:?}");
        assert!(
            b[1..b.len() - 1].iter().all(|&(a, z)| z - a == 7 * TICK),
            "{b:?}"
        );
    }

    #[test]
    fn finer_buckets_or_no_series_cut_the_window_in_equal_parts() {
        // Ten minutes in 60 buckets: 10 s each, a tick, but the series may not answer.
        let (from, to) = (5 * TICK + 1, 5 * TICK + 1 + 600 * 1_000_000_000);
        let (b, ticks) = buckets_over(from, to, 60, false);
        assert!(!ticks);
        assert_eq!(b.len(), 60);
        contiguous(&b, from, to);
        assert!(b.iter().all(|&(a, z)| z - a == TICK));
        // A minute in 60 buckets: a second each, finer than a tick.
        let (b, ticks) = buckets_over(0, 60_000_000_000, 60, true);
        assert!(!ticks);
        assert_eq!(b.len(), 60);
        contiguous(&b, 0, 60_000_000_000);
    }

    #[test]
    fn a_window_shorter_than_the_buckets_ends_in_empty_ones_cut_to_it() {
        let (b, _) = buckets_over(10, 13, 5, true);
        assert_eq!(b, [(10, 11), (11, 12), (12, 13), (13, 13), (13, 13)]);
    }

    #[test]
    fn ranges_shorter_than_the_buckets_in_ticks_are_read_from_rows() {
        let range = |from: i64, to: i64| Selector {
            from: Some(from),
            to: Some(to),
            ..Selector::default()
        };
        assert!(too_short_for_ticks(&range(0, 59 * TICK), 60));
        assert!(!too_short_for_ticks(&range(0, 60 * TICK), 60));
        assert!(!too_short_for_ticks(&Selector::default(), 60));
    }

    #[test]
    fn a_profile_straddling_buckets_is_parted_by_its_time_in_each() {
        // A profile of 10 s from 3 s, buckets of 4 s from 0: 1/10, 4/10, 4/10, 1/10.
        let s = 1_000_000_000;
        let parts: Vec<f64> = [0, 4, 8, 12, 16]
            .iter()
            .map(|&a| overlap(3 * s, 13 * s, a * s, (a + 4) * s))
            .collect();
        assert_eq!(parts, [0.1, 0.4, 0.4, 0.1, 0.0]);
        // An instant (a snapshot) is whole in the bucket that holds it, at its start.
        assert_eq!(overlap(4 * s, 4 * s, 4 * s, 8 * s), 1.0);
        assert_eq!(overlap(8 * s, 8 * s, 4 * s, 8 * s), 0.0);
    }

    #[test]
    fn series_add_up_each_group_per_bucket_largest_first() {
        let merged = |groups: &[&str], stacks: &[(u32, f64)]| Merged {
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            stacks: stacks
                .iter()
                .map(|&(group, value)| MergedStack {
                    group,
                    frames: vec![0],
                    value,
                    count: 1.0,
                })
                .collect(),
            ..Merged::default()
        };
        let buckets = vec![
            Some(merged(
                &["GET /a", "GET /b"],
                &[(0, 1.0), (0, 2.0), (1, 5.0)],
            )),
            None,
            // Groups are numbered per merge; a group that adds up to nothing is left out.
            Some(merged(
                &["GET /b", "GET /a", "idle"],
                &[(1, 4.0), (0, 1.0), (2, 0.0)],
            )),
        ];
        assert_eq!(
            stack(buckets, 3),
            [
                ("GET /a".to_owned(), vec![3.0, 0.0, 4.0]),
                ("GET /b".to_owned(), vec![5.0, 0.0, 1.0]),
            ]
        );
    }
}
