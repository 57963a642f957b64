//! A function's trend: what the functions matching a pattern (matched as focus matches,
//! against `pkg.Class.method`) add up to in each time bucket of a selection, on the stack
//! (total) and as the leaf (self), with the selection's own sum in the bucket (the 100 % of
//! their share) and the bucket's requests where the store has request counts.
//!
//! The buckets are the timeline's ([`super::timeline::plan`]): the same edges, so that the
//! trend is drawn under it. Each bucket is one merge of the selection's rows (the series keep
//! no stacks), made in one pass, each profile parted among the buckets it straddles as the
//! timeline parts it; a bucket of snapshots (the live heap) holds the latest one of each
//! instance, never a sum.

use std::path::PathBuf;

use super::timeline::{merge_buckets, plan};
use super::Spec;
use crate::error::Error;
use crate::focus::{Focus, Glob};
use crate::merge::Merged;
use crate::select::ProfileType;
use crate::stored::StoreSource;

/// What the matching functions add up to in one bucket.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrendPoint {
    /// Over the stacks with a matching frame, each stack once however many frames match.
    pub total: f64,
    /// Over the stacks whose leaf matches.
    pub self_value: f64,
    /// What the whole selection adds up to in the bucket.
    pub selection: f64,
    /// Requests in the bucket (of the selection's endpoint, else of all), when the store has
    /// request counts ([`super::requests`]).
    pub requests: Option<f64>,
}

impl TrendPoint {
    /// The total's share of the selection in the bucket; `None` for a bucket without data.
    pub fn share(&self) -> Option<f64> {
        (self.selection != 0.0).then(|| self.total / self.selection)
    }

    /// The self value's share of the selection in the bucket.
    pub fn self_share(&self) -> Option<f64> {
        (self.selection != 0.0).then(|| self.self_value / self.selection)
    }

    /// The total per request in the bucket, when it had requests.
    pub fn per_request(&self) -> Option<f64> {
        self.requests.filter(|n| *n > 0.0).map(|n| self.total / n)
    }
}

/// A function's trend over a selection.
#[derive(Clone, Debug, PartialEq)]
pub struct Trend {
    pub ty: ProfileType,
    pub unit: String,
    /// The pattern, as given.
    pub pattern: String,
    /// Where each bucket starts, then where the last one ends, as the timeline's
    /// ([`super::timeline::Timeline::times`]); empty when nothing was selected.
    pub times: Vec<i64>,
    /// One per bucket.
    pub points: Vec<TrendPoint>,
    /// The names that matched in the selection, the largest total first.
    pub functions: Vec<(String, f64)>,
}

impl Trend {
    /// Whether any bucket had request counts.
    pub fn has_requests(&self) -> bool {
        self.points.iter().any(|p| p.requests.is_some())
    }
}

/// The trend of the functions matching `pattern` in `spec`'s selection, in the buckets a
/// timeline of it in at most `buckets` buckets has. `open` opens the store (twice: the whole
/// selection, from the series where it can, then the rows); request counts come from the
/// metrics stored under `metrics` (store directories).
pub fn trend<E: From<Error>>(
    open: impl Fn() -> Result<StoreSource, E>,
    metrics: &[PathBuf],
    spec: Spec,
    pattern: &Glob,
    buckets: usize,
) -> Result<Trend, E> {
    let (selector, measure) = (spec.selector.clone(), spec.measure);
    let plan = plan(&open, spec, None, buckets)?;
    let mut trend = Trend {
        ty: plan.ty,
        unit: plan.unit,
        pattern: pattern.text().to_owned(),
        times: plan.times,
        points: Vec::new(),
        functions: Vec::new(),
    };
    if plan.bounds.is_empty() {
        return Ok(trend);
    }
    let rows = if plan.rows {
        plan.source
    } else {
        open()?.narrow_to(&selector)
    };
    let merged = merge_buckets(&rows, &plan.bounds, plan.ty, &selector, measure, None)?;
    let requests = super::requests::requests_in(metrics, &selector, &plan.bounds);
    let matcher = Focus {
        include: vec![pattern.clone()],
        ..Focus::default()
    };
    let mut names: Vec<(String, f64)> = Vec::new();
    for (m, requests) in merged.iter().zip(requests) {
        let mut point = m
            .as_ref()
            .map(|m| point_of(m, &matcher, &mut names))
            .unwrap_or_default();
        point.requests = requests;
        trend.points.push(point);
    }
    names.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    trend.functions = names;
    Ok(trend)
}

/// What the frames `matcher` includes add up to in one bucket's merge; adds each matching
/// name's total to `names`.
fn point_of(m: &Merged, matcher: &Focus, names: &mut Vec<(String, f64)>) -> TrendPoint {
    let matching: Vec<bool> = m.frames.iter().map(|f| matcher.frame(f).included).collect();
    let is_match = |f: u32| matching.get(f as usize).copied().unwrap_or(false);
    let mut point = TrendPoint::default();
    let mut per_frame = vec![0.0; m.frames.len()];
    // `seen[f] == stamp`: frame f already counted for the current stack.
    let mut seen = vec![usize::MAX; m.frames.len()];
    for (stamp, s) in m.stacks.iter().enumerate() {
        point.selection += s.value;
        if s.frames.iter().any(|&f| is_match(f)) {
            point.total += s.value;
        }
        if s.frames.last().is_some_and(|&f| is_match(f)) {
            point.self_value += s.value;
        }
        for &f in s.frames.iter().filter(|&&f| is_match(f)) {
            let i = f as usize;
            if seen.get(i) != Some(&stamp) {
                if let (Some(x), Some(v)) = (seen.get_mut(i), per_frame.get_mut(i)) {
                    *x = stamp;
                    *v += s.value;
                }
            }
        }
    }
    for (f, v) in per_frame.into_iter().enumerate().filter(|(_, v)| *v != 0.0) {
        let name = m.frames.get(f).map_or("", String::as_str);
        match names.iter_mut().find(|(n, _)| n == name) {
            Some((_, sum)) => *sum += v,
            None => names.push((name.to_owned(), v)),
        }
    }
    point
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;

    fn merged(frames: &[&str], stacks: &[(&[u32], f64)]) -> Merged {
        Merged {
            frames: frames.iter().map(|f| (*f).to_owned()).collect(),
            groups: vec![String::new()],
            stacks: stacks
                .iter()
                .map(|&(frames, value)| MergedStack {
                    group: 0,
                    frames: frames.to_vec(),
                    value,
                    count: 1.0,
                })
                .collect(),
            ..Merged::default()
        }
    }

    #[test]
    fn a_stack_counts_once_in_the_total_and_its_leaf_in_self() {
        let m = merged(
            &[
                "app.Main.run",
                "app.Render.html",
                "app.Render.row",
                "app.Db.query",
            ],
            &[
                // Recursion and two matching frames: once in the total.
                (&[0, 1, 2, 1], 10.0),
                (&[0, 1], 5.0),
                (&[0, 3], 25.0),
            ],
        );
        let matcher = Focus {
            include: vec![Glob::parse("app.Render.*").unwrap()],
            ..Focus::default()
        };
        let mut names = Vec::new();
        let p = point_of(&m, &matcher, &mut names);
        assert_eq!((p.total, p.self_value, p.selection), (15.0, 15.0, 40.0));
        assert_eq!(p.share(), Some(0.375));
        assert_eq!(p.self_share(), Some(0.375));
        names.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            names,
            [
                ("app.Render.html".to_owned(), 15.0),
                ("app.Render.row".to_owned(), 10.0)
            ]
        );
        // Only the leaf of a non-matching stack's caller: total, not self.
        let matcher = Focus {
            include: vec![Glob::parse("app.Main.run").unwrap()],
            ..Focus::default()
        };
        let p = point_of(&m, &matcher, &mut Vec::new());
        assert_eq!((p.total, p.self_value), (40.0, 0.0));
    }

    #[test]
    fn per_request_needs_requests() {
        let p = TrendPoint {
            total: 30.0,
            self_value: 10.0,
            selection: 60.0,
            requests: Some(3.0),
        };
        assert_eq!(p.per_request(), Some(10.0));
        let none = TrendPoint {
            requests: Some(0.0),
            ..p.clone()
        };
        assert_eq!(none.per_request(), None);
        assert_eq!(TrendPoint::default().share(), None);
    }
}
