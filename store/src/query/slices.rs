//! A second kind of merge, for `diff`: each side cut into equal slices of its time window and
//! merged slice by slice, so that the diff can measure how much shares vary *within* a side
//! beyond what sampling alone explains ([`crate::query::diff::dispersion`]).
//!
//! A sample with a timestamp goes to the slice its timestamp is in (the selector's time cut,
//! as `--from`/`--to` do). A profile whose samples have none goes whole to the slice its
//! middle is in, never to two.
//!
//! The same pass reads, where timestamps allow, how many timer intervals each CPU signal
//! counts ([`Weights`]): the agent writes one timestamp per counted interval, the surplus of a
//! signal that counted several as copies of its own timestamp, so equal timestamps of one
//! sample are one signal.

use crate::columnar::schema::{HOUR, SLOT};
use crate::error::Error;
use crate::merge::{Merged, Merger};
use crate::query::Spec;
use crate::reader::{Decoded, Profiles};
use crate::select::{Measure, ProfileType, ProfileVerdict, Selector};

/// Most slices a side is cut into.
pub const SLICES: usize = 10;
/// Samples a slice should hold, for its shares to say something about their variance.
pub const SAMPLES_PER_SLICE: f64 = 50.0;

/// Slices for a side of `samples` samples: one per [`SAMPLES_PER_SLICE`], 2 to [`SLICES`].
pub fn slices_for(samples: f64) -> usize {
    let n = (samples / SAMPLES_PER_SLICE).floor();
    if n >= SLICES as f64 {
        SLICES
    } else if n >= 2.0 {
        n as usize
    } else {
        2
    }
}

/// One side to slice: the type and selection of its merge, and the time its merge covered.
#[derive(Clone, Debug)]
pub struct SliceSpec {
    pub ty: ProfileType,
    /// What the side's merge added up and whether its frames were lines ([`Spec::view`]): the
    /// slices must cut the same table.
    ///
    /// [`Spec::view`]: crate::query::Spec::view
    pub measure: Measure,
    pub lines: bool,
    pub selector: Selector,
    /// Earliest start and latest end of the side's profiles ([`Merged::window`]).
    pub window: (i64, i64),
    /// Slices to cut it into (see [`slices_for`]).
    pub slices: usize,
}

impl SliceSpec {
    /// The slices' boundaries: the window, narrowed to the selector's time range, cut in
    /// [`SliceSpec::slices`] equal parts (fewer when it is too short to cut). When each part
    /// is an hour or longer, the cuts inside the window fall on whole hours (the nearest), so
    /// that a store's hourly rollups can answer the hours in between
    /// ([`SliceSpec::whole_hours`]).
    fn bounds(&self) -> Vec<(i64, i64)> {
        let (from, to) = self.range();
        let span = i128::from(to) - i128::from(from);
        let n = i128::try_from(self.slices)
            .unwrap_or(1)
            .clamp(1, span.max(1));
        // Whole hours when the parts are an hour or more, whole slots when a slot or more.
        let grain = [HOUR, SLOT]
            .into_iter()
            .map(i128::from)
            .find(|g| span >= n * g);
        let at = |k: i128| {
            let t = i128::from(from) + span * k / n;
            let t = match grain {
                Some(g) if k > 0 && k < n => (t + g / 2).div_euclid(g) * g,
                _ => t,
            };
            i64::try_from(t).unwrap_or(to)
        };
        (0..n).map(|k| (at(k), at(k + 1))).collect()
    }

    /// The window, narrowed to the selector's time range.
    fn range(&self) -> (i64, i64) {
        let from = self
            .selector
            .from
            .map_or(self.window.0, |f| f.max(self.window.0));
        let to = self
            .selector
            .to
            .map_or(self.window.1, |t| t.min(self.window.1));
        (from, to)
    }

    /// Whether the slices are whole hours between their ends ([`SliceSpec::bounds`]).
    pub fn whole_hours(&self) -> bool {
        self.at_least(HOUR)
    }

    /// Whether the slices are whole slots between their ends ([`SliceSpec::bounds`]).
    pub fn whole_slots(&self) -> bool {
        self.at_least(SLOT)
    }

    /// Whether `other` cuts the same slices of the same samples: a guess made before the
    /// side's merge ([`merge_many_and_slices`]) against the side as its merge found it.
    pub fn cuts_like(&self, other: &SliceSpec) -> bool {
        self.ty == other.ty
            && self.measure == other.measure
            && self.lines == other.lines
            && self.selector == other.selector
            && self.bounds() == other.bounds()
    }

    fn at_least(&self, grain: i64) -> bool {
        let (from, to) = self.range();
        let n = i128::try_from(self.slices).unwrap_or(1).max(1);
        i128::from(to) - i128::from(from) >= n * i128::from(grain)
    }
}

/// What the signals of a side's timestamped CPU samples counted: `intervals` over `signals`,
/// and the sum of each signal's count squared.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Weights {
    pub intervals: f64,
    pub squares: f64,
    pub signals: f64,
}

impl Weights {
    /// Σw² / Σw: the factor by which counting a signal `w` times inflates the variance of a
    /// share over what its count would have were each interval observed apart. `None` when no
    /// timestamped sample was seen.
    pub fn inflation(&self) -> Option<f64> {
        (self.intervals > 0.0 && self.signals > 0.0).then(|| self.squares / self.intervals)
    }

    fn absorb(&mut self, o: Weights) {
        self.intervals += o.intervals;
        self.squares += o.squares;
        self.signals += o.signals;
    }

    /// Adds the signals of the samples of `d` that `spec` selects, in its time range, when
    /// their timestamps number their counts.
    fn add(&mut self, spec: &SliceSpec, d: &Decoded) {
        let p = &d.profile;
        if spec.ty != ProfileType::Cpu {
            return;
        }
        let Some(count_index) = spec.ty.value_index(p, spec.measure).and_then(|vi| vi.count) else {
            return;
        };
        let ProfileVerdict::Included { sample_conditions } =
            spec.selector.profile_verdict(&d.resource, p)
        else {
            return;
        };
        let inside = |t: i64| {
            spec.selector.from.is_none_or(|f| t >= f) && spec.selector.to.is_none_or(|e| t < e)
        };
        let mut times: Vec<i64> = Vec::new();
        for sample in &p.samples {
            let n = sample.timestamps.len();
            let counted = sample.values.get(count_index).copied();
            if n == 0 || counted != i64::try_from(n).ok() {
                continue;
            }
            if spec.selector.sample_share(p, sample, &sample_conditions) <= 0.0 {
                continue;
            }
            times.clear();
            times.extend(sample.timestamps.iter().copied().filter(|&t| inside(t)));
            times.sort_unstable();
            for run in times.chunk_by(|a, b| a == b) {
                let w = run.len() as f64;
                self.intervals += w;
                self.squares += w * w;
                self.signals += 1.0;
            }
        }
    }
}

/// Per slice: one merger for samples cut by timestamp, one for whole profiles.
struct SliceMergers {
    bounds: (i64, i64),
    cut: Merger,
    whole: Merger,
}

/// Each side of a diff, sliced.
#[derive(Debug, Default)]
pub struct Sliced {
    /// Per side, the merges of its slices in time order.
    pub slices: Vec<Vec<Merged>>,
    /// Per side, what its timestamped CPU signals counted.
    pub weights: Vec<Weights>,
}

/// The slices of every side being merged ([`merge_slices`]), and their signals' weights.
struct SliceState {
    sides: Vec<Vec<SliceMergers>>,
    weights: Vec<Weights>,
}

impl SliceState {
    fn new(sides: &[SliceSpec], bounds: &[Vec<(i64, i64)>]) -> SliceState {
        let mergers = sides
            .iter()
            .zip(bounds)
            .map(|(side, bounds)| {
                bounds
                    .iter()
                    .map(|&(from, to)| {
                        let mut cut = side.selector.clone();
                        cut.from = Some(cut.from.map_or(from, |f| f.max(from)));
                        cut.to = Some(cut.to.map_or(to, |t| t.min(to)));
                        SliceMergers {
                            bounds: (from, to),
                            cut: Merger::new(side.ty, cut, None)
                                .measure(side.measure)
                                .lines(side.lines),
                            whole: Merger::new(side.ty, side.selector.clone(), None)
                                .measure(side.measure)
                                .lines(side.lines),
                        }
                    })
                    .collect()
            })
            .collect();
        SliceState {
            sides: mergers,
            weights: vec![Weights::default(); sides.len()],
        }
    }

    fn add(&mut self, sides: &[SliceSpec], d: &Decoded) {
        let p = &d.profile;
        for (w, spec) in self.weights.iter_mut().zip(sides) {
            w.add(spec, d);
        }
        let timestamped = p.samples.first().is_some_and(|s| !s.timestamps.is_empty());
        let middle = p.time_nanos.saturating_add(p.duration_nanos.max(0) / 2);
        for side in self.sides.iter_mut() {
            if timestamped {
                for s in side.iter_mut() {
                    s.cut.add(&d.resource, p);
                }
                continue;
            }
            // The slice the profile's middle is in; the first or last when it is outside.
            let k = side
                .iter()
                .position(|s| middle < s.bounds.1)
                .unwrap_or(side.len().saturating_sub(1));
            if let Some(s) = side.get_mut(k) {
                s.whole.add(&d.resource, p);
            }
        }
    }

    fn absorb(&mut self, other: SliceState) {
        for (into, from) in self.sides.iter_mut().zip(other.sides) {
            for (a, b) in into.iter_mut().zip(from) {
                a.cut.absorb(b.cut);
                a.whole.absorb(b.whole);
            }
        }
        for (into, from) in self.weights.iter_mut().zip(other.weights) {
            into.absorb(from);
        }
    }

    fn finish(self) -> Sliced {
        let slices = self
            .sides
            .into_iter()
            .map(|side| {
                side.into_iter()
                    .map(|mut s| {
                        s.cut.absorb(s.whole);
                        s.cut.finish()
                    })
                    .collect()
            })
            .collect();
        Sliced {
            slices,
            weights: self.weights,
        }
    }
}

/// Merges every side of `sides` slice by slice, in one pass over the files.
pub fn merge_slices(source: &impl Profiles, sides: &[SliceSpec]) -> Result<Sliced, Error> {
    let bounds: Vec<Vec<(i64, i64)>> = sides.iter().map(SliceSpec::bounds).collect();
    let states = source.scan(
        || SliceState::new(sides, &bounds),
        |state, d| state.add(sides, d),
    )?;
    let mut combined = SliceState::new(sides, &bounds);
    for state in states {
        combined.absorb(state);
    }
    Ok(combined.finish())
}

/// [`super::merge_many`] of `specs` and [`merge_slices`] of `sides`, in one pass over the
/// files: for a diff whose sides' slices are known before their merges (`sides` as the
/// merges will make them, [`SliceSpec::cuts_like`] tells), so that the files are read once.
pub fn merge_many_and_slices<const N: usize>(
    source: &impl Profiles,
    specs: &[Spec; N],
    sides: &[SliceSpec],
) -> Result<([(Merged, ProfileType); N], Sliced), Error> {
    let bounds: Vec<Vec<(i64, i64)>> = sides.iter().map(SliceSpec::bounds).collect();
    let make = || {
        (
            specs.each_ref().map(super::mergers_of),
            SliceState::new(sides, &bounds),
        )
    };
    let states = source.scan(make, |(mergers, slices), d| {
        super::add_to_all(mergers, d);
        slices.add(sides, d);
    })?;
    let (mut merges, mut slices) = make();
    for (m, s) in states {
        super::absorb_all(&mut merges, m);
        slices.absorb(s);
    }
    let merges = super::finish_all(merges);
    Ok((merges, slices.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cut_into_equal_slices_within_the_selection() {
        let selector = Selector {
            from: Some(150),
            ..Selector::default()
        };
        let spec = SliceSpec {
            ty: ProfileType::Cpu,
            measure: Measure::Amount,
            lines: false,
            selector,
            window: (100, 1150),
            slices: 10,
        };
        let b = spec.bounds();
        assert_eq!(b.len(), 10);
        assert_eq!(b[0], (150, 250));
        assert_eq!(b[9], (1050, 1150));
        assert!(b.windows(2).all(|w| w[0].1 == w[1].0));
        // A window shorter than the slices asked for: as many as it has nanoseconds.
        let short = SliceSpec {
            window: (0, 3),
            selector: Selector::default(),
            ..spec
        };
        assert_eq!(short.bounds(), [(0, 1), (1, 2), (2, 3)]);
    }

    #[test]
    fn signals_counted_several_times_are_told_apart_by_their_timestamps() {
        use otel_bridge::model::{FrameKind, ProfileBuilder};
        let mut b = ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 1_000_000);
        let f = b.function("a.B.c", "B.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        // Three signals: one counted 4 intervals (its timestamp 4 times), two counted 1.
        b.add_linked_sample(&[l], &[], None, &[6], &[10, 10, 10, 10, 20, 30]);
        // Outside the range: left out.
        let other = b.str_label("thread_name", "other");
        b.add_linked_sample(&[l], &[other], None, &[2], &[500, 500]);
        let profile = b.build(0, 1000);
        let spec = SliceSpec {
            ty: ProfileType::Cpu,
            measure: Measure::Amount,
            lines: false,
            selector: Selector {
                to: Some(100),
                ..Selector::default()
            },
            window: (0, 1000),
            slices: 2,
        };
        let mut w = Weights::default();
        w.add(
            &spec,
            &Decoded {
                resource: Vec::new(),
                profile,
            },
        );
        assert_eq!(
            w,
            Weights {
                intervals: 6.0,
                squares: 18.0,
                signals: 3.0
            }
        );
        assert_eq!(w.inflation(), Some(3.0));
        assert_eq!(Weights::default().inflation(), None);
    }

    #[test]
    fn fewer_samples_fewer_slices() {
        assert_eq!(slices_for(0.0), 2);
        assert_eq!(slices_for(160.0), 3);
        assert_eq!(slices_for(499.0), 9);
        assert_eq!(slices_for(1e9), SLICES);
    }
}
