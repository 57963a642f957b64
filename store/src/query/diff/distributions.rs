//! The two distributions a diff's p-values come from: the standard normal, and Student's t for
//! tests whose variance was itself estimated (the dispersion factor, from a side's time slices,
//! with few degrees of freedom). Numerical methods as in Numerical Recipes (3rd ed., §6.1–6.4):
//! a Chebyshev fit for erfc, Lanczos for ln Γ, Lentz's continued fraction for the incomplete
//! beta function. Each is accurate to about 1e-7 relative, far finer than any decision here.

use std::f64::consts::SQRT_2;

/// The complementary error function (Numerical Recipes `erfcc`, fractional error < 1.2e-7).
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

/// P(Z ≥ z) for a standard normal Z.
pub fn normal_upper(z: f64) -> f64 {
    if z.is_nan() {
        return 1.0;
    }
    (0.5 * erfc(z / SQRT_2)).clamp(0.0, 1.0)
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine terms).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const P: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).abs().ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let (first, rest) = P.split_first().unwrap_or((&1.0, &[]));
    let a = rest
        .iter()
        .enumerate()
        .fold(*first, |acc, (i, p)| acc + p / (x + i as f64 + 1.0));
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b).
pub fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast on this side of the mean; use symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(x, a, b) / a
    } else {
        1.0 - front * beta_fraction(1.0 - x, b, a) / b
    }
}

/// The continued fraction of the incomplete beta function, by Lentz's method.
fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let not_tiny = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / not_tiny(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let even = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / not_tiny(1.0 + even * d);
        c = not_tiny(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / not_tiny(1.0 + odd * d);
        c = not_tiny(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// P(T ≥ t) for Student's t with `df` degrees of freedom; the normal when `df` is infinite.
pub fn t_upper(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return 1.0;
    }
    if !df.is_finite() {
        return normal_upper(t);
    }
    if t.is_infinite() {
        return if t > 0.0 { 0.0 } else { 1.0 };
    }
    let half = 0.5 * incomplete_beta(df / (df + t * t), 0.5 * df, 0.5);
    let p = if t >= 0.0 { half } else { 1.0 - half };
    p.clamp(0.0, 1.0)
}

/// The `t` with P(T ≥ t) = `upper`, by bisection (normal when `df` is infinite).
pub fn t_quantile_upper(upper: f64, df: f64) -> f64 {
    if upper <= 0.0 {
        return f64::INFINITY;
    }
    if upper >= 1.0 {
        return f64::NEG_INFINITY;
    }
    if upper > 0.5 {
        return -t_quantile_upper(1.0 - upper, df);
    }
    // t_upper falls from 0.5 at 0: widen until it is below `upper`, then halve.
    let mut hi = 1.0;
    while t_upper(hi, df) > upper && hi < 1e15 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_upper(mid, df) > upper {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_tails_match_tables() {
        // Values from any table of the normal distribution.
        assert!((2.0 * normal_upper(1.959_964) - 0.05).abs() < 1e-6);
        assert!((2.0 * normal_upper(3.290_527) - 0.001).abs() < 1e-7);
        assert!((normal_upper(-2.575_829) - 0.995).abs() < 1e-7);
        assert!((normal_upper(0.0) - 0.5).abs() < 1e-7);
        assert!(normal_upper(40.0) < 1e-300);
        assert_eq!(normal_upper(f64::INFINITY), 0.0);
        assert!((erfc(-1.0) - 1.842_700_79).abs() < 1e-7);
    }

    #[test]
    fn gamma_and_beta_match_known_values() {
        assert!(ln_gamma(1.0).abs() < 1e-12);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
        assert!((ln_gamma(0.25) - 1.288_022_524_698_077_5).abs() < 1e-10);
        // I_x(1, 1) = x; I_x(a, b) = 1 − I_(1−x)(b, a).
        assert!((incomplete_beta(0.3, 1.0, 1.0) - 0.3).abs() < 1e-12);
        let (x, a, b) = (0.2, 3.5, 0.5);
        assert!((incomplete_beta(x, a, b) + incomplete_beta(1.0 - x, b, a) - 1.0).abs() < 1e-12);
        assert_eq!(incomplete_beta(0.0, 2.0, 3.0), 0.0);
        assert_eq!(incomplete_beta(1.0, 2.0, 3.0), 1.0);
    }

    #[test]
    fn student_t_matches_tables() {
        // Two-sided critical values from any t table.
        for (t, df, p) in [
            (1.0, 1.0, 0.5),
            (2.920, 2.0, 0.1),
            (3.169, 10.0, 0.01),
            (3.922, 18.0, 0.001),
            (2.042, 30.0, 0.05),
        ] {
            let got = 2.0 * t_upper(t, df);
            assert!(
                (got - p).abs() < 2e-4 * p.max(0.01) / 0.01,
                "t={t} df={df}: {got}"
            );
        }
        assert!((t_upper(-3.169, 10.0) - 0.995).abs() < 1e-4);
        // Many degrees of freedom: the normal.
        assert!((t_upper(3.0, 1e7) - normal_upper(3.0)).abs() < 1e-7);
        assert_eq!(t_upper(2.0, f64::INFINITY), normal_upper(2.0));
        assert!((t_quantile_upper(0.005, 10.0) - 3.169).abs() < 1e-3);
        assert!((t_quantile_upper(0.025, f64::INFINITY) - 1.959_964).abs() < 1e-5);
        assert!((t_quantile_upper(0.975, 10.0) + 2.228).abs() < 1e-3);
        assert!(t_quantile_upper(1e-9, 1.0) > 1e8);
    }
}
