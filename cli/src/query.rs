//! The selection every reading command shares: where the profiles are, which of their
//! samples count (`--where`, `--trace-id`, `--span-id`, `--from`, `--to`, `--type`), and the
//! merge of what is selected.

use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::{bail, Context as _};
use otel_bridge::merge::{Merged, Merger};
use otel_bridge::select::{self, ProfileType, Selector};

use crate::source::{self, Loaded};

#[derive(Debug, Clone, clap::Args)]
pub struct SelectArgs {
    /// Keep samples whose resource or sample attribute KEY equals VALUE (`KEY!=VALUE`:
    /// differs), e.g. service.version=1.5, span_name='GET /cart', thread.name=main; repeat
    /// to require several
    #[arg(long = "where", short = 'w', value_name = "KEY=VALUE")]
    pub conditions: Vec<String>,
    /// Keep samples taken in this trace (32 hex digits)
    #[arg(long, value_name = "HEX")]
    pub trace_id: Option<String>,
    /// Keep samples taken in this span (16 hex digits); repeatable
    #[arg(long, value_name = "HEX")]
    pub span_id: Vec<String>,
    /// Keep samples from this time on: RFC 3339, a date, Unix seconds, or now-15m
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Keep samples before this time (same forms as --from)
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Profile type: cpu, wall, alloc or lock [default: cpu when present]
    #[arg(long = "type", value_name = "TYPE", value_parser = parse_type)]
    pub ty: Option<ProfileType>,
}

fn parse_type(text: &str) -> Result<ProfileType, String> {
    ProfileType::parse(text).map_err(|e| e.to_string())
}

pub fn now_unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl SelectArgs {
    pub fn selector(&self) -> anyhow::Result<Selector> {
        let now = now_unix_nanos();
        let mut s = Selector::default();
        for c in &self.conditions {
            s.conditions
                .push(select::Condition::parse(c).with_context(|| "--where".to_owned())?);
        }
        if let Some(t) = &self.trace_id {
            s.trace_id = Some(select::parse_trace_id(t).context("--trace-id")?);
        }
        for span in &self.span_id {
            s.span_ids
                .push(select::parse_span_id(span).context("--span-id")?);
        }
        if let Some(t) = &self.from {
            s.from = Some(select::parse_time(t, now).context("--from")?);
        }
        if let Some(t) = &self.to {
            s.to = Some(select::parse_time(t, now).context("--to")?);
        }
        if let (Some(f), Some(t)) = (s.from, s.to) {
            if f >= t {
                bail!("--from must be before --to");
            }
        }
        Ok(s)
    }
}

/// Loads `paths`, reporting unreadable files, and fails when nothing could be read.
pub fn load(paths: &[PathBuf]) -> anyhow::Result<Loaded> {
    let loaded = source::load(paths);
    loaded.report_failures();
    if loaded.profiles.is_empty() {
        if loaded.files > 0 {
            bail!("the files hold no profiles (empty requests only)");
        }
        bail!("no profile could be read");
    }
    Ok(loaded)
}

/// The type to read when none was asked for: CPU if any profile has it, else the most
/// common one.
pub fn default_type(loaded: &Loaded) -> anyhow::Result<ProfileType> {
    let mut counts = [0usize; 4];
    let all = [
        ProfileType::Cpu,
        ProfileType::Wall,
        ProfileType::Alloc,
        ProfileType::Lock,
    ];
    for d in &loaded.profiles {
        if let Some(t) = ProfileType::of(&d.profile) {
            if let Some(i) = all.iter().position(|x| *x == t) {
                counts[i] += 1;
            }
        }
    }
    if counts[0] > 0 {
        return Ok(ProfileType::Cpu);
    }
    let (i, n) = counts
        .iter()
        .enumerate()
        .max_by_key(|(_, n)| **n)
        .unwrap_or((0, &0));
    if *n == 0 {
        bail!("none of the profiles is a CPU, wall, allocation or lock profile");
    }
    Ok(all.get(i).copied().unwrap_or(ProfileType::Cpu))
}

/// Merges what `selector` selects from `loaded`.
pub fn merge(
    loaded: &Loaded,
    ty: ProfileType,
    selector: &Selector,
    group_by: Option<&str>,
    spans: bool,
) -> Merged {
    let mut merger = Merger::new(ty, selector.clone(), group_by);
    if spans {
        merger = merger.collect_spans();
    }
    for d in &loaded.profiles {
        merger.add(&d.resource, &d.profile);
    }
    merger.finish()
}

/// Says why nothing was selected, as helpfully as the data allows.
pub fn explain_empty(
    loaded: &Loaded,
    merged: &Merged,
    ty: ProfileType,
    selector: &Selector,
) -> String {
    if merged.profiles_seen == 0 {
        return format!(
            "none of the {} profiles is a {} profile (try --type)",
            loaded.profiles.len(),
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
    if loaded.pprof_files > 0 && !resource_keys.is_empty() {
        why.push_str(&format!(
            "; note that pprof files carry no resource attributes, so {} cannot match them",
            resource_keys.join(", ")
        ));
    }
    for c in &selector.conditions {
        let values = distinct_values(loaded, &c.key, 8);
        if !values.is_empty() {
            why.push_str(&format!("; {} has: {}", c.key, values.join(", ")));
        } else {
            why.push_str(&format!("; no profile has {}", c.key));
        }
    }
    why
}

/// Up to `limit` distinct values of `key` (resource first, then samples).
pub fn distinct_values(loaded: &Loaded, key: &str, limit: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let push = |v: String, out: &mut Vec<String>| {
        if !out.contains(&v) && out.len() < limit {
            out.push(v);
        }
    };
    for d in &loaded.profiles {
        if let Some(v) = select::resource_value(&d.resource, key) {
            push(v, &mut out);
            continue;
        }
        for s in &d.profile.samples {
            if let Some(v) = select::sample_value(&d.profile, s, key) {
                push(v.to_text(), &mut out);
            }
            if out.len() >= limit {
                return out;
            }
        }
    }
    out
}
