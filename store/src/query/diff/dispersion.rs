//! How much more than binomial the shares of a side vary, measured on the side itself: the
//! quasi-binomial dispersion factor φ, estimated from the side cut into time slices
//! ([`crate::query::slices`]). Var(share) = φ·p(1−p)/n; every z of the diff is divided by √φ.
//!
//! Why measure it: the counts a CPU profile carries are not independent observations. A
//! sample counts the timer intervals it stands for, and the kernel checks CPU timers on its
//! tick (4 ms at HZ=250), so at `cpu=1ms` one signal counts about 4; phases longer than the
//! interval make neighbouring samples alike; JIT compilation and load drift within a run. Each
//! inflates the variance by a factor the binomial model cannot know, and each shows as shares
//! that vary between slices of one side more than their counts allow.
//!
//! When sample timestamps tell a side's signals apart ([`crate::query::slices::Weights`]), the
//! inflation that counting a signal `w` times causes is known outright, Σw²/Σw, and φ is never
//! taken below it: the slices' estimate, from a few slices, can fall below the truth by
//! chance, the weights' cannot.
//!
//! The estimate compares neighbouring slices (the mean square successive difference, von
//! Neumann's): for every share (a function's self or total) with on average at least
//! [`MIN_EXPECTED`] expected samples in and out of it per slice, X² = Σ (ŝ_{k+1} − ŝ_k)² /
//! (p̂(1−p̂)(1/n_k + 1/n_{k+1})) over the K − 1 pairs of neighbouring slices, ŝ_k = c_k / n_k,
//! which has expectation K − 1 under binomial sampling and φ·(K − 1) under dispersion φ;
//! φ = ΣX² / Σ(K − 1) over both sides, and never below 1. It is pooled over functions because
//! one function's X² alone, over ten slices, is too noisy to use.
//!
//! Why neighbours rather than each slice against the side's mean (Pearson's X²): a run has a
//! shape. A JVM compiles most in its first seconds, so the JIT compiler threads' share falls
//! through a short run and every other share rises with it; measured against the mean, that
//! one smooth trend read as noise 8 times the binomial on the demo's 11-second runs (and hid a
//! regression of 18 pp), while neighbouring slices differ by little of it. A side's share is
//! the average over its whole run, so a trend both runs share is not noise in their
//! difference. Differences between the two sides' processes that stay constant over time (one
//! process's JIT placing a loop less well) are in neither estimate: slices only see variation
//! within a side.

use std::collections::HashMap;

use crate::merge::Merged;
use crate::query::slices::Weights;
use crate::query::top::frame_totals;

/// Expected samples a share needs per slice on average, in and out of it, to count in the
/// estimate.
pub const MIN_EXPECTED: f64 = 5.0;

/// The dispersion factor and what it was estimated from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dispersion {
    /// φ ≥ 1, the larger of the slices' estimate and the weights' floor; 1 when neither.
    pub factor: f64,
    /// The slices' estimate alone (1 when not estimated).
    pub between_slices: f64,
    /// Degrees of freedom behind it (0: not estimated).
    pub df: f64,
    /// Non-empty slices on each side.
    pub slices: [usize; 2],
    /// Σw²/Σw over both sides' timestamped signals, when there were any: the floor of
    /// `factor`.
    pub weights: Option<f64>,
}

impl Dispersion {
    /// The binomial model as it is: φ = 1.
    pub fn binomial() -> Dispersion {
        Dispersion {
            factor: 1.0,
            between_slices: 1.0,
            df: 0.0,
            slices: [0, 0],
            weights: None,
        }
    }

    pub fn estimated(&self) -> bool {
        self.df > 0.0
    }

    /// Degrees of freedom to read a z scaled by this factor with (as Student's t). The
    /// estimate pools many shares, but they are far from independent (one side's self shares
    /// sum to 1, totals nest), so its effective degrees of freedom are nearer those of one
    /// share across the slices than their sum: (K_base − 1) + (K_head − 1), the cautious
    /// choice. Infinite (the normal) when nothing was estimated.
    pub fn test_df(&self) -> f64 {
        if !self.estimated() {
            return f64::INFINITY;
        }
        self.slices
            .iter()
            .filter(|&&k| k >= 2)
            .map(|&k| (k - 1) as f64)
            .sum()
    }
}

/// Per function: counts per slice, self and total.
#[derive(Default)]
struct Counts {
    self_counts: Vec<f64>,
    total_counts: Vec<f64>,
}

/// Estimates φ from each side's slices (merges of one side's time slices), never below what
/// the signals' counts (`weights`, per side) imply.
pub fn estimate(sides: &[&[Merged]], weights: &[Weights]) -> Dispersion {
    let mut all = Weights::default();
    for w in weights {
        all.intervals += w.intervals;
        all.squares += w.squares;
        all.signals += w.signals;
    }
    let floor = all.inflation();
    let d = from_slices(sides);
    Dispersion {
        factor: d.factor.max(floor.unwrap_or(1.0)),
        weights: floor,
        ..d
    }
}

/// φ from the slices alone.
fn from_slices(sides: &[&[Merged]]) -> Dispersion {
    let (mut x2, mut df) = (0.0, 0.0);
    let mut slices = [0usize; 2];
    for (side, merges) in sides.iter().enumerate() {
        let merges: Vec<&Merged> = merges.iter().filter(|m| m.total_count() > 0.0).collect();
        if let Some(s) = slices.get_mut(side) {
            *s = merges.len();
        }
        if merges.len() < 2 {
            continue;
        }
        let k = merges.len();
        let mut n = vec![0.0; k];
        let mut by_name: HashMap<&str, Counts> = HashMap::new();
        for (slice, m) in merges.iter().enumerate() {
            let t = frame_totals(m, None);
            if let Some(x) = n.get_mut(slice) {
                *x = t.count;
            }
            for (i, name) in m.frames.iter().enumerate() {
                let c = by_name.entry(name).or_insert_with(|| Counts {
                    self_counts: vec![0.0; k],
                    total_counts: vec![0.0; k],
                });
                if let (Some(s), Some(v)) = (c.self_counts.get_mut(slice), t.self_count.get(i)) {
                    *s += v;
                }
                if let (Some(s), Some(v)) = (c.total_counts.get_mut(slice), t.total_count.get(i)) {
                    *s += v;
                }
            }
        }
        for c in by_name.values() {
            let mut shares = vec![&c.self_counts];
            // A function whose self and total are the same samples is one share, not two.
            if c.total_counts != c.self_counts {
                shares.push(&c.total_counts);
            }
            for counts in shares {
                if let Some(x) = successive(counts, &n) {
                    x2 += x;
                    df += (k - 1) as f64;
                }
            }
        }
    }
    if df <= 0.0 {
        return Dispersion {
            slices,
            ..Dispersion::binomial()
        };
    }
    let factor = (x2 / df).max(1.0);
    Dispersion {
        factor,
        between_slices: factor,
        df,
        slices,
        weights: None,
    }
}

/// X² of the differences between neighbouring slices' shares, counts `c` out of `n` per
/// slice (K − 1 degrees of freedom), when the slices expect enough samples in and out of the
/// share on average.
fn successive(c: &[f64], n: &[f64]) -> Option<f64> {
    let (sc, sn): (f64, f64) = (c.iter().sum(), n.iter().sum());
    if sn <= 0.0 || n.len() < 2 || n.iter().any(|&nk| nk <= 0.0) {
        return None;
    }
    let p = sc / sn;
    let per_slice = sn / n.len() as f64;
    if per_slice * p < MIN_EXPECTED || per_slice * (1.0 - p) < MIN_EXPECTED {
        return None;
    }
    let pairs = c.iter().zip(n).zip(c.iter().zip(n).skip(1));
    Some(
        pairs
            .map(|((&c0, &n0), (&c1, &n1))| {
                (c1 / n1 - c0 / n0).powi(2) / (p * (1.0 - p) * (1.0 / n0 + 1.0 / n1))
            })
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;
    use otelprof_primitives::rng::SplitMix64;

    /// A slice with `a` samples in function a, `b` in b (each under main).
    fn slice(a: f64, b: f64, weight: f64) -> Merged {
        Merged {
            frames: vec!["main".into(), "a".into(), "b".into()],
            groups: vec![String::new()],
            stacks: vec![
                MergedStack {
                    group: 0,
                    frames: vec![0, 1],
                    value: a * weight,
                    count: a * weight,
                },
                MergedStack {
                    group: 0,
                    frames: vec![0, 2],
                    value: b * weight,
                    count: b * weight,
                },
            ],
            ..Merged::default()
        }
    }

    /// Binomial draws by the workspace's seeded generator.
    fn draws(seed: u64, slices: usize, n: usize, p: f64, weight: f64) -> Vec<Merged> {
        let mut rng = SplitMix64(seed);
        (0..slices)
            .map(|_| {
                let mut a = 0.0;
                for _ in 0..n {
                    if rng.next_f64() < p {
                        a += 1.0;
                    }
                }
                slice(a, n as f64 - a, weight)
            })
            .collect()
    }

    #[test]
    fn binomial_samples_measure_about_one() {
        let (base, head) = (draws(1, 10, 1000, 0.3, 1.0), draws(2, 10, 1000, 0.3, 1.0));
        let d = estimate(&[&base, &head], &[]);
        assert!(d.estimated() && d.slices == [10, 10]);
        assert_eq!(d.test_df(), 18.0);
        // a and b are one share seen twice (b = 1 − a): 4 × 9 degrees of freedom.
        assert_eq!(d.df, 36.0);
        assert!(d.factor < 1.8, "{d:?}");
    }

    #[test]
    fn samples_that_count_four_intervals_measure_about_four() {
        // Each signal counted 4 times, as cpu=1ms on a 4 ms kernel tick does.
        let (base, head) = (draws(3, 10, 1000, 0.3, 4.0), draws(4, 10, 1000, 0.3, 4.0));
        let d = estimate(&[&base, &head], &[]);
        // From 18 pairs of neighbours: an estimate of 4 with a standard error of about 1.3.
        assert!(d.factor > 2.5 && d.factor < 7.0, "{d:?}");
        // Had timestamps said each signal counted 4, φ would not go below 4.
        let four = Weights {
            intervals: 4000.0,
            squares: 16000.0,
            signals: 1000.0,
        };
        let d = estimate(&[&base, &head], &[four, four]);
        assert!(d.factor >= 4.0 && d.weights == Some(4.0), "{d:?}");
    }

    #[test]
    fn a_smooth_trend_is_not_noise() {
        // The share of a falls from 60% to 15% over the run (a JVM's JIT threads warming up),
        // binomial around that trend, 100 samples per slice (a 10-second run at cpu=10ms).
        let side = |seed: u64| -> Vec<Merged> {
            let mut rng = SplitMix64(seed);
            (0..10)
                .map(|k| {
                    let p = 0.6 - 0.05 * k as f64;
                    let mut a = 0.0;
                    for _ in 0..100 {
                        if rng.next_f64() < p {
                            a += 1.0;
                        }
                    }
                    slice(a, 100.0 - a, 1.0)
                })
                .collect()
        };
        let (base, head) = (side(7), side(8));
        let d = estimate(&[&base, &head], &[]);
        // Against each side's mean, the trend alone reads as φ ≈ 1 + 100·Var(trend) / p̂(1−p̂)
        // ≈ 9.8; between neighbours, as 1 + 100·0.05² / 2p̂(1−p̂) ≈ 1.5.
        assert!(d.estimated() && d.factor < 2.5, "{d:?}");
    }

    #[test]
    fn noise_between_neighbours_is_measured() {
        // Shares that jump between 20% and 40% from slice to slice (no trend): noise.
        let side: Vec<Merged> = (0..10)
            .map(|k| {
                if k % 2 == 0 {
                    slice(200.0, 800.0, 1.0)
                } else {
                    slice(400.0, 600.0, 1.0)
                }
            })
            .collect();
        let d = estimate(&[&side, &side], &[]);
        assert!(d.factor > 10.0, "{d:?}");
    }

    #[test]
    fn too_little_to_measure_is_binomial() {
        let one = [slice(10.0, 10.0, 1.0)];
        let d = estimate(&[&one, &one], &[]);
        assert!(!d.estimated());
        assert_eq!(d.factor, 1.0);
        assert_eq!(d.test_df(), f64::INFINITY);
        // Two slices but a share too rare to expect 5 samples per slice.
        let rare = [slice(1.0, 100.0, 1.0), slice(0.0, 100.0, 1.0)];
        assert!(!estimate(&[&rare], &[]).estimated());
    }
}
