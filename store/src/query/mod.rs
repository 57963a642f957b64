//! The query engine: merges of what a [`Selector`] selects, made in as few passes over the
//! files as possible, and the computations behind each answer ([`top`], [`diff`],
//! [`drilldown`], [`leaks`], per-request [`requests`], the time per thread [`states`], the
//! flame graph's call [`tree`], the [`timeline`] of a selection and a function's [`trend`]
//! under it), and the time-sliced merges behind the diff's noise estimate
//! ([`slices`]). The CLI and the web UI both ask here, so they give one answer.

pub mod butterfly;
pub mod diff;
pub mod drilldown;
pub mod findings;
pub mod leaks;
pub mod memory;
pub mod requests;
pub mod slices;
pub mod states;
pub mod timeline;
pub mod top;
pub mod traces;
pub mod tree;
pub mod trend;

use std::collections::BTreeSet;

use crate::error::Error;
use crate::merge::{Merged, Merger};
use crate::reader::{Decoded, Profiles};
use crate::select::{self, Measure, ProfileType, Selector};

/// One merge to make in a pass.
#[derive(Clone, Debug)]
pub struct Spec {
    /// `None`: CPU if there is any, else the most common type.
    pub ty: Option<ProfileType>,
    pub measure: Measure,
    pub lines: bool,
    pub selector: Selector,
    pub group_by: Option<String>,
    pub spans: bool,
}

impl Spec {
    pub fn new(ty: Option<ProfileType>, selector: &Selector) -> Spec {
        Spec {
            ty,
            measure: Measure::Amount,
            lines: false,
            selector: selector.clone(),
            group_by: None,
            spans: false,
        }
    }

    /// What to add up ([`Measure`]) and whether frames are lines: the reading's view.
    pub fn view(mut self, measure: Measure, lines: bool) -> Spec {
        self.measure = measure;
        self.lines = lines;
        self
    }

    pub fn by(mut self, key: Option<&str>) -> Spec {
        self.group_by = key.map(str::to_owned);
        self
    }

    pub fn spans(mut self) -> Spec {
        self.spans = true;
        self
    }
}

const ALL_TYPES: [ProfileType; 5] = [
    ProfileType::Cpu,
    ProfileType::Wall,
    ProfileType::Alloc,
    ProfileType::Lock,
    ProfileType::Live,
];

/// Makes every merge of `specs` in one pass over the files; returns each with its type.
pub fn merge_many<const N: usize>(
    source: &impl Profiles,
    specs: &[Spec; N],
) -> Result<[(Merged, ProfileType); N], Error> {
    let make = || -> [Vec<(ProfileType, Merger)>; N] { specs.each_ref().map(mergers_of) };
    let states = source.scan(make, |state, d| add_to_all(state, d))?;
    let mut combined = make();
    for state in states {
        absorb_all(&mut combined, state);
    }
    Ok(finish_all(combined))
}

/// Adds `d` to every merger of every spec ([`mergers_of`]).
pub(crate) fn add_to_all(mergers: &mut [Vec<(ProfileType, Merger)>], d: &Decoded) {
    for mergers in mergers.iter_mut() {
        for (_, m) in mergers.iter_mut() {
            m.add(&d.resource, &d.profile);
        }
    }
}

/// Adds a worker's mergers of every spec to `into`'s.
pub(crate) fn absorb_all<const N: usize>(
    into: &mut [Vec<(ProfileType, Merger)>; N],
    from: [Vec<(ProfileType, Merger)>; N],
) {
    for (into, from) in into.iter_mut().zip(from) {
        for ((_, a), (_, b)) in into.iter_mut().zip(from) {
            a.absorb(b);
        }
    }
}

/// Each spec's merge, of the type it names or [`pick_type`] picks.
pub(crate) fn finish_all<const N: usize>(
    mergers: [Vec<(ProfileType, Merger)>; N],
) -> [(Merged, ProfileType); N] {
    mergers.map(|mergers| {
        let finished: Vec<(ProfileType, Merged)> =
            mergers.into_iter().map(|(t, m)| (t, m.finish())).collect();
        pick_type(finished)
    })
}

/// The mergers of a [`Spec`]: one of its type, or one of each type when it names none.
pub(crate) fn mergers_of(spec: &Spec) -> Vec<(ProfileType, Merger)> {
    let types: Vec<ProfileType> = match spec.ty {
        Some(t) => vec![t],
        None => ALL_TYPES.to_vec(),
    };
    types
        .into_iter()
        .map(|t| {
            let mut m = Merger::new(t, spec.selector.clone(), spec.group_by.as_deref())
                .measure(spec.measure)
                .lines(spec.lines);
            if spec.spans {
                m = m.collect_spans();
            }
            (t, m)
        })
        .collect()
}

/// The merge of a spec that named no type: CPU when present, else the type most profiles
/// have ([`pick_index`]).
fn pick_type(mut finished: Vec<(ProfileType, Merged)>) -> (Merged, ProfileType) {
    let pick = pick_index(finished.iter().map(|(t, m)| (*t, m.profiles_seen)));
    let (t, m) = finished.swap_remove(pick.min(finished.len().saturating_sub(1)));
    (m, t)
}

/// Which of the merges of a spec that named no type answers, from each one's type and
/// profiles seen: CPU when present, else the type most profiles have.
fn pick_index(seen: impl Iterator<Item = (ProfileType, usize)> + Clone) -> usize {
    seen.clone()
        .position(|(t, n)| t == ProfileType::Cpu && n > 0)
        .or_else(|| {
            seen.enumerate()
                .max_by_key(|(_, (_, n))| *n)
                .map(|(i, _)| i)
        })
        .unwrap_or(0)
}

/// One merge, one pass.
pub fn merge(source: &impl Profiles, spec: Spec) -> Result<(Merged, ProfileType), Error> {
    let [one] = merge_many(source, &[spec])?;
    Ok(one)
}

/// Says why nothing was selected, as helpfully as the data allows (another pass).
pub fn explain_empty(
    source: &impl Profiles,
    merged: &Merged,
    ty: ProfileType,
    selector: &Selector,
) -> String {
    if merged.profiles_seen == 0 && (selector.from.is_some() || selector.to.is_some()) {
        return format!(
            "no {} profile in the time range (try a wider --from/--to, or --type)",
            ty.name()
        );
    }
    if merged.profiles_seen == 0 {
        return format!(
            "none of the profiles is of type {} (try --type, or --value)",
            ty.name()
        );
    }
    let mut why = format!(
        "no {} samples match the selection in {} profiles",
        ty.name(),
        merged.profiles_seen
    );
    if !selector.focus.is_empty() {
        why.push_str(&format!(
            " (with {}: patterns match the whole pkg.Class.method, `*` for any run, e.g. \
             'com.shop.*' or '*.findProduct')",
            selector.focus.describe()
        ));
    }
    let resource_keys: Vec<&str> = selector
        .conditions
        .iter()
        .map(|c| c.key.as_str())
        .filter(|k| {
            k.starts_with("service.")
                || k.starts_with("deployment.")
                || k.starts_with("host.")
                || k.starts_with("process.")
        })
        .collect();
    if source.pprof_files() > 0 && !resource_keys.is_empty() {
        why.push_str(&format!(
            "; note that pprof files carry no resource attributes, so {} cannot match them",
            resource_keys.join(", ")
        ));
    }
    let keys: Vec<String> = selector.conditions.iter().map(|c| c.key.clone()).collect();
    let values = distinct_values(source, &keys, DISTINCT_VALUES);
    for (key, vals) in keys.iter().zip(values) {
        if vals.is_empty() {
            why.push_str(&format!("; no profile has {key}"));
            continue;
        }
        // Every value, unless there are too many to read; then say how many were left out.
        let shown = vals.len().min(SHOWN_VALUES);
        why.push_str(&format!("; {key} has: {}", vals[..shown].join(", ")));
        if vals.len() > shown {
            let more = if vals.len() >= DISTINCT_VALUES {
                format!("at least {}", vals.len() - shown)
            } else {
                (vals.len() - shown).to_string()
            };
            why.push_str(&format!(
                " and {more} more (otelprof top --by {key} --limit 0 lists them)"
            ));
        }
    }
    why
}

/// Values of a key an empty selection's explanation names; more are counted, not listed.
const SHOWN_VALUES: usize = 50;
/// Values of a key collected at most (a key can be as varied as a trace id).
const DISTINCT_VALUES: usize = 10_000;

/// Up to `limit` distinct values of each key (resource first, then samples), in one pass.
pub fn distinct_values(source: &impl Profiles, keys: &[String], limit: usize) -> Vec<Vec<String>> {
    present(source, keys, limit).0
}

/// Up to `limit` distinct values of each key (as [`distinct_values`]) and the profile types
/// present, in one pass.
pub fn present(
    source: &impl Profiles,
    keys: &[String],
    limit: usize,
) -> (Vec<Vec<String>>, BTreeSet<&'static str>) {
    let states = source
        .scan(
            || (vec![BTreeSet::<String>::new(); keys.len()], BTreeSet::new()),
            |(sets, types), d| {
                if let Some(t) = select::ProfileType::of(&d.profile) {
                    types.insert(t.name());
                }
                for (key, set) in keys.iter().zip(sets.iter_mut()) {
                    if set.len() >= limit {
                        continue;
                    }
                    if let Some(v) = select::resource_value(&d.resource, key) {
                        set.insert(v);
                        continue;
                    }
                    for s in &d.profile.samples {
                        if let Some(v) = select::sample_value(&d.profile, s, key) {
                            set.insert(v.to_text());
                            if set.len() >= limit {
                                break;
                            }
                        }
                    }
                }
            },
        )
        .unwrap_or_default();
    let mut out = vec![BTreeSet::new(); keys.len()];
    let mut types = BTreeSet::new();
    for (state, t) in states {
        types.extend(t);
        for (o, s) in out.iter_mut().zip(state) {
            o.extend(s);
        }
    }
    let values = out
        .into_iter()
        .map(|s| s.into_iter().take(limit).collect())
        .collect();
    (values, types)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::Source;
    use otel_bridge::otlp::{EncodeOptions, ProfileId};
    use otel_bridge::{FrameKind, ProfileBuilder};

    #[test]
    fn an_empty_selection_names_every_value_of_its_key() {
        let dir = std::env::temp_dir().join(format!("otelprof-empty-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 1);
        let f = b.function("a.B.c", "B.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        for i in 0..60 {
            let ep = b.str_label("span_name", &format!("GET /e{i:02}"));
            b.add_sample(&[l], &[ep], &[1]);
        }
        let resource = opentelemetry_sdk::Resource::builder_empty().build();
        let bytes = otel_bridge::otlp::encode_to_vec(
            &b.build(0, 1),
            &resource,
            ProfileId::from_random([1; 16]),
            &EncodeOptions::default(),
        )
        .unwrap();
        std::fs::write(dir.join("1.otlp.pb"), bytes).unwrap();
        let source = Source::open(std::slice::from_ref(&dir), Box::new(|_, _| {})).unwrap();
        let mut selector = Selector::default();
        selector.add_terms("span_name=GET /none", 0).unwrap();
        let spec = Spec::new(Some(ProfileType::Cpu), &selector);
        let (merged, ty) = merge(&source, spec).unwrap();
        let why = explain_empty(&source, &merged, ty, &selector);
        assert!(why.contains("span_name has: GET /e00, GET /e01"), "{why}");
        assert!(
            why.contains("GET /e49 and 10 more (otelprof top --by span_name"),
            "{why}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
