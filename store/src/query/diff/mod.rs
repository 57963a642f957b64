//! What `diff` computes: what changed between two selections (two releases, two time ranges).
//!
//! Each side is normalised to its own total, so a release that served more traffic is not
//! "slower everywhere": a function's change is the change of its share, in percentage points.
//! Whether a change is more than sampling noise is judged with a two-proportion z-test on the
//! observation counts behind each share (samples, for CPU): a sample either lands in the
//! function or not, so with `k` of `n` samples on each side the shares' difference divided by
//! its standard error is approximately normal when nothing changed. |z| ≥ 3.3 (p < 0.001,
//! two-sided) is called significant, strict enough that ranking hundreds of functions does not
//! flag noise as a regression.

use std::collections::HashMap;

use crate::merge::Merged;

use crate::query::top::frame_totals;

/// |z| at or above this is significant (two-sided p < 0.001).
pub const SIGNIFICANT_Z: f64 = 3.29;

#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub name: String,
    /// Shares of each side's own total, 0..1.
    pub base_self: f64,
    pub head_self: f64,
    pub base_total: f64,
    pub head_total: f64,
    /// z of the self and total share changes.
    pub z_self: f64,
    pub z_total: f64,
}

impl Change {
    pub fn delta_self(&self) -> f64 {
        self.head_self - self.base_self
    }

    pub fn delta_total(&self) -> f64 {
        self.head_total - self.base_total
    }
}

/// Two-proportion z statistic: `k1` of `n1` against `k2` of `n2`.
pub fn z_score(k1: f64, n1: f64, k2: f64, n2: f64) -> f64 {
    if n1 <= 0.0 || n2 <= 0.0 {
        return 0.0;
    }
    let (p1, p2) = (k1 / n1, k2 / n2);
    let p = (k1 + k2) / (n1 + n2);
    let se = (p * (1.0 - p) * (1.0 / n1 + 1.0 / n2)).sqrt();
    if se <= 0.0 {
        // Both sides all-in or all-out: no evidence of change unless the shares differ.
        return if p1 == p2 {
            0.0
        } else {
            f64::INFINITY.copysign(p2 - p1)
        };
    }
    (p2 - p1) / se
}

/// Every function of either side with its shares and the significance of their changes.
pub fn changes(base: &Merged, head: &Merged) -> Vec<Change> {
    let (bt, ht) = (frame_totals(base, None), frame_totals(head, None));
    let mut by_name: HashMap<&str, Change> = HashMap::new();
    let blank = |name: &str| Change {
        name: name.to_owned(),
        base_self: 0.0,
        head_self: 0.0,
        base_total: 0.0,
        head_total: 0.0,
        z_self: 0.0,
        z_total: 0.0,
    };
    // Counts per name, to test: (base self, base total, head self, head total).
    let mut counts: HashMap<&str, [f64; 4]> = HashMap::new();
    for (i, name) in base.frames.iter().enumerate() {
        let (sv, tv) = (bt.self_value[i], bt.total_value[i]);
        if tv == 0.0 {
            continue;
        }
        let c = by_name.entry(name).or_insert_with(|| blank(name));
        c.base_self += share(sv, bt.total);
        c.base_total += share(tv, bt.total);
        let k = counts.entry(name).or_default();
        k[0] += bt.self_count[i];
        k[1] += bt.total_count[i];
    }
    for (i, name) in head.frames.iter().enumerate() {
        let (sv, tv) = (ht.self_value[i], ht.total_value[i]);
        if tv == 0.0 {
            continue;
        }
        let c = by_name.entry(name).or_insert_with(|| blank(name));
        c.head_self += share(sv, ht.total);
        c.head_total += share(tv, ht.total);
        let k = counts.entry(name).or_default();
        k[2] += ht.self_count[i];
        k[3] += ht.total_count[i];
    }
    let mut out: Vec<Change> = by_name
        .into_iter()
        .map(|(name, mut c)| {
            let k = counts.get(name).copied().unwrap_or_default();
            c.z_self = z_score(k[0], bt.count, k[2], ht.count);
            c.z_total = z_score(k[1], bt.count, k[3], ht.count);
            c
        })
        .collect();
    // Largest self change first (regressions before improvements), then total, then name.
    out.sort_by(|a, b| {
        b.delta_self()
            .total_cmp(&a.delta_self())
            .then(b.delta_total().total_cmp(&a.delta_total()))
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// The function the change is most likely in: the largest significant growth of self share,
/// or failing that of total share.
pub fn headline(changes: &[Change]) -> Option<&Change> {
    changes
        .iter()
        .filter(|c| c.delta_self() > 0.0 && c.z_self >= SIGNIFICANT_Z)
        .max_by(|a, b| a.delta_self().total_cmp(&b.delta_self()))
        .or_else(|| {
            changes
                .iter()
                .filter(|c| c.delta_total() > 0.0 && c.z_total >= SIGNIFICANT_Z)
                .max_by(|a, b| a.delta_total().total_cmp(&b.delta_total()))
        })
}

/// Functions whose total share grew by more than `pct` percentage points, significantly.
pub fn regressions(changes: &[Change], pct: f64) -> Vec<&Change> {
    let mut v: Vec<&Change> = changes
        .iter()
        .filter(|c| c.delta_total() * 100.0 > pct && c.z_total >= SIGNIFICANT_Z)
        .collect();
    v.sort_by(|a, b| b.delta_total().total_cmp(&a.delta_total()));
    v
}

/// One endpoint (or other group) on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupChange {
    pub name: String,
    pub base_value: f64,
    pub head_value: f64,
    pub base_share: f64,
    pub head_share: f64,
    pub base_requests: Option<f64>,
    pub head_requests: Option<f64>,
}

pub fn group_changes(
    base: &Merged,
    head: &Merged,
    requests: &dyn Fn(bool, &str) -> Option<f64>,
) -> Vec<GroupChange> {
    let (bt, ht) = (base.total(), head.total());
    let mut by: HashMap<String, GroupChange> = HashMap::new();
    for (m, is_head) in [(base, false), (head, true)] {
        for s in &m.stacks {
            let name = m.group(s.group).to_owned();
            let g = by.entry(name.clone()).or_insert_with(|| GroupChange {
                name,
                base_value: 0.0,
                head_value: 0.0,
                base_share: 0.0,
                head_share: 0.0,
                base_requests: None,
                head_requests: None,
            });
            if is_head {
                g.head_value += s.value;
            } else {
                g.base_value += s.value;
            }
        }
    }
    let mut v: Vec<GroupChange> = by
        .into_values()
        .map(|mut g| {
            g.base_share = share(g.base_value, bt);
            g.head_share = share(g.head_value, ht);
            g.base_requests = requests(false, &g.name);
            g.head_requests = requests(true, &g.name);
            g
        })
        .collect();
    v.sort_by(|a, b| {
        b.head_value
            .total_cmp(&a.head_value)
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;

    fn side(stacks: &[(&[u32], f64)]) -> Merged {
        Merged {
            unit: "nanoseconds".into(),
            frames: vec!["main".into(), "fast".into(), "slow".into()],
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

    #[test]
    fn z_scores_behave() {
        assert_eq!(z_score(50.0, 100.0, 50.0, 100.0), 0.0);
        let z = z_score(100.0, 1000.0, 200.0, 1000.0);
        assert!((z - 6.2).abs() < 0.1, "{z}");
        assert!(z_score(10.0, 100.0, 12.0, 100.0).abs() < SIGNIFICANT_Z);
        assert_eq!(z_score(1.0, 0.0, 1.0, 1.0), 0.0);
    }

    #[test]
    fn shares_rank_and_regressions_fail() {
        // Base: fast 900, slow 100. Head: twice the traffic, slow now 40%.
        let base = side(&[(&[0, 1], 900.0), (&[0, 2], 100.0)]);
        let head = side(&[(&[0, 1], 1200.0), (&[0, 2], 800.0)]);
        let c = changes(&base, &head);
        assert_eq!(c[0].name, "slow");
        assert!((c[0].delta_self() - 0.3).abs() < 1e-9);
        assert!(c[0].z_self > 10.0);
        assert_eq!(c.last().unwrap().name, "fast");
        assert_eq!(headline(&c).unwrap().name, "slow");
        assert_eq!(regressions(&c, 25.0).len(), 1);
        assert!(regressions(&c, 31.0).is_empty());
        // The root keeps its 100%: no change.
        let main = c.iter().find(|c| c.name == "main").unwrap();
        assert_eq!(main.delta_total(), 0.0);
    }

    #[test]
    fn noise_is_not_significant() {
        let base = side(&[(&[0, 1], 95.0), (&[0, 2], 5.0)]);
        let head = side(&[(&[0, 1], 93.0), (&[0, 2], 7.0)]);
        let c = changes(&base, &head);
        assert!(headline(&c).is_none());
        assert!(regressions(&c, 1.0).is_empty());
    }
}
