//! How much more than binomial the shares of a side vary: the quasi-binomial dispersion
//! factor φ, Var(share) = φ·p(1−p)/n; every z of the diff is divided by √φ.
//!
//! Why it is needed: the counts a CPU profile carries are not independent observations. A
//! sample counts the timer intervals it stands for, and the kernel checks CPU timers on its
//! tick (4 ms at HZ=250), so at `cpu=1ms` one signal counts about 4; phases longer than the
//! interval make neighbouring samples alike; JIT compilation and load drift within a run. Each
//! inflates the variance by a factor the binomial model cannot know.
//!
//! # Measured: between time slices
//!
//! Each of those shows as shares that vary between time slices of one side
//! ([`crate::query::slices`]) more than their counts allow. The estimate compares neighbouring
//! slices (the mean square successive difference, von Neumann's): for every share (a
//! function's self or total) with on average at least [`MIN_EXPECTED`] expected samples in and
//! out of it per slice, X² = Σ (ŝ_{k+1} − ŝ_k)² / (p̂(1−p̂)(1/n_k + 1/n_{k+1})) over the K − 1
//! pairs of neighbouring slices, ŝ_k = c_k / n_k, which has expectation K − 1 under binomial
//! sampling and φ·(K − 1) under dispersion φ; φ̂ = ΣX² / Σ(K − 1) over both sides. It is pooled
//! over functions because one function's X² alone, over ten slices, is too noisy to use.
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
//!
//! # Assumed: an information rate, when slices are few
//!
//! A side written as one profile without sample timestamps (a 15-second run at the default
//! 60-second period) has one slice, and three profiles have three: too few to measure φ, and an
//! estimate from them is itself so uncertain that reading z against it (Student's t with 2 or
//! 4 degrees of freedom over a family of 80 tests) would call no change significant, however
//! large. So the diff also holds an assumption, [`Assumption`], and combines it with what the
//! slices measured the way a prior variance is combined with a sample variance (Smyth's
//! moderated variance): φ = (ν₀·φ₀ + d·φ̂) / (ν₀ + d), read with ν₀ + d degrees of freedom, `d`
//! the slices' ([`Dispersion::measured_df`]). With no slices φ is φ₀; with ten a side the
//! slices weigh more than the assumption.
//!
//! The assumption is stated as a rate: a CPU-second of a thread carries at most
//! [`INFORMATION_RATE`] independent observations of where that thread is, however often it is
//! sampled. A side sampled `r` times per CPU-second is then assumed φ₀ = max(1, r / 40): 2.5 at
//! the default `cpu=10ms`, 25 at `cpu=1ms`. Where the number comes from: the rate a measured
//! φ̂ implies, r / φ̂, from ten slices with timestamps, was 79 per second on the diff tests'
//! service at 10 ms, 66 at 1 ms (tick-bound timers), and 37 on the demo's shop (requests of a
//! few milliseconds, so neighbouring samples are alike; 11-second runs with their warm-up);
//! 40 is at the low end. The spread of those rates (about ±38 % on a log scale) is what a
//! scaled χ² with about 14 degrees of freedom has, hence [`ASSUMED_DF`].
//!
//! When sample timestamps tell a side's signals apart ([`crate::query::slices::Weights`]), the
//! inflation that counting a signal `w` times causes is known outright, Σw²/Σw, and φ is never
//! taken below it.

use std::collections::HashMap;

use crate::merge::Merged;
use crate::query::slices::Weights;
use crate::query::top::frame_totals;

/// Expected samples a share needs per slice on average, in and out of it, to count in the
/// estimate.
pub const MIN_EXPECTED: f64 = 5.0;

/// Independent observations a CPU-second is assumed to carry at most (see the module doc).
pub const INFORMATION_RATE: f64 = 40.0;

/// Degrees of freedom the assumption weighs as much as (see the module doc).
pub const ASSUMED_DF: f64 = 14.0;

/// What is assumed of the noise before the slices are looked at: φ₀ and its weight ν₀.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Assumption {
    /// φ₀ ≥ 1.
    pub factor: f64,
    /// ν₀: the degrees of freedom it is worth.
    pub df: f64,
    /// Samples per CPU-second of the side sampled most often, when the merges tell.
    pub rate: Option<f64>,
}

impl Assumption {
    /// φ₀ for sides sampled as `merges` were: each side's samples per CPU-second over
    /// [`INFORMATION_RATE`], the larger side's (a CPU profile's values are nanoseconds and its
    /// counts samples). Binomial (φ₀ = 1) when no side tells its rate.
    pub fn of(merges: &[&Merged]) -> Assumption {
        let rate = merges
            .iter()
            .filter(|m| m.unit == "nanoseconds")
            .filter_map(|m| {
                let (count, seconds) = (m.total_count(), m.total() / 1e9);
                (count > 0.0 && seconds > 0.0).then(|| count / seconds)
            })
            .reduce(f64::max);
        Assumption {
            factor: rate.map_or(1.0, |r| (r / INFORMATION_RATE).max(1.0)),
            df: ASSUMED_DF,
            rate,
        }
    }
}

/// The dispersion factor and what it was estimated from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dispersion {
    /// φ ≥ 1: the slices' estimate combined with the assumption, never below the weights'
    /// floor; 1 when nothing was estimated or assumed.
    pub factor: f64,
    /// The slices' estimate alone (1 when not estimated).
    pub between_slices: f64,
    /// Degrees of freedom of the pooled estimate, over every share (0: not estimated).
    pub df: f64,
    /// Non-empty slices on each side.
    pub slices: [usize; 2],
    /// Σw²/Σw over both sides' timestamped signals, when there were any: the floor of
    /// `factor`.
    pub weights: Option<f64>,
    /// What the slices' estimate was combined with; `None`: the binomial as it is.
    pub assumed: Option<Assumption>,
}

impl Dispersion {
    /// The binomial model as it is: φ = 1, read as the normal.
    pub fn binomial() -> Dispersion {
        Dispersion {
            factor: 1.0,
            between_slices: 1.0,
            df: 0.0,
            slices: [0, 0],
            weights: None,
            assumed: None,
        }
    }

    pub fn estimated(&self) -> bool {
        self.df > 0.0
    }

    /// Degrees of freedom the slices' estimate weighs as much as. It pools many shares, but
    /// they are far from independent (one side's self shares sum to 1, totals nest), so its
    /// effective degrees of freedom are nearer those of one share across the slices than
    /// their sum: (K_base − 1) + (K_head − 1), the cautious choice.
    pub fn measured_df(&self) -> f64 {
        if !self.estimated() {
            return 0.0;
        }
        self.slices
            .iter()
            .filter(|&&k| k >= 2)
            .map(|&k| (k - 1) as f64)
            .sum()
    }

    /// Degrees of freedom to read a z scaled by this factor with (as Student's t): the
    /// measured ones plus the assumption's; infinite (the normal) when nothing was estimated
    /// or assumed.
    pub fn test_df(&self) -> f64 {
        match self.assumed {
            Some(a) => a.df + self.measured_df(),
            None if self.estimated() => self.measured_df(),
            None => f64::INFINITY,
        }
    }

    /// How much of φ the slices decided, 0 to 1 (the rest is the assumption's).
    pub fn measured_weight(&self) -> f64 {
        let d = self.measured_df();
        match self.assumed {
            Some(a) if a.df + d > 0.0 => d / (a.df + d),
            Some(_) => 0.0,
            None => f64::from(u8::from(self.estimated())),
        }
    }
}

/// Per function: counts per slice, self and total.
#[derive(Default)]
struct Counts {
    self_counts: Vec<f64>,
    total_counts: Vec<f64>,
}

/// Estimates φ from each side's slices (merges of one side's time slices), combined with
/// `assumed` (see the module doc), never below what the signals' counts (`weights`, per side)
/// imply.
pub fn estimate(sides: &[&[Merged]], weights: &[Weights], assumed: Assumption) -> Dispersion {
    let mut all = Weights::default();
    for w in weights {
        all.intervals += w.intervals;
        all.squares += w.squares;
        all.signals += w.signals;
    }
    let floor = all.inflation();
    let measured = from_slices(sides);
    let d = measured.measured_df();
    let combined = (assumed.df * assumed.factor + d * measured.between_slices) / (assumed.df + d);
    let combined = if combined.is_finite() {
        combined
    } else {
        measured.between_slices
    };
    Dispersion {
        factor: combined.max(floor.unwrap_or(1.0)).max(1.0),
        weights: floor,
        assumed: Some(assumed),
        ..measured
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
        assumed: None,
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

    /// The slices' estimate alone: an assumption that weighs nothing.
    const MEASURED_ONLY: Assumption = Assumption {
        factor: 1.0,
        df: 0.0,
        rate: None,
    };

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
        let d = estimate(&[&base, &head], &[], MEASURED_ONLY);
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
        let d = estimate(&[&base, &head], &[], MEASURED_ONLY);
        // From 18 pairs of neighbours: an estimate of 4 with a standard error of about 1.3.
        assert!(d.factor > 2.5 && d.factor < 7.0, "{d:?}");
        // Had timestamps said each signal counted 4, φ would not go below 4.
        let four = Weights {
            intervals: 4000.0,
            squares: 16000.0,
            signals: 1000.0,
        };
        let d = estimate(&[&base, &head], &[four, four], MEASURED_ONLY);
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
        let d = estimate(&[&base, &head], &[], MEASURED_ONLY);
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
        let d = estimate(&[&side, &side], &[], MEASURED_ONLY);
        assert!(d.factor > 10.0, "{d:?}");
    }

    #[test]
    fn too_little_to_measure_is_the_assumption() {
        let one = [slice(10.0, 10.0, 1.0)];
        let assumed = Assumption {
            factor: 2.5,
            df: ASSUMED_DF,
            rate: Some(100.0),
        };
        let d = estimate(&[&one, &one], &[], assumed);
        assert!(!d.estimated());
        assert_eq!(d.factor, 2.5);
        assert_eq!(d.test_df(), ASSUMED_DF);
        assert_eq!(d.measured_weight(), 0.0);
        // Two slices but a share too rare to expect 5 samples per slice.
        let rare = [slice(1.0, 100.0, 1.0), slice(0.0, 100.0, 1.0)];
        assert!(!estimate(&[&rare], &[], MEASURED_ONLY).estimated());
        // Nothing assumed and nothing measured: the binomial, read as the normal.
        assert_eq!(Dispersion::binomial().test_df(), f64::INFINITY);
    }

    #[test]
    fn few_slices_are_combined_with_the_assumption() {
        // Three slices a side whose shares jump between 20% and 40%: measured φ̂ far above
        // the assumed 2.5, from 2 + 2 degrees of freedom.
        let side: Vec<Merged> = [(200.0, 800.0), (400.0, 600.0), (200.0, 800.0)]
            .iter()
            .map(|&(a, b)| slice(a, b, 1.0))
            .collect();
        let measured = estimate(&[&side, &side], &[], MEASURED_ONLY);
        let assumed = Assumption {
            factor: 2.5,
            df: ASSUMED_DF,
            rate: Some(100.0),
        };
        let d = estimate(&[&side, &side], &[], assumed);
        assert_eq!(d.measured_df(), 4.0);
        let expected = (ASSUMED_DF * 2.5 + 4.0 * measured.factor) / (ASSUMED_DF + 4.0);
        assert!((d.factor - expected).abs() < 1e-9, "{d:?}");
        assert!(d.factor > 2.5 && d.factor < measured.factor, "{d:?}");
        assert_eq!(d.test_df(), ASSUMED_DF + 4.0);
        // Ten slices a side of binomial noise weigh 18 degrees of freedom against the
        // assumption's 14, and pull φ from 2.5 towards 1.
        let (base, head) = (draws(1, 10, 1000, 0.3, 1.0), draws(2, 10, 1000, 0.3, 1.0));
        let d = estimate(&[&base, &head], &[], assumed);
        assert!((d.measured_weight() - 18.0 / 32.0).abs() < 1e-9);
        assert!(d.factor < 2.5 && d.factor > 1.0, "{d:?}");
    }

    #[test]
    fn the_assumption_follows_the_sampling_rate() {
        // 100 samples of 10 ms: 100 per CPU-second, φ₀ = 100 / 40.
        let at = |count: f64, nanos: f64| Merged {
            unit: "nanoseconds".into(),
            frames: vec!["main".into()],
            groups: vec![String::new()],
            stacks: vec![MergedStack {
                group: 0,
                frames: vec![0],
                value: nanos,
                count,
            }],
            ..Merged::default()
        };
        let ten_ms = at(100.0, 1e9);
        let one_ms = at(1000.0, 1e9);
        let slow = at(10.0, 1e9);
        assert_eq!(Assumption::of(&[&ten_ms, &ten_ms]).factor, 2.5);
        // The side sampled more often decides.
        let a = Assumption::of(&[&ten_ms, &one_ms]);
        assert_eq!((a.factor, a.rate), (25.0, Some(1000.0)));
        // Sampled more slowly than the rate: binomial.
        assert_eq!(Assumption::of(&[&slow, &slow]).factor, 1.0);
        // Values that are not CPU time tell no rate.
        let counts = Merged {
            unit: "count".into(),
            ..ten_ms.clone()
        };
        let a = Assumption::of(&[&counts]);
        assert_eq!((a.factor, a.rate, a.df), (1.0, None, ASSUMED_DF));
    }
}
