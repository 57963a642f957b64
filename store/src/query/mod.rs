//! The selection every reading command shares: where the profiles are, which of their
//! samples count (`--where`, `--trace-id`, `--span-id`, `--from`, `--to`, `--type`), and the
//! merge of what is selected.

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::merge::{Merged, Merger};
use crate::select::{self, ProfileType, Selector};

use crate::reader;

pub mod diff;
pub mod drilldown;
pub mod requests;
pub mod top;
pub mod tree;

/// The files a reading command reads; every pass over them decodes them again (streaming:
/// memory does not grow with the store). Unreadable files are reported once.
pub struct Source {
    pub files: Vec<PathBuf>,
    reported: Mutex<BTreeSet<PathBuf>>,
    pprof_files: AtomicUsize,
}

impl Source {
    pub fn open(paths: &[PathBuf]) -> anyhow::Result<Source> {
        let (files, failures) = reader::discover(paths);
        for (path, err) in &failures {
            eprintln!("otelprof: skipped {}: {err:#}", path.display());
        }
        if files.is_empty() {
            bail!("no profile could be read");
        }
        Ok(Source {
            files,
            reported: Mutex::new(BTreeSet::new()),
            pprof_files: AtomicUsize::new(0),
        })
    }

    pub fn pprof_files(&self) -> usize {
        self.pprof_files.load(Ordering::Relaxed)
    }

    fn report(&self, stats: &reader::ScanStats) -> anyhow::Result<()> {
        self.pprof_files.store(stats.pprof_files, Ordering::Relaxed);
        if let Ok(mut reported) = self.reported.lock() {
            for (path, err) in &stats.failures {
                if reported.insert(path.clone()) {
                    eprintln!("otelprof: skipped {}: {err:#}", path.display());
                }
            }
        }
        if stats.profiles == 0 {
            if stats.files > 0 {
                bail!("the files hold no profiles (empty requests only)");
            }
            bail!("no profile could be read");
        }
        Ok(())
    }
}

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
pub fn merge_many(source: &Source, specs: &[Spec]) -> anyhow::Result<Vec<(Merged, ProfileType)>> {
    let make = || -> Vec<Vec<(ProfileType, Merger)>> {
        specs
            .iter()
            .map(|spec| {
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
            .collect()
    };
    let (states, stats) = reader::scan(&source.files, make, |state, d| {
        for mergers in state.iter_mut() {
            for (_, m) in mergers.iter_mut() {
                m.add(&d.resource, &d.profile);
            }
        }
    });
    source.report(&stats)?;
    let mut combined = make();
    for state in states {
        for (into, from) in combined.iter_mut().zip(state) {
            for ((_, a), (_, b)) in into.iter_mut().zip(from) {
                a.absorb(b);
            }
        }
    }
    Ok(combined
        .into_iter()
        .map(|mergers| {
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
        })
        .collect())
}

/// One merge, one pass.
pub fn merge(source: &Source, spec: Spec) -> anyhow::Result<(Merged, ProfileType)> {
    merge_many(source, std::slice::from_ref(&spec))?
        .into_iter()
        .next()
        .context("no merge")
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
    let (states, _) = reader::scan(
        &source.files,
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
    );
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
