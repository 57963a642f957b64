//! What changed per endpoint (or per value of any grouping key): the value per request when
//! both sides know how many requests the endpoint served, else the endpoint's share of its
//! side; each change tested, the endpoints one family (see the parent module).

use std::collections::HashMap;

use crate::merge::Merged;
use crate::select::ProfileType;

use super::functions::testable;
use super::significance::{benjamini_hochberg, z_rate, z_score, Criteria, Test};

/// What a group's test compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// The value per request (requests known on both sides).
    PerRequest,
    /// The group's share of its side's total.
    Share,
}

/// One group (endpoint) on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupChange {
    pub name: String,
    pub base_value: f64,
    pub head_value: f64,
    /// Observations (samples) behind the values.
    pub base_count: f64,
    pub head_count: f64,
    pub base_share: f64,
    pub head_share: f64,
    pub base_requests: Option<f64>,
    pub head_requests: Option<f64>,
    pub basis: Basis,
    /// `None` when not tested (a profile type whose samples cannot be counted).
    pub test: Option<Test>,
}

impl GroupChange {
    fn per(value: f64, requests: Option<f64>) -> Option<f64> {
        requests.filter(|n| *n > 0.0).map(|n| value / n)
    }

    pub fn base_per_request(&self) -> Option<f64> {
        Self::per(self.base_value, self.base_requests)
    }

    pub fn head_per_request(&self) -> Option<f64> {
        Self::per(self.head_value, self.head_requests)
    }

    /// Relative change of the value per request (0.25 = 25 % more per request).
    pub fn per_request_change(&self) -> Option<f64> {
        match (self.base_per_request(), self.head_per_request()) {
            (Some(b), Some(h)) if b > 0.0 => Some(h / b - 1.0),
            _ => None,
        }
    }

    /// The change the group is ranked by, in its basis: value per request, or share.
    pub fn delta(&self) -> f64 {
        match self.basis {
            Basis::PerRequest => {
                self.head_per_request().unwrap_or(0.0) - self.base_per_request().unwrap_or(0.0)
            }
            Basis::Share => self.head_share - self.base_share,
        }
    }

    /// The change, when it is a significant increase.
    pub fn increase(&self) -> Option<f64> {
        self.test
            .filter(|t| t.significant && t.z > 0.0)
            .map(|_| self.delta())
    }
}

/// Every group of two sides, ranked.
#[derive(Clone, Debug, Default)]
pub struct GroupDiff {
    /// Significant increases first, then the rest; in each, per-request changes (by the
    /// value added per request) before share changes (by percentage points), largest first.
    pub rows: Vec<GroupChange>,
    /// Whether any row compares values per request.
    pub per_request: bool,
    /// Tests made, when tested.
    pub tests: Option<usize>,
}

impl GroupDiff {
    /// The group with the largest significant increase.
    pub fn headline(&self) -> Option<&GroupChange> {
        self.rows.first().filter(|g| g.increase().is_some())
    }
}

/// Compares the groups of `base` and `head` (merged with a grouping key). `requests(head,
/// name)` gives a group's request count on one side when known.
pub fn compare_groups(
    base: &Merged,
    head: &Merged,
    requests: &dyn Fn(bool, &str) -> Option<f64>,
    ty: ProfileType,
    criteria: Criteria,
) -> GroupDiff {
    let mut by: HashMap<&str, GroupChange> = HashMap::new();
    for (m, is_head) in [(base, false), (head, true)] {
        for s in &m.stacks {
            let name = m.group(s.group);
            let g = by.entry(name).or_insert_with(|| GroupChange {
                name: name.to_owned(),
                base_value: 0.0,
                head_value: 0.0,
                base_count: 0.0,
                head_count: 0.0,
                base_share: 0.0,
                head_share: 0.0,
                base_requests: None,
                head_requests: None,
                basis: Basis::Share,
                test: None,
            });
            if is_head {
                g.head_value += s.value;
                g.head_count += s.count;
            } else {
                g.base_value += s.value;
                g.base_count += s.count;
            }
        }
    }
    let (bt, ht) = (base.total(), head.total());
    let (bn, hn) = (base.total_count(), head.total_count());
    // Value per observation on each side (the CPU sampling interval): turns requests into
    // the samples expected per request, so that sides sampled at different rates compare.
    let per_sample = |total: f64, n: f64| if n > 0.0 { total / n } else { 0.0 };
    let (b_unit, h_unit) = (per_sample(bt, bn), per_sample(ht, hn));
    let tested = testable(ty);
    let mut rows: Vec<GroupChange> = by
        .into_values()
        .map(|mut g| {
            g.base_share = if bt > 0.0 { g.base_value / bt } else { 0.0 };
            g.head_share = if ht > 0.0 { g.head_value / ht } else { 0.0 };
            g.base_requests = requests(false, &g.name);
            g.head_requests = requests(true, &g.name);
            let known = |r: Option<f64>| r.is_some_and(|n| n > 0.0);
            if known(g.base_requests) && known(g.head_requests) {
                g.basis = Basis::PerRequest;
            }
            if tested {
                let z = match g.basis {
                    Basis::PerRequest => {
                        let exposure = |r: Option<f64>, unit: f64| {
                            if unit > 0.0 {
                                r.unwrap_or(0.0) / unit
                            } else {
                                0.0
                            }
                        };
                        z_rate(
                            g.base_count,
                            exposure(g.base_requests, b_unit),
                            g.head_count,
                            exposure(g.head_requests, h_unit),
                        )
                    }
                    Basis::Share => Some(z_score(g.base_count, bn, g.head_count, hn)),
                };
                g.test = z.map(|z| criteria.test(z));
            }
            g
        })
        .collect();
    let tests = tested.then(|| {
        let mut family: Vec<&mut Test> = rows.iter_mut().filter_map(|g| g.test.as_mut()).collect();
        let n = family.len();
        benjamini_hochberg(&mut family, criteria.fdr);
        n
    });
    // Significant increases first, then the rest; within each, values per request before
    // shares (their changes are in different units), each by its change, largest first.
    rows.sort_by(|a, b| {
        let tier = |g: &GroupChange| {
            let significant = g.increase().is_some();
            match (significant, g.basis) {
                (true, Basis::PerRequest) => 0,
                (true, Basis::Share) => 1,
                (false, Basis::PerRequest) => 2,
                (false, Basis::Share) => 3,
            }
        };
        tier(a)
            .cmp(&tier(b))
            .then_with(|| b.delta().total_cmp(&a.delta()))
            .then_with(|| a.name.cmp(&b.name))
    });
    GroupDiff {
        per_request: rows.iter().any(|g| g.basis == Basis::PerRequest),
        rows,
        tests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;

    /// One stack per endpoint with `samples` samples of 10 ms each.
    fn side(groups: &[(&str, f64)]) -> Merged {
        Merged {
            unit: "nanoseconds".into(),
            frames: vec!["main".into()],
            groups: groups.iter().map(|(g, _)| (*g).to_owned()).collect(),
            stacks: groups
                .iter()
                .enumerate()
                .map(|(i, (_, n))| MergedStack {
                    group: i as u32,
                    frames: vec![0],
                    value: n * 1e7,
                    count: *n,
                })
                .collect(),
            ..Merged::default()
        }
    }

    #[test]
    fn a_regression_confined_to_one_endpoint_is_named_per_request() {
        // /cart doubled its CPU per request; the head served twice the requests everywhere.
        let base = side(&[
            ("GET /cart", 1000.0),
            ("GET /home", 3000.0),
            ("<none>", 200.0),
        ]);
        let head = side(&[
            ("GET /cart", 4000.0),
            ("GET /home", 6000.0),
            ("<none>", 200.0),
        ]);
        let requests = |is_head: bool, name: &str| match name {
            "GET /cart" | "GET /home" => Some(if is_head { 2000.0 } else { 1000.0 }),
            _ => None,
        };
        let d = compare_groups(
            &base,
            &head,
            &requests,
            ProfileType::Cpu,
            Criteria::new(0.01),
        );
        assert!(d.per_request);
        assert_eq!(d.tests, Some(3));
        let cart = d.headline().unwrap();
        assert_eq!(cart.name, "GET /cart");
        assert_eq!(cart.basis, Basis::PerRequest);
        assert!((cart.per_request_change().unwrap() - 1.0).abs() < 1e-9);
        assert!((cart.delta() - 1e7).abs() < 1e-3, "{}", cart.delta());
        let home = d.rows.iter().find(|g| g.name == "GET /home").unwrap();
        assert!(home.per_request_change().unwrap().abs() < 1e-9);
        assert!(!home.test.unwrap().significant, "{home:?}");
        // <none> has no requests: compared by share, and its share fell significantly.
        let none = d.rows.iter().find(|g| g.name == "<none>").unwrap();
        assert_eq!(none.basis, Basis::Share);
        assert!(none.test.unwrap().significant && none.test.unwrap().z < 0.0);
    }

    #[test]
    fn sampling_rates_may_differ_between_sides() {
        // The head sampled 10 times as often (1 ms): ten times the samples, each a tenth of
        // the CPU. The CPU per request is the same.
        let base = side(&[("GET /a", 1000.0)]);
        let mut head = side(&[("GET /a", 10_000.0)]);
        for s in &mut head.stacks {
            s.value /= 10.0;
        }
        let requests = |_: bool, _: &str| Some(500.0);
        let d = compare_groups(
            &base,
            &head,
            &requests,
            ProfileType::Cpu,
            Criteria::new(0.01),
        );
        let a = &d.rows[0];
        assert!(a.per_request_change().unwrap().abs() < 1e-9);
        assert!(a.test.unwrap().z.abs() < 1e-9);
    }

    #[test]
    fn without_requests_shares_are_compared() {
        let base = side(&[("GET /a", 500.0), ("GET /b", 500.0)]);
        let head = side(&[("GET /a", 800.0), ("GET /b", 200.0)]);
        let d = compare_groups(
            &base,
            &head,
            &|_, _| None,
            ProfileType::Cpu,
            Criteria::new(0.01),
        );
        assert!(!d.per_request);
        assert_eq!(d.headline().unwrap().name, "GET /a");
        assert!((d.rows[0].delta() - 0.3).abs() < 1e-9);
        let wall = compare_groups(
            &base,
            &head,
            &|_, _| None,
            ProfileType::Wall,
            Criteria::new(0.01),
        );
        assert!(wall.tests.is_none() && wall.headline().is_none());
        assert_eq!(
            wall.rows[0].name, "GET /a",
            "untested, still ranked by change"
        );
        assert_eq!(wall.rows[1].name, "GET /b");
    }
}
