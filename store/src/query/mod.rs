//! The query engine: merges of what a [`Selector`] selects, made in as few passes over the
//! files as possible, and the computations behind each answer ([`top`], [`diff`],
//! [`drilldown`], per-request [`requests`], the flame graph's call [`tree`]), and the
//! time-sliced merges behind the diff's noise estimate ([`slices`]). The CLI and the web UI
//! both ask here, so they give one answer.

pub mod diff;
pub mod drilldown;
pub mod requests;
pub mod slices;
pub mod top;
pub mod tree;

use std::collections::BTreeSet;

use crate::error::Error;
use crate::merge::{Merged, Merger};
use crate::reader::Source;
use crate::select::{self, ProfileType, Selector};

/// One merge to make in a pass.
#[derive(Clone, Debug)]
pub struct Spec {
    /// `None`: CPU if there is any, else the most common type.
    pub ty: Option<ProfileType>,
    pub selector: Selector,
    pub group_by: Option<String>,
    pub spans: bool,
}

impl Spec {
    pub fn new(ty: Option<ProfileType>, selector: &Selector) -> Spec {
        Spec {
            ty,
            selector: selector.clone(),
            group_by: None,
            spans: false,
        }
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

const ALL_TYPES: [ProfileType; 4] = [
    ProfileType::Cpu,
    ProfileType::Wall,
    ProfileType::Alloc,
    ProfileType::Lock,
];

/// Makes every merge of `specs` in one pass over the files; returns each with its type.
pub fn merge_many<const N: usize>(
    source: &Source,
    specs: &[Spec; N],
) -> Result<[(Merged, ProfileType); N], Error> {
    let make = || -> [Vec<(ProfileType, Merger)>; N] {
        specs.each_ref().map(|spec| {
            let types: Vec<ProfileType> = match spec.ty {
                Some(t) => vec![t],
                None => ALL_TYPES.to_vec(),
            };
            types
                .into_iter()
                .map(|t| {
                    let mut m = Merger::new(t, spec.selector.clone(), spec.group_by.as_deref());
                    if spec.spans {
                        m = m.collect_spans();
                    }
                    (t, m)
                })
                .collect()
        })
    };
    let states = source.scan(make, |state, d| {
        for mergers in state.iter_mut() {
            for (_, m) in mergers.iter_mut() {
                m.add(&d.resource, &d.profile);
            }
        }
    })?;
    let mut combined = make();
    for state in states {
        for (into, from) in combined.iter_mut().zip(state) {
            for ((_, a), (_, b)) in into.iter_mut().zip(from) {
                a.absorb(b);
            }
        }
    }
    Ok(combined.map(|mergers| {
        let mut finished: Vec<(ProfileType, Merged)> =
            mergers.into_iter().map(|(t, m)| (t, m.finish())).collect();
        // CPU when present, else the type most profiles have.
        let pick = finished
            .iter()
            .position(|(t, m)| *t == ProfileType::Cpu && m.profiles_seen > 0)
            .or_else(|| {
                finished
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, (_, m))| m.profiles_seen)
                    .map(|(i, _)| i)
            })
            .unwrap_or(0);
        let (t, m) = finished.swap_remove(pick.min(finished.len().saturating_sub(1)));
        (m, t)
    }))
}

/// One merge, one pass.
pub fn merge(source: &Source, spec: Spec) -> Result<(Merged, ProfileType), Error> {
    let [one] = merge_many(source, &[spec])?;
    Ok(one)
}

/// Says why nothing was selected, as helpfully as the data allows (another pass).
pub fn explain_empty(
    source: &Source,
    merged: &Merged,
    ty: ProfileType,
    selector: &Selector,
) -> String {
    if merged.profiles_seen == 0 {
        return format!(
            "none of the profiles is a {} profile (try --type)",
            ty.name()
        );
    }
    let mut why = format!(
        "no {} samples match the selection in {} profiles",
        ty.name(),
        merged.profiles_seen
    );
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
    let values = distinct_values(source, &keys, 8);
    for (key, vals) in keys.iter().zip(values) {
        if vals.is_empty() {
            why.push_str(&format!("; no profile has {key}"));
        } else {
            why.push_str(&format!("; {key} has: {}", vals.join(", ")));
        }
    }
    why
}

/// Up to `limit` distinct values of each key (resource first, then samples), in one pass.
pub fn distinct_values(source: &Source, keys: &[String], limit: usize) -> Vec<Vec<String>> {
    let states = source
        .scan(
            || vec![BTreeSet::<String>::new(); keys.len()],
            |sets, d| {
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
    for state in states {
        for (o, s) in out.iter_mut().zip(state) {
            o.extend(s);
        }
    }
    out.into_iter()
        .map(|s| s.into_iter().take(limit).collect())
        .collect()
}
