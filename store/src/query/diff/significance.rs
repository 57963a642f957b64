//! The statistics a diff's verdicts rest on, free of profiles: the tests a diff makes (two
//! proportions; two Poisson rates with exposures; a growth beyond a threshold), the
//! Benjamini–Hochberg procedure that controls the false discovery rate over a family of
//! tests, and the minimum detectable effect. The model behind them is in the parent module.

use super::distributions::{t_quantile_upper, t_upper};

/// The false discovery rate a diff controls unless told otherwise: 1 %.
pub const DEFAULT_FDR: f64 = 0.01;

/// Power the minimum detectable effect is stated at: a change that size is found 4 times in 5.
pub const POWER: f64 = 0.8;

/// How a diff judges a change: the false discovery rate it controls, the dispersion factor
/// φ (≥ 1) its variances are scaled by (see [`super::dispersion`]), and the degrees of freedom
/// of that estimate: with an estimated variance a scaled z is Student's t, not normal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Criteria {
    pub fdr: f64,
    pub dispersion: f64,
    /// Degrees of freedom of the t the scaled z is read as; infinite: the normal.
    pub df: f64,
}

impl Criteria {
    /// At false discovery rate `fdr`, with the binomial variance as it is (normal z).
    pub fn new(fdr: f64) -> Criteria {
        Criteria {
            fdr,
            dispersion: 1.0,
            df: f64::INFINITY,
        }
    }

    /// With variances scaled by `dispersion`, estimated with `df` degrees of freedom.
    pub fn with_dispersion(self, dispersion: f64, df: f64) -> Criteria {
        Criteria {
            dispersion: dispersion.max(1.0),
            df: if df > 0.0 { df } else { f64::INFINITY },
            ..self
        }
    }

    /// `z` with its variance scaled by φ.
    pub fn scale(&self, z: f64) -> f64 {
        z / self.dispersion.max(1.0).sqrt()
    }

    /// A two-sided test of a binomial or Poisson `z`, its variance scaled by φ.
    pub fn test(&self, z: f64) -> Test {
        let z = self.scale(z);
        Test {
            z,
            p: (2.0 * t_upper(z.abs(), self.df)).min(1.0),
            significant: false,
            counted: true,
        }
    }

    /// One-sided p-value of a scaled `z` (that it is this large by chance).
    pub fn upper_p(&self, z: f64) -> f64 {
        t_upper(self.scale(z), self.df)
    }

    /// The scaled z one real change among `m` tests must reach to be found: the procedure's
    /// first step, two-sided p ≤ fdr/m.
    pub fn first_step(&self, m: usize) -> f64 {
        t_quantile_upper(self.fdr / (2.0 * m.max(1) as f64), self.df)
    }

    /// The smallest change of a share `p` that samples of `n1` and `n2` show with probability
    /// [`POWER`] at the threshold of `m` tests: (threshold + z of the power) standard errors
    /// of the difference of two shares at `p`, scaled by √φ. A fraction, like the shares.
    pub fn detectable(&self, p: f64, n1: f64, n2: f64, m: usize) -> Option<f64> {
        if !(n1 > 0.0 && n2 > 0.0 && (0.0..=1.0).contains(&p)) {
            return None;
        }
        let z_power = t_quantile_upper(1.0 - POWER, self.df);
        let se = (p * (1.0 - p) * (1.0 / n1 + 1.0 / n2)).sqrt();
        Some((self.first_step(m) + z_power) * se * self.dispersion.max(1.0).sqrt())
    }
}

/// One test of one change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Test {
    /// The change in standard errors (positive: grew).
    pub z: f64,
    /// Two-sided p-value of `z`.
    pub p: f64,
    /// Whether the Benjamini–Hochberg procedure over the test's family rejects "no change".
    pub significant: bool,
    /// Whether it is one of its family's tests: a share too rare to ever be significant is
    /// shown, but neither counted nor starred ([`tarone_family`]).
    pub counted: bool,
}

impl Test {
    /// A test of a normal `z`, not yet judged against its family.
    pub fn of(z: f64) -> Test {
        Criteria::new(DEFAULT_FDR).test(z)
    }
}

/// Two-proportion z statistic: `k2` of `n2` against `k1` of `n1` (positive when the second
/// share is larger), with the pooled standard error of "no change".
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

/// z of a share growing by more than `shift`: (`k2/n2` − `k1/n1` − `shift`) over the
/// unpooled standard error (no change is not the hypothesis here, so nothing is pooled).
pub fn z_above(k1: f64, n1: f64, k2: f64, n2: f64, shift: f64) -> f64 {
    if n1 <= 0.0 || n2 <= 0.0 {
        return f64::NEG_INFINITY;
    }
    let (p1, p2) = (k1 / n1, k2 / n2);
    let d = p2 - p1 - shift;
    let se = (p1 * (1.0 - p1) / n1 + p2 * (1.0 - p2) / n2).sqrt();
    if se <= 0.0 {
        return if d > 0.0 {
            f64::INFINITY
        } else if d < 0.0 {
            f64::NEG_INFINITY
        } else {
            0.0
        };
    }
    d / se
}

/// z of the change between two shares of one multinomial per side: how far (`a2 - b2`) −
/// (`a1 - b1`) is from 0, where `a` and `b` are the counts of two disjoint sets of outcomes
/// out of `n`. The variance of `(a - b) / n` is `(pa + pb - (pa - pb)²) / n` per side.
pub fn z_difference(a1: f64, b1: f64, n1: f64, a2: f64, b2: f64, n2: f64) -> f64 {
    if n1 <= 0.0 || n2 <= 0.0 {
        return 0.0;
    }
    let var = |a: f64, b: f64, n: f64| {
        let (pa, pb) = (a / n, b / n);
        (pa + pb - (pa - pb).powi(2)).max(0.0) / n
    };
    let diff = (a2 - b2) / n2 - (a1 - b1) / n1;
    let se = (var(a1, b1, n1) + var(a2, b2, n2)).sqrt();
    if se <= 0.0 {
        return if diff == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(diff)
        };
    }
    diff / se
}

/// z of the change of a Poisson rate per unit of exposure: `k2` events over exposure `e2`
/// against `k1` over `e1` (e.g. samples over requests). Conditioned on `k1 + k2`, the second
/// count is binomial with probability `e2 / (e1 + e2)` when the rates are equal: the exact
/// conditional test of two Poisson rates, used here in its normal form.
pub fn z_rate(k1: f64, e1: f64, k2: f64, e2: f64) -> Option<f64> {
    let n = k1 + k2;
    if !(e1 > 0.0 && e2 > 0.0 && n > 0.0 && e1.is_finite() && e2.is_finite()) {
        return None;
    }
    let pi = e2 / (e1 + e2);
    let se = (n * pi * (1.0 - pi)).sqrt();
    if se <= 0.0 {
        return None;
    }
    Some((k2 - n * pi) / se)
}

/// The smallest two-sided p-value a change of a share could reach when `c` samples fall in it
/// on the two sides together, out of `n1` and `n2`: all of them on one side and none on the
/// other, whichever is more extreme.
pub fn attainable_p(criteria: &Criteria, c: f64, n1: f64, n2: f64) -> f64 {
    let one = z_score(c.min(n1), n1, (c - n1).max(0.0), n2).abs();
    let other = z_score((c - n2).max(0.0), n1, c.min(n2), n2).abs();
    criteria.test(one.max(other)).p
}

/// Tarone's rule for tests on counts: of `m` tests whose smallest attainable p-values are
/// `attainable`, the family is those below q / K, with K the smallest number such that at
/// most K tests are below q / K. A test outside it could not be significant at any step of
/// the procedure, so leaving it out takes nothing away; and what it is chosen by, a share's
/// count on both sides together, says nothing of which side the share favours, so the choice
/// does not look at the result (Tarone 1990; Gilbert 2005 for the false discovery rate).
/// Returns whether each test is in the family.
pub fn tarone_family(attainable: &[f64], q: f64) -> Vec<bool> {
    let mut sorted: Vec<f64> = attainable.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len();
    let below = |k: usize| sorted.partition_point(|&p| p <= q / k as f64);
    let k = (1..=m).find(|&k| below(k) <= k).unwrap_or(m).max(1);
    attainable.iter().map(|&p| p <= q / k as f64).collect()
}

/// Marks the tests the Benjamini–Hochberg step-up procedure rejects at false discovery rate
/// `q`: with the p-values sorted, p(1) ≤ … ≤ p(m), the largest k with p(k) ≤ k·q/m, and the k
/// smallest are significant. Every test of the slice is one member of the family.
pub fn benjamini_hochberg(tests: &mut [&mut Test], q: f64) {
    let m = tests.len();
    if m == 0 {
        return;
    }
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (
            tests.get(a).map_or(1.0, |t| t.p),
            tests.get(b).map_or(1.0, |t| t.p),
        );
        pa.total_cmp(&pb)
    });
    let mut k = 0;
    for (rank, &i) in order.iter().enumerate() {
        let p = tests.get(i).map_or(1.0, |t| t.p);
        if p <= (rank + 1) as f64 * q / m as f64 {
            k = rank + 1;
        }
    }
    for (rank, &i) in order.iter().enumerate() {
        if let Some(t) = tests.get_mut(i) {
            t.significant = rank < k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z_scores_behave() {
        assert_eq!(z_score(50.0, 100.0, 50.0, 100.0), 0.0);
        let z = z_score(100.0, 1000.0, 200.0, 1000.0);
        assert!((z - 6.2).abs() < 0.1, "{z}");
        assert!(z_score(10.0, 100.0, 12.0, 100.0).abs() < 1.0);
        assert_eq!(z_score(1.0, 0.0, 1.0, 1.0), 0.0);
        assert!((z_score(0.0, 10.0, 10.0, 10.0) - 1.0 / (0.25f64 * 0.2).sqrt()).abs() < 1e-12);
        assert_eq!(z_score(10.0, 10.0, 10.0, 10.0), 0.0);
    }

    #[test]
    fn differences_of_two_shares() {
        // a grew from 10% to 20% while b stayed at 10%: as the one-share test of a alone when
        // b is empty.
        let z_one = z_difference(100.0, 0.0, 1000.0, 200.0, 0.0, 1000.0);
        let unpooled = 0.1 / ((0.1 * 0.9 + 0.2 * 0.8) / 1000.0f64).sqrt();
        assert!((z_one - unpooled).abs() < 1e-9, "{z_one} {unpooled}");
        assert_eq!(z_difference(5.0, 5.0, 10.0, 5.0, 5.0, 10.0), 0.0);
        // 10% each → 15% and 10%: 5 pp over a standard error of 2.1 pp.
        let z = z_difference(100.0, 100.0, 1000.0, 150.0, 100.0, 1000.0);
        assert!((z - 2.36).abs() < 0.01, "{z}");
    }

    #[test]
    fn rates_per_exposure() {
        // Same rate per request, twice the requests: no change.
        assert!(z_rate(100.0, 10.0, 200.0, 20.0).unwrap().abs() < 1e-9);
        // Twice the rate: 400 where 333 were expected of 500, 10.5 expected to vary.
        let z = z_rate(100.0, 10.0, 400.0, 20.0).unwrap();
        assert!((z - 6.32).abs() < 0.01, "{z}");
        assert!(z_rate(100.0, 10.0, 50.0, 20.0).unwrap() < -5.0);
        assert!(z_rate(0.0, 10.0, 0.0, 20.0).is_none());
        assert!(z_rate(1.0, 0.0, 1.0, 20.0).is_none());
    }

    #[test]
    fn benjamini_hochberg_steps_up() {
        // q = 0.05, m = 5: thresholds 0.01, 0.02, 0.03, 0.04, 0.05. p(3) = 0.025 ≤ 0.03 lets
        // the first three through even though p(2) = 0.021 > 0.02 alone would fail.
        let ps = [0.5, 0.021, 0.001, 0.025, 0.9];
        let mut tests: Vec<Test> = ps
            .iter()
            .map(|&p| Test {
                z: 0.0,
                p,
                significant: false,
                counted: true,
            })
            .collect();
        let mut refs: Vec<&mut Test> = tests.iter_mut().collect();
        benjamini_hochberg(&mut refs, 0.05);
        let sig: Vec<bool> = tests.iter().map(|t| t.significant).collect();
        assert_eq!(sig, [false, true, true, true, false]);
        // Nothing below its threshold: nothing significant.
        let mut tests = [Test::of(1.0), Test::of(2.0)];
        let mut refs: Vec<&mut Test> = tests.iter_mut().collect();
        benjamini_hochberg(&mut refs, 0.01);
        assert!(tests.iter().all(|t| !t.significant));
        benjamini_hochberg(&mut [], 0.01);
    }

    #[test]
    fn null_p_values_rarely_pass() {
        // 1000 null p-values spread evenly over (0, 1): none passes at q = 1% (the smallest,
        // 0.0005, is above 0.01/1000).
        let mut tests: Vec<Test> = (0..1000)
            .map(|i| Test {
                z: 0.0,
                p: (i as f64 + 0.5) / 1000.0,
                significant: false,
                counted: true,
            })
            .collect();
        let mut refs: Vec<&mut Test> = tests.iter_mut().collect();
        benjamini_hochberg(&mut refs, 0.01);
        assert!(tests.iter().all(|t| !t.significant));
    }

    #[test]
    fn criteria_scale_and_read_t() {
        let c = Criteria::new(0.05);
        assert!((c.first_step(1) - 1.959_964).abs() < 1e-5);
        assert!((c.test(1.959_964).p - 0.05).abs() < 1e-6);
        let small = c.detectable(0.5, 10_000.0, 10_000.0, 1).unwrap();
        let large = c.detectable(0.5, 100.0, 100.0, 1).unwrap();
        // (1.96 + 0.84) × sqrt(0.25 × 2 / 10000) = 0.0198.
        assert!((small - 0.0198).abs() < 0.0002, "{small}");
        assert!((large / small - 10.0).abs() < 1e-9);
        assert!(Criteria::new(0.01).first_step(1000) > 4.4);
        assert!(c.detectable(0.5, 0.0, 10.0, 1).is_none());
        // Four times the variance, estimated with 10 degrees of freedom: z halves and is read
        // as t(10): 3.169 is then two-sided p = 0.01, not 0.0015.
        let noisy = c.with_dispersion(4.0, 10.0);
        let t = noisy.test(2.0 * 3.169);
        assert!(
            (t.z - 3.169).abs() < 1e-9 && (t.p - 0.01).abs() < 1e-4,
            "{t:?}"
        );
        assert!((noisy.upper_p(2.0 * 3.169) - 0.005).abs() < 1e-4);
        assert!(noisy.first_step(1) > c.first_step(1));
        assert_eq!(c.with_dispersion(0.5, 0.0), c, "never below binomial");
    }

    #[test]
    fn growth_beyond_a_threshold() {
        // 10% → 20% of 1000 each: 10 pp; more than 5 pp by 5 pp over an unpooled 1.6 pp.
        let z = z_above(100.0, 1000.0, 200.0, 1000.0, 0.05);
        let se = (0.1f64 * 0.9 / 1000.0 + 0.2 * 0.8 / 1000.0).sqrt();
        assert!((z - 0.05 / se).abs() < 1e-9, "{z}");
        assert!(z_above(100.0, 1000.0, 200.0, 1000.0, 0.15) < 0.0);
        assert_eq!(z_above(0.0, 10.0, 10.0, 10.0, 0.5), f64::INFINITY);
        assert_eq!(z_above(1.0, 0.0, 10.0, 10.0, 0.0), f64::NEG_INFINITY);
    }

    #[test]
    fn rare_shares_are_left_out_of_the_family() {
        let c = Criteria::new(0.01);
        // Three samples of 1,000 a side: even all three on one side is z ≈ 1.7.
        let rare = attainable_p(&c, 3.0, 1000.0, 1000.0);
        assert!(rare > 0.05, "{rare}");
        // Two hundred: all on one side would be beyond doubt.
        assert!(attainable_p(&c, 200.0, 1000.0, 1000.0) < 1e-10);
        // Splits are bounded by the sides: 150 samples where one side has 100.
        let bounded = attainable_p(&c, 150.0, 100.0, 1000.0);
        assert!(bounded < 1e-10, "{bounded}");
        // Ninety rare shares and ten common ones: the family is the ten, and K = 10 lets all
        // ten in (each below 0.01 / 10).
        let mut attainable = vec![rare; 90];
        attainable.extend([1e-12; 10]);
        let family = tarone_family(&attainable, 0.01);
        assert_eq!(family.iter().filter(|&&f| f).count(), 10);
        assert!(family[90..].iter().all(|&f| f));
        // Every test attainable: all in.
        assert!(tarone_family(&[1e-9; 5], 0.01).iter().all(|&f| f));
        assert!(tarone_family(&[], 0.01).is_empty());
        // Nothing attainable: nothing in.
        assert!(tarone_family(&[0.5; 3], 0.01).iter().all(|&f| !f));
    }
}
