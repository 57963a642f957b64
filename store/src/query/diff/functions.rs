//! What changed per function: self and total shares on both sides, each tested, the family
//! corrected for false discoveries, and the ranking that the table, the headline and
//! `--fail-above` share (see the parent module for the model).

use std::collections::HashMap;

use crate::merge::Merged;
use crate::query::top::frame_totals;
use crate::select::ProfileType;

use super::paths::{CallTree, Carrier};
use super::significance::{
    attainable_p, benjamini_hochberg, tarone_family, z_above, z_difference, z_score, Criteria, Test,
};

/// The two shares of a function a diff compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Samples whose leaf is the function.
    SelfShare,
    /// Samples with the function anywhere on the stack (once per stack).
    TotalShare,
}

impl Measure {
    pub fn name(self) -> &'static str {
        match self {
            Measure::SelfShare => "self",
            Measure::TotalShare => "total",
        }
    }
}

/// |z| below which two rows' changes are called equal when ordering a caller and its callee.
const TIE_Z: f64 = 1.96;
/// Rows at the top of a ranking whose caller/callee order is refined.
const REFINED_ROWS: usize = 20;

/// One function on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionChange {
    pub name: String,
    /// Shares of each side's own total, 0..1.
    pub base_self: f64,
    pub head_self: f64,
    pub base_total: f64,
    pub head_total: f64,
    /// Observations behind the shares (samples): base self, base total, head self, head total.
    pub counts: [f64; 4],
    /// The tests of the two changes; `None` when not tested (no samples in that measure, or a
    /// profile type whose samples cannot be counted).
    pub self_test: Option<Test>,
    pub total_test: Option<Test>,
    /// The call-tree node of the function whose inclusive share grew most.
    pub carrier: Option<Carrier>,
}

impl FunctionChange {
    fn blank(name: &str) -> FunctionChange {
        FunctionChange {
            name: name.to_owned(),
            base_self: 0.0,
            head_self: 0.0,
            base_total: 0.0,
            head_total: 0.0,
            counts: [0.0; 4],
            self_test: None,
            total_test: None,
            carrier: None,
        }
    }

    pub fn delta_self(&self) -> f64 {
        self.head_self - self.base_self
    }

    pub fn delta_total(&self) -> f64 {
        self.head_total - self.base_total
    }

    pub fn delta(&self, m: Measure) -> f64 {
        match m {
            Measure::SelfShare => self.delta_self(),
            Measure::TotalShare => self.delta_total(),
        }
    }

    pub fn test(&self, m: Measure) -> Option<&Test> {
        match m {
            Measure::SelfShare => self.self_test.as_ref(),
            Measure::TotalShare => self.total_test.as_ref(),
        }
    }

    pub fn significant(&self, m: Measure) -> bool {
        self.test(m).is_some_and(|t| t.significant)
    }

    /// The larger of the significant increases of self and total share, if any: what this
    /// function is ranked by among the functions that grew.
    pub fn increase(&self) -> Option<(Measure, f64)> {
        [Measure::SelfShare, Measure::TotalShare]
            .into_iter()
            .filter(|&m| self.significant(m) && self.delta(m) > 0.0)
            .map(|m| (m, self.delta(m)))
            .reduce(|a, b| if b.1 > a.1 { b } else { a })
    }

    /// The larger of the significant decreases (a negative change), if any.
    pub fn decrease(&self) -> Option<(Measure, f64)> {
        [Measure::SelfShare, Measure::TotalShare]
            .into_iter()
            .filter(|&m| self.significant(m) && self.delta(m) < 0.0)
            .map(|m| (m, self.delta(m)))
            .reduce(|a, b| if b.1 < a.1 { b } else { a })
    }

    /// The change of larger magnitude, tested or not.
    fn largest(&self) -> f64 {
        let (s, t) = (self.delta_self(), self.delta_total());
        if s.abs() > t.abs() {
            s
        } else {
            t
        }
    }
}

/// The tests a diff corrected together.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Family {
    /// Tests made: self and total of every function with samples on either side, a
    /// function's two counted once when they are the same samples, but for those too rare to
    /// be significant whatever their split ([`Family::left_out`]).
    pub tests: usize,
    /// Shares left out of the family: too few samples on both sides together to reach
    /// significance even all on one side.
    pub left_out: usize,
    pub functions: usize,
    /// The false discovery rate controlled and the dispersion factor applied.
    pub criteria: Criteria,
}

/// A function `--fail-above` fails on.
#[derive(Clone, Copy, Debug)]
pub struct Regression<'a> {
    pub change: &'a FunctionChange,
    /// The share that grew beyond the threshold (the larger, when both did).
    pub measure: Measure,
    pub delta: f64,
    /// The test of "grew by at most the threshold", scaled.
    pub beyond: Test,
}

impl<'a> Regression<'a> {
    fn new(change: &'a FunctionChange, measure: Measure, beyond: Test) -> Regression<'a> {
        Regression {
            change,
            measure,
            delta: change.delta(measure),
            beyond,
        }
    }
}

/// Every function of two sides, ranked.
#[derive(Clone, Debug, Default)]
pub struct FunctionDiff {
    /// Functions whose share grew: significant increases first, by [`FunctionChange::increase`]
    /// (a callee ahead of its caller when the caller grew only through it), then the rest by
    /// their larger change.
    pub grew: Vec<FunctionChange>,
    /// Functions whose share shrank, in the same order by decrease.
    pub shrank: Vec<FunctionChange>,
    /// `None` when nothing was tested (see [`testable`]).
    pub family: Option<Family>,
    /// Observations (samples) on each side.
    pub base_samples: f64,
    pub head_samples: f64,
}

impl FunctionDiff {
    /// The function the change is most likely in: the first that grew significantly.
    pub fn headline(&self) -> Option<&FunctionChange> {
        self.grew.first().filter(|c| c.increase().is_some())
    }

    /// Functions whose share the samples show grew by more than `pct` percentage points, in
    /// ranking order: a significant increase (self or total) that is also significantly
    /// larger than `pct`, by a one-sided test of "grew by at most `pct`" for every share of
    /// the family, corrected as the stars are. A CI gate should fail on what the samples
    /// prove, not on what they merely allow: a growth of `pct` plus the detectable change is
    /// caught 4 times in 5.
    pub fn regressions(&self, pct: f64) -> Vec<Regression<'_>> {
        let Some(family) = self.family else {
            return Vec::new();
        };
        let shift = pct / 100.0;
        let (n1, n2) = (self.base_samples, self.head_samples);
        // One test per share of the family, as the stars: (row, measure, test).
        let mut tests: Vec<(usize, Measure, Test)> = Vec::new();
        for (i, c) in self.grew.iter().chain(&self.shrank).enumerate() {
            let [bs, bt, hs, ht] = c.counts;
            let identical = c.self_test == c.total_test && bs == bt && hs == ht;
            for (m, k1, k2) in [(Measure::SelfShare, bs, hs), (Measure::TotalShare, bt, ht)] {
                if !c.test(m).is_some_and(|t| t.counted) || (identical && m == Measure::TotalShare)
                {
                    continue;
                }
                let z = z_above(k1, n1, k2, n2, shift);
                let test = Test {
                    z: family.criteria.scale(z),
                    p: family.criteria.upper_p(z),
                    significant: false,
                    counted: true,
                };
                tests.push((i, m, test));
            }
        }
        let mut refs: Vec<&mut Test> = tests.iter_mut().map(|(_, _, t)| t).collect();
        benjamini_hochberg(&mut refs, family.criteria.fdr);
        let mut out: Vec<Regression<'_>> = Vec::new();
        for (i, m, test) in tests {
            let Some(c) = self.grew.get(i) else {
                continue; // a function that shrank
            };
            let grew = c.significant(m) && c.delta(m) > shift;
            if !(grew && test.significant) {
                continue;
            }
            match out.iter_mut().find(|r| std::ptr::eq(r.change, c)) {
                Some(r) if c.delta(m) > r.delta => *r = Regression::new(c, m, test),
                Some(_) => {}
                None => out.push(Regression::new(c, m, test)),
            }
        }
        let rank = |r: &Regression<'_>| {
            self.grew
                .iter()
                .position(|c| std::ptr::eq(c, r.change))
                .unwrap_or(usize::MAX)
        };
        out.sort_by_key(rank);
        out
    }

    /// The smallest change of a share `p` these sample counts would have shown as significant
    /// 4 times in 5, had it been the only real change among the family's tests (with the
    /// variance scaled by the dispersion factor, as the tests are).
    pub fn detectable(&self, p: f64) -> Option<f64> {
        let f = self.family?;
        f.criteria
            .detectable(p, self.base_samples, self.head_samples, f.tests)
    }
}

/// Whether significance can be tested for a profile type, as merged. CPU samples are ticks of
/// a CPU-time clock, each the same amount of CPU, so a share of value is a share of counted
/// samples. Wall samples weigh the time since a thread's last visit, allocation samples the
/// bytes and objects they stand for, lock samples the waits they stand for: their values are
/// not proportional to anything the merge counts.
pub fn testable(ty: ProfileType) -> bool {
    ty == ProfileType::Cpu
}

/// Compares every function of `base` and `head` (merges of one profile type `ty`), testing
/// by `criteria` when [`testable`].
pub fn compare(base: &Merged, head: &Merged, ty: ProfileType, criteria: Criteria) -> FunctionDiff {
    let (bt, ht) = (frame_totals(base, None), frame_totals(head, None));
    let mut by_name: HashMap<&str, FunctionChange> = HashMap::new();
    for (m, t, head_side) in [(base, &bt, false), (head, &ht, true)] {
        for (i, name) in m.frames.iter().enumerate() {
            let (sv, tv) = (
                t.self_value.get(i).copied().unwrap_or(0.0),
                t.total_value.get(i).copied().unwrap_or(0.0),
            );
            let (sc, tc) = (
                t.self_count.get(i).copied().unwrap_or(0.0),
                t.total_count.get(i).copied().unwrap_or(0.0),
            );
            if tv == 0.0 && tc == 0.0 {
                continue;
            }
            let c = by_name
                .entry(name)
                .or_insert_with(|| FunctionChange::blank(name));
            let off = if head_side { 2 } else { 0 };
            if head_side {
                c.head_self += share(sv, t.total);
                c.head_total += share(tv, t.total);
            } else {
                c.base_self += share(sv, t.total);
                c.base_total += share(tv, t.total);
            }
            if let Some(k) = c.counts.get_mut(off) {
                *k += sc;
            }
            if let Some(k) = c.counts.get_mut(off + 1) {
                *k += tc;
            }
        }
    }
    let mut all: Vec<FunctionChange> = by_name.into_values().collect();
    let family = testable(ty).then(|| test_all(&mut all, bt.count, ht.count, criteria));
    let carriers = CallTree::new(base, head).carriers();
    for c in &mut all {
        c.carrier = carriers.get(&c.name).cloned();
    }
    let (mut grew, mut shrank): (Vec<FunctionChange>, Vec<FunctionChange>) = (vec![], vec![]);
    for c in all {
        if c.increase().is_some() || (c.decrease().is_none() && c.largest() > 0.0) {
            grew.push(c);
        } else if c.decrease().is_some() || c.largest() < 0.0 {
            shrank.push(c);
        }
    }
    grew.sort_by(|a, b| {
        let key = |c: &FunctionChange| c.increase().map(|(_, d)| d);
        match (key(a), key(b)) {
            (Some(x), Some(y)) => y
                .total_cmp(&x)
                .then(b.delta_self().total_cmp(&a.delta_self())),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => b.largest().total_cmp(&a.largest()),
        }
        .then_with(|| a.name.cmp(&b.name))
    });
    shrank.sort_by(|a, b| {
        let key = |c: &FunctionChange| c.decrease().map(|(_, d)| d);
        match (key(a), key(b)) {
            (Some(x), Some(y)) => x
                .total_cmp(&y)
                .then(a.delta_self().total_cmp(&b.delta_self())),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.largest().total_cmp(&b.largest()),
        }
        .then_with(|| a.name.cmp(&b.name))
    });
    refine(&mut grew, base, head, FunctionChange::increase);
    refine(&mut shrank, base, head, FunctionChange::decrease);
    FunctionDiff {
        grew,
        shrank,
        family,
        base_samples: bt.count,
        head_samples: ht.count,
    }
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// Tests every share that has samples on either side, and marks the significant ones by the
/// Benjamini–Hochberg procedure over the family of those that could be ([`tarone_family`]).
fn test_all(all: &mut [FunctionChange], n_base: f64, n_head: f64, criteria: Criteria) -> Family {
    let mut same = Vec::with_capacity(all.len());
    for c in all.iter_mut() {
        let [bs, bt, hs, ht] = c.counts;
        if bs + hs > 0.0 {
            c.self_test = Some(criteria.test(z_score(bs, n_base, hs, n_head)));
        }
        // A function never below itself and never a caller has its self and total on the
        // same samples: one test, not two.
        let identical = bs == bt && hs == ht && c.self_test.is_some();
        if bt + ht > 0.0 && !identical {
            c.total_test = Some(criteria.test(z_score(bt, n_base, ht, n_head)));
        }
        same.push(identical);
    }
    let mut shares: Vec<(&mut Test, f64)> = all
        .iter_mut()
        .flat_map(|c| {
            let [bs, bt, hs, ht] = c.counts;
            [
                c.self_test.as_mut().map(|t| (t, bs + hs)),
                c.total_test.as_mut().map(|t| (t, bt + ht)),
            ]
        })
        .flatten()
        .collect();
    let attainable: Vec<f64> = shares
        .iter()
        .map(|(_, count)| attainable_p(&criteria, *count, n_base, n_head))
        .collect();
    let counted = tarone_family(&attainable, criteria.fdr);
    for ((test, _), counted) in shares.iter_mut().zip(&counted) {
        test.counted = *counted;
    }
    let left_out = counted.iter().filter(|&&c| !c).count();
    let mut family: Vec<&mut Test> = shares
        .into_iter()
        .map(|(t, _)| t)
        .filter(|t| t.counted)
        .collect();
    let tests = family.len();
    benjamini_hochberg(&mut family, criteria.fdr);
    for (c, identical) in all.iter_mut().zip(same) {
        if identical {
            c.total_test = c.self_test;
        }
    }
    Family {
        tests,
        left_out,
        functions: all.len(),
        criteria,
    }
}

/// Within the first rows of a ranking, puts a function ahead of a caller when the caller is
/// on the function's carrying path and the two changes do not differ significantly: then the
/// caller changed only through it, and the callee is the more precise answer. A chain of
/// methods that only call each other moves as one, and its deepest member leads. A shared
/// helper stays below the caller that grew: its change is diluted by its other callers'.
fn refine(
    rows: &mut [FunctionChange],
    base: &Merged,
    head: &Merged,
    key: fn(&FunctionChange) -> Option<(Measure, f64)>,
) {
    let top = rows
        .iter()
        .take(REFINED_ROWS)
        .take_while(|c| key(c).is_some())
        .count();
    // Each move brings a deeper function up; the bound only guards against recursion making
    // two functions each other's callers.
    for _ in 0..top * top {
        let mut moved = false;
        'scan: for i in 0..top {
            for j in i + 1..top {
                let (Some(r), Some(g)) = (rows.get(i), rows.get(j)) else {
                    continue;
                };
                let under = g.carrier.as_ref().is_some_and(|c| c.called_from(&r.name));
                if under && tied(r, g, base, head, key) {
                    if let Some(slice) = rows.get_mut(i..=j) {
                        slice.rotate_right(1);
                    }
                    moved = true;
                    break 'scan;
                }
            }
        }
        if !moved {
            break;
        }
    }
}

/// Whether the changes of `r` and `g` (each in the measure it is ranked by) are equal within
/// noise: the samples in one of the two sets and not the other changed by no more than chance.
fn tied(
    r: &FunctionChange,
    g: &FunctionChange,
    base: &Merged,
    head: &Merged,
    key: fn(&FunctionChange) -> Option<(Measure, f64)>,
) -> bool {
    let (Some((rm, _)), Some((gm, _))) = (key(r), key(g)) else {
        return false;
    };
    let [(a1, b1, n1), (a2, b2, n2)] =
        [base, head].map(|m| exclusive_counts(m, (&r.name, rm), (&g.name, gm)));
    z_difference(a1, b1, n1, a2, b2, n2).abs() < TIE_Z
}

/// Counts of the stacks of `m` in set `r` and not in `g`, in `g` and not in `r`, and of all.
fn exclusive_counts(m: &Merged, r: (&str, Measure), g: (&str, Measure)) -> (f64, f64, f64) {
    let id = |name: &str| {
        m.frames
            .iter()
            .position(|f| f == name)
            .and_then(|i| u32::try_from(i).ok())
    };
    let (rid, gid) = (id(r.0), id(g.0));
    let member = |frames: &[u32], id: Option<u32>, measure: Measure| match (id, measure) {
        (None, _) => false,
        (Some(id), Measure::SelfShare) => frames.last() == Some(&id),
        (Some(id), Measure::TotalShare) => frames.contains(&id),
    };
    let (mut a, mut b, mut n) = (0.0, 0.0, 0.0);
    for s in &m.stacks {
        n += s.count;
        let (in_r, in_g) = (member(&s.frames, rid, r.1), member(&s.frames, gid, g.1));
        if in_r && !in_g {
            a += s.count;
        } else if in_g && !in_r {
            b += s.count;
        }
    }
    (a, b, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;

    const FRAMES: [&str; 8] = [
        "run", "handle", "html", "json", "escape", "search", "score", "noise",
    ];

    fn side(stacks: &[(&[u32], f64)]) -> Merged {
        Merged {
            unit: "nanoseconds".into(),
            frames: FRAMES.iter().map(|f| (*f).to_owned()).collect(),
            groups: vec![String::new()],
            stacks: stacks
                .iter()
                .map(|(f, n)| MergedStack {
                    group: 0,
                    frames: f.to_vec(),
                    value: *n * 10.0,
                    count: *n,
                })
                .collect(),
            ..Merged::default()
        }
    }

    const HTML: &[u32] = &[0, 1, 2, 4];
    const JSON: &[u32] = &[0, 1, 3, 4];
    const SEARCH: &[u32] = &[0, 1, 5, 6];
    const SEARCH_SELF: &[u32] = &[0, 1, 5];
    const NOISE: &[u32] = &[0, 1, 7];

    fn names(rows: &[FunctionChange]) -> Vec<&str> {
        rows.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn an_inclusive_regression_through_a_shared_helper_leads() {
        // html calls the shared escape three times as often; nothing's self share but
        // escape's moves, and escape's is diluted by json's share shrinking.
        let base = side(&[
            (HTML, 1000.0),
            (JSON, 1000.0),
            (SEARCH, 2000.0),
            (NOISE, 40.0),
        ]);
        let head = side(&[
            (HTML, 3000.0),
            (JSON, 1000.0),
            (SEARCH, 2000.0),
            (NOISE, 62.0),
        ]);
        let d = compare(&base, &head, ProfileType::Cpu, Criteria::new(0.01));
        let top = &d.grew[0];
        assert_eq!(top.name, "html");
        assert_eq!(top.increase().unwrap().0, Measure::TotalShare);
        assert!(top.significant(Measure::TotalShare));
        assert!(top.self_test.is_none(), "html has no self samples");
        assert_eq!(
            top.carrier.as_ref().unwrap().path,
            ["html", "handle", "run"]
        );
        assert_eq!(d.grew[1].name, "escape");
        assert_eq!(
            d.grew[1].carrier.as_ref().unwrap().path,
            ["escape", "html", "handle", "run"]
        );
        assert_eq!(d.headline().unwrap().name, "html");
        // The root at 100% on both sides is in neither list.
        assert!(!names(&d.grew).contains(&"run") && !names(&d.shrank).contains(&"run"));
        // noise grew a hair: listed after the significant rows, unstarred.
        let noise = d.grew.iter().find(|c| c.name == "noise").unwrap();
        assert!(noise.increase().is_none());
        assert_eq!(d.grew.last().unwrap().name, "noise");
        // html +24.7 pp in total, escape +16.5 pp (self and total), each within about 1 pp:
        // the gate fails on a growth shown to exceed the threshold, not one that merely
        // might.
        let regressions = |pct| -> Vec<&str> {
            d.regressions(pct)
                .iter()
                .map(|r| r.change.name.as_str())
                .collect()
        };
        assert_eq!(regressions(10.0), ["html", "escape"]);
        assert_eq!(regressions(15.0), ["html"]);
        assert_eq!(regressions(20.0), ["html"]);
        assert!(regressions(24.0).is_empty());
        let r = &d.regressions(20.0)[0];
        assert_eq!(r.measure, Measure::TotalShare);
        assert!(r.beyond.significant && r.beyond.z > 3.0, "{r:?}");
        assert_eq!(
            names(&d.shrank)[..2],
            ["score", "search"],
            "the callee first"
        );
        // Family: self and total of escape, score, noise are the same samples (one test
        // each); html, json, search, handle, run have totals only; handle's and run's are
        // all of both sides, a share no split can change: left out.
        let f = d.family.unwrap();
        assert_eq!((f.tests, f.left_out, f.functions), (6, 2, 8));
    }

    #[test]
    fn a_chain_moves_as_one_and_its_deepest_member_leads() {
        // score's own loop doubled; search only calls score (and a few samples of its own).
        let base = side(&[(HTML, 1000.0), (SEARCH, 1000.0), (SEARCH_SELF, 10.0)]);
        let head = side(&[(HTML, 1000.0), (SEARCH, 2000.0), (SEARCH_SELF, 20.0)]);
        let d = compare(&base, &head, ProfileType::Cpu, Criteria::new(0.01));
        // search's total grew a little more than score's (its own few samples grew by
        // chance), but the difference is noise: score leads.
        let (score, search) = (&d.grew[0], &d.grew[1]);
        assert!(search.delta_total() > score.delta_total());
        assert_eq!(names(&d.grew)[..2], ["score", "search"]);
        assert_eq!(d.grew[0].increase().unwrap().0, Measure::SelfShare);
    }

    #[test]
    fn noise_is_not_significant_and_says_what_it_could_have_seen() {
        let base = side(&[(HTML, 950.0), (JSON, 50.0)]);
        let head = side(&[(HTML, 930.0), (JSON, 70.0)]);
        let d = compare(&base, &head, ProfileType::Cpu, Criteria::new(0.01));
        assert!(d.headline().is_none());
        assert!(d.regressions(0.0).is_empty());
        // json's +2 pp has a z of about 1.9: unstarred, but ranked first among the growers.
        assert_eq!(d.grew[0].name, "json");
        let mde = d.detectable(0.5).unwrap();
        assert!(mde > 0.05 && mde < 0.15, "{mde}");
        assert!(d.detectable(0.05).unwrap() < mde);
        // Four times the variance: the json change is half as many standard errors, and
        // twice the change would be needed to see.
        let noisy = compare(
            &base,
            &head,
            ProfileType::Cpu,
            Criteria::new(0.01).with_dispersion(4.0, f64::INFINITY),
        );
        let z = |d: &FunctionDiff| d.grew[0].total_test.unwrap().z;
        assert!((z(&d) / z(&noisy) - 2.0).abs() < 1e-9);
        assert!((noisy.detectable(0.5).unwrap() / mde - 2.0).abs() < 1e-9);
    }

    #[test]
    fn other_types_are_compared_but_not_tested() {
        let base = side(&[(HTML, 100.0), (JSON, 900.0)]);
        let head = side(&[(HTML, 900.0), (JSON, 100.0)]);
        let d = compare(&base, &head, ProfileType::Alloc, Criteria::new(0.01));
        assert!(d.family.is_none() && d.headline().is_none());
        assert_eq!(d.grew[0].name, "html");
        assert!(d.detectable(0.5).is_none());
        assert!(compare(&base, &head, ProfileType::Cpu, Criteria::new(0.01))
            .headline()
            .is_some());
    }

    #[test]
    fn an_empty_side_is_no_evidence() {
        let base = side(&[]);
        let head = side(&[(HTML, 10.0)]);
        let d = compare(&base, &head, ProfileType::Cpu, Criteria::new(0.01));
        assert!(d.headline().is_none());
        assert!(d.grew.iter().all(|c| c.increase().is_none()));
    }
}
