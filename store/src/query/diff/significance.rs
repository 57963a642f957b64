//! The statistics a diff's verdicts rest on, free of profiles: the normal distribution, the
//! two tests a diff makes (two proportions; two Poisson rates with exposures), the
//! Benjamini–Hochberg procedure that controls the false discovery rate over a family of
//! tests, and the minimum detectable effect. The model behind them is in the parent module.

/// The false discovery rate a diff controls unless told otherwise: 1 %.
pub const DEFAULT_FDR: f64 = 0.01;

/// Power the minimum detectable effect is stated at: a change that size is found 4 times in 5.
pub const POWER: f64 = 0.8;

/// How a diff judges a change: the false discovery rate it controls, and the dispersion
/// factor φ (≥ 1) its variances are scaled by (see [`super::dispersion`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Criteria {
    pub fdr: f64,
    pub dispersion: f64,
}

impl Criteria {
    /// At false discovery rate `fdr`, with the binomial variance as it is.
    pub fn new(fdr: f64) -> Criteria {
        Criteria {
            fdr,
            dispersion: 1.0,
        }
    }

    pub fn with_dispersion(self, dispersion: f64) -> Criteria {
        Criteria {
            dispersion: dispersion.max(1.0),
            ..self
        }
    }

    /// A test of a binomial or Poisson `z`, its variance scaled by φ.
    pub fn test(&self, z: f64) -> Test {
        Test::of(z / self.dispersion.max(1.0).sqrt())
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
}

impl Test {
    /// A test of `z`, not yet judged against its family.
    pub fn of(z: f64) -> Test {
        Test {
            z,
            p: two_sided_p(z),
            significant: false,
        }
    }
}

/// The complementary error function. Chebyshev fit of Numerical Recipes (§6.2, `erfcc`), with
/// a fractional error below 1.2e-7 everywhere: p-values far finer than any decision here.
pub fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    const C: [f64; 10] = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ];
    // Horner's rule from the highest coefficient down.
    let poly = C.iter().rev().fold(0.0, |acc, c| acc * t + c);
    let y = t * (-x * x + poly).exp();
    if x >= 0.0 {
        y
    } else {
        2.0 - y
    }
}

/// P(|Z| ≥ |z|) for a standard normal Z.
pub fn two_sided_p(z: f64) -> f64 {
    if z.is_nan() {
        return 1.0;
    }
    erfc(z.abs() / std::f64::consts::SQRT_2).clamp(0.0, 1.0)
}

/// The `z` with P(Z ≥ z) = `upper` (0 < upper < 1), by bisection: called a few times per
/// diff, so simplicity wins over speed.
pub fn normal_quantile_upper(upper: f64) -> f64 {
    if !(upper > 0.0 && upper < 1.0) {
        return if upper <= 0.0 {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        };
    }
    let tail = |z: f64| 0.5 * erfc(z / std::f64::consts::SQRT_2);
    let (mut lo, mut hi) = (-40.0_f64, 40.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if tail(mid) > upper {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
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

/// |z| that one real change among `m` tests must reach to be found at false discovery rate
/// `q`: the procedure's first step, p ≤ q/m.
pub fn first_step_z(m: usize, q: f64) -> f64 {
    normal_quantile_upper(q / (2.0 * m.max(1) as f64))
}

/// The smallest change of a share `p` (0..1) that samples of `n1` and `n2` would show with
/// probability [`POWER`] at the threshold `z_crit`: (z_crit + z_power) standard errors of
/// the difference of two shares at `p`. A fraction, like the shares.
pub fn detectable_change(p: f64, n1: f64, n2: f64, z_crit: f64) -> Option<f64> {
    if !(n1 > 0.0 && n2 > 0.0 && (0.0..=1.0).contains(&p)) {
        return None;
    }
    let z_power = normal_quantile_upper(1.0 - POWER);
    Some((z_crit + z_power) * (p * (1.0 - p) * (1.0 / n1 + 1.0 / n2)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_tails_match_tables() {
        // Values from any table of the normal distribution.
        assert!((two_sided_p(1.959_964) - 0.05).abs() < 1e-6);
        assert!((two_sided_p(3.290_527) - 0.001).abs() < 1e-7);
        assert!((two_sided_p(-2.575_829) - 0.01).abs() < 1e-7);
        assert_eq!(two_sided_p(0.0), 1.0);
        assert!(two_sided_p(40.0) < 1e-300);
        assert_eq!(two_sided_p(f64::INFINITY), 0.0);
        assert!((erfc(-1.0) - 1.842_700_79).abs() < 1e-7);
        assert!((normal_quantile_upper(0.025) - 1.959_964).abs() < 1e-5);
        assert!((normal_quantile_upper(0.2) - 0.841_621).abs() < 1e-5);
        assert!((normal_quantile_upper(0.5)).abs() < 1e-6);
        assert_eq!(normal_quantile_upper(0.0), f64::INFINITY);
    }

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
            })
            .collect();
        let mut refs: Vec<&mut Test> = tests.iter_mut().collect();
        benjamini_hochberg(&mut refs, 0.01);
        assert!(tests.iter().all(|t| !t.significant));
    }

    #[test]
    fn detectable_changes_shrink_with_samples() {
        let z = first_step_z(1, 0.05);
        assert!((z - 1.959_964).abs() < 1e-5);
        let small = detectable_change(0.5, 10_000.0, 10_000.0, z).unwrap();
        let large = detectable_change(0.5, 100.0, 100.0, z).unwrap();
        // (1.96 + 0.84) × sqrt(0.25 × 2 / 10000) = 0.0198.
        assert!((small - 0.0198).abs() < 0.0002, "{small}");
        assert!((large / small - 10.0).abs() < 1e-9);
        assert!(first_step_z(1000, 0.01) > 4.4);
        assert!(detectable_change(0.5, 0.0, 10.0, z).is_none());
    }
}
