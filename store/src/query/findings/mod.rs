//! Findings: known performance patterns looked for in a selection's profiles, each reported
//! with its cost, the application method responsible, the evidence stacks, the endpoints it
//! hurts most, a one-line fix, a severity and why it fired. Rules are patterns (an exception
//! built for control flow, a regex compiled per call, a contended lock), never "a method is
//! hot": a pure computation at 60 % of the CPU gives no finding.
//!
//! Every rule reads the merges the query engine makes ([`crate::query::merge_many`], grouped
//! by `span_name`), one pass over the files for all of them; [`evidence`] walks the stacks.
//! One file per rule family; their thresholds are in docs/findings.md.

pub mod evidence;
mod exceptions;
mod gc;
mod jit;
mod locks;
mod pools;
mod reflection;
mod regex;
mod threads;

use crate::error::Error;
use crate::merge::Merged;
use crate::query::requests::EndpointCounts;
use crate::query::{merge_many, Spec};
use crate::reader::Profiles;
use crate::select::{Measure, ProfileType, Selector};

pub use evidence::{Evidence, EvidenceStack};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    pub fn parse(text: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Critical]
            .into_iter()
            .find(|s| s.name() == text)
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The rule's id, e.g. `exceptions-control-flow`.
    pub rule: &'static str,
    pub title: String,
    /// The profile type its cost is read from.
    pub ty: ProfileType,
    /// Its cost, in `unit`, and as a share of what `of` names.
    pub value: f64,
    pub unit: String,
    pub share: f64,
    pub of: &'static str,
    /// Cost per request, where the store has request counts for the endpoints it hurts.
    pub per_request: Option<f64>,
    /// The application method responsible, and its source file (`File.java:123` when the
    /// line is known).
    pub method: Option<String>,
    pub file: Option<String>,
    /// The heaviest evidence stacks (at most 3).
    pub stacks: Vec<EvidenceStack>,
    /// The endpoints (`span_name`) it costs most in, with the cost in each, largest first.
    pub endpoints: Vec<(String, f64)>,
    /// The traces (32 hex digits) with the most of the finding's type in its method, largest
    /// first: filled by the reader that lists traces (the CLI, from the store's trace
    /// query), empty when the samples are in no trace.
    pub traces: Vec<(String, f64)>,
    pub fix: &'static str,
    pub severity: Severity,
    /// The numbers that made it fire, against which threshold.
    pub why: String,
}

/// The merges rules read: one per profile type, grouped by endpoint (empty when absent).
#[derive(Default)]
pub struct Inputs {
    pub cpu: Merged,
    pub wall: Merged,
    pub alloc: Merged,
    pub lock: Merged,
    /// The cpu merge of the selection's later half (by time), read only when the JIT
    /// compiler's share of the whole passes the least threshold of its rule.
    pub cpu_late: Option<Merged>,
    /// The same merges by source line (frames `name (File.java:123)`), where pattern rules
    /// find the line of the responsible method; empty when not read.
    pub lines: Lines,
}

/// The merges by source line of [`Inputs`].
#[derive(Default)]
pub struct Lines {
    pub cpu: Merged,
    pub wall: Merged,
    pub alloc: Merged,
}

impl Inputs {
    /// Makes the four merges of `selector` in one pass over `source`.
    pub fn read(source: &impl Profiles, selector: &Selector) -> Result<Inputs, Error> {
        let spec = |t| Spec::new(Some(t), selector).by(Some("span_name"));
        let lines = |t| Spec::new(Some(t), selector).view(Measure::Amount, true);
        let [(cpu, _), (wall, _), (alloc, _), (lock, _), (cpu_l, _), (wall_l, _), (alloc_l, _)] =
            merge_many(
                source,
                &[
                    spec(ProfileType::Cpu),
                    spec(ProfileType::Wall),
                    spec(ProfileType::Alloc),
                    spec(ProfileType::Lock),
                    lines(ProfileType::Cpu),
                    lines(ProfileType::Wall),
                    lines(ProfileType::Alloc),
                ],
            )?;
        let cpu_late = later_half(source, selector, &cpu)?;
        Ok(Inputs {
            cpu,
            wall,
            alloc,
            lock,
            cpu_late,
            lines: Lines {
                cpu: cpu_l,
                wall: wall_l,
                alloc: alloc_l,
            },
        })
    }

    /// What was examined, in words: samples and profiles of each type present.
    pub fn examined(&self) -> String {
        let parts: Vec<String> = [
            ("cpu", &self.cpu),
            ("wall", &self.wall),
            ("alloc", &self.alloc),
            ("lock", &self.lock),
        ]
        .iter()
        .filter(|(_, m)| m.profiles_used > 0)
        .map(|(name, m)| {
            format!(
                "{name}: {} profiles, {} stacks",
                m.profiles_used,
                m.stacks.len()
            )
        })
        .collect();
        if parts.is_empty() {
            "no samples".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

/// The cpu merge of the later half of `cpu`'s window, when the window is long enough for the
/// rule on the JIT compiler and its share of `cpu` passes the rule's least threshold (a
/// second pass, for that rule only).
fn later_half(
    source: &impl Profiles,
    selector: &Selector,
    cpu: &Merged,
) -> Result<Option<Merged>, Error> {
    let (jit, _, total) = jit::jit_cpu(cpu);
    let Some((start, end)) = cpu.window.filter(|(s, e)| e - s >= jit::MIN_WINDOW) else {
        return Ok(None);
    };
    if total <= 0.0 || jit / total < jit::THRESHOLDS.info {
        return Ok(None);
    }
    let mut late = selector.clone();
    let middle = start + (end - start) / 2;
    late.from = Some(late.from.map_or(middle, |f| f.max(middle)));
    let [(m, _)] = merge_many(source, &[Spec::new(Some(ProfileType::Cpu), &late)])?;
    Ok(Some(m))
}

/// Share thresholds of a rule: the least share that fires (info), and those of warning and
/// critical.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    pub info: f64,
    pub warning: f64,
    pub critical: f64,
}

impl Thresholds {
    pub fn severity(&self, share: f64) -> Option<Severity> {
        if share >= self.critical {
            Some(Severity::Critical)
        } else if share >= self.warning {
            Some(Severity::Warning)
        } else if share >= self.info {
            Some(Severity::Info)
        } else {
            None
        }
    }

    /// The threshold the share passed, in words.
    pub fn passed(&self, share: f64) -> String {
        let (name, t) = if share >= self.critical {
            ("critical", self.critical)
        } else if share >= self.warning {
            ("warning", self.warning)
        } else {
            ("info", self.info)
        };
        format!("≥ {} ({name})", percent(t))
    }
}

/// What a merge of type `ty` counts (its `count`).
pub fn observations(ty: ProfileType) -> &'static str {
    match ty {
        ProfileType::Cpu | ProfileType::Wall => "samples",
        ProfileType::Alloc | ProfileType::Live => "objects",
        ProfileType::Lock => "contentions",
    }
}

/// Samples a pattern needs before it is believed (fewer is noise).
pub const MIN_SAMPLES: f64 = 10.0;
/// Wall time (ns) a wall-clock pattern needs before it is believed (10 samples at 20 ms).
pub const MIN_WALL: f64 = 200_000_000.0;

pub fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// A pattern rule's finding from its evidence in merge `m` of type `ty`, when it passes.
pub(crate) struct Draft<'a> {
    pub rule: &'static str,
    pub title: String,
    pub fix: &'static str,
    pub thresholds: Thresholds,
    pub ty: ProfileType,
    pub of: &'static str,
    pub m: &'a Merged,
    pub evidence: Evidence,
    /// More of the why (e.g. the same pattern's share of another type).
    pub note: String,
    /// The responsible method's source line (`File.java:123`), when known.
    pub line: Option<String>,
}

impl Draft<'_> {
    pub fn finish(self, requests: &EndpointCounts) -> Option<Finding> {
        let e = &self.evidence;
        let share = e.share();
        // Wall profiles carry no sample counts (a stack's samples are summed into its time):
        // there, the pattern needs MIN_WALL of time instead.
        let enough = match self.ty {
            ProfileType::Wall => e.value >= MIN_WALL,
            _ => e.count >= MIN_SAMPLES,
        };
        if !enough {
            return None;
        }
        let severity = self.thresholds.severity(share)?;
        let seen = match self.ty {
            ProfileType::Wall => format!("{:.2} s", e.value / 1e9),
            _ => format!("{} {}", e.count.round(), observations(self.ty)),
        };
        let mut why = format!(
            "{} of {} ({seen}) {}",
            percent(share),
            self.of,
            self.thresholds.passed(share)
        );
        if let Some((method, v)) = e.methods.first() {
            why.push_str(&format!(
                "; {} of it under {method}",
                percent(v / e.value.max(f64::MIN_POSITIVE))
            ));
        }
        if !self.note.is_empty() {
            why.push_str("; ");
            why.push_str(&self.note);
        }
        Some(Finding {
            rule: self.rule,
            title: self.title,
            ty: self.ty,
            value: e.value,
            unit: self.m.unit.clone(),
            share,
            of: self.of,
            per_request: per_request(&e.endpoints, requests),
            method: e.method.as_ref().map(|(m, _)| m.clone()),
            file: self.line.or_else(|| {
                e.method
                    .as_ref()
                    .map(|(_, f)| f.clone())
                    .filter(|f| !f.is_empty())
            }),
            stacks: e.stacks.clone(),
            endpoints: e.endpoints.iter().take(5).cloned().collect(),
            traces: Vec::new(),
            fix: self.fix,
            severity,
            why,
        })
    }
}

/// The cost per request over the endpoints with request counts: their cost over their
/// requests; `None` when none has counts.
pub fn per_request(endpoints: &[(String, f64)], requests: &EndpointCounts) -> Option<f64> {
    let (mut value, mut n) = (0.0, 0.0);
    for (endpoint, v) in endpoints {
        if let Some(r) = requests.get(false, endpoint) {
            value += v;
            n += r;
        }
    }
    (n > 0.0).then(|| value / n)
}

/// Runs every rule over `inputs`; the findings, most severe first, then by share.
pub fn run(inputs: &Inputs, requests: &EndpointCounts) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    out.extend(exceptions::control_flow(inputs, requests));
    out.extend(exceptions::stack_traces(inputs, requests));
    out.extend(regex::compiled_per_call(inputs, requests));
    out.extend(locks::contended(inputs, requests));
    out.extend(reflection::hot_path(inputs, requests));
    out.extend(threads::sleeping_in_requests(inputs, requests));
    out.extend(pools::starved(inputs, requests));
    out.extend(jit::busy(inputs, requests));
    out.extend(gc::pressure(inputs, requests));
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.share.total_cmp(&a.share))
            .then_with(|| a.rule.cmp(b.rule))
    });
    out
}

/// [`Inputs::read`] then [`run`].
pub fn findings(
    source: &impl Profiles,
    selector: &Selector,
    requests: &EndpointCounts,
) -> Result<(Vec<Finding>, Inputs), Error> {
    let inputs = Inputs::read(source, selector)?;
    Ok((run(&inputs, requests), inputs))
}

/// A pattern rule over CPU and allocated bytes: the finding is read from the type where the
/// pattern's share is larger, the other's share is said in its why.
pub(crate) fn cpu_and_alloc(
    inputs: &Inputs,
    requests: &EndpointCounts,
    rule: &'static str,
    title: &str,
    fix: &'static str,
    thresholds: Thresholds,
    pattern: &evidence::Pattern,
) -> Option<Finding> {
    let cpu = evidence::find(&inputs.cpu, pattern, |_| true);
    let alloc = evidence::find(&inputs.alloc, pattern, |_| true);
    let cpu_wins =
        cpu.share() >= alloc.share() && cpu.count >= MIN_SAMPLES || alloc.count < MIN_SAMPLES;
    let (ty, of, m, e, other, other_of) = if cpu_wins {
        (
            ProfileType::Cpu,
            "CPU",
            &inputs.cpu,
            cpu,
            alloc,
            "allocated bytes",
        )
    } else {
        (
            ProfileType::Alloc,
            "allocated bytes",
            &inputs.alloc,
            alloc,
            cpu,
            "CPU",
        )
    };
    let note = if other.value > 0.0 {
        format!("{} of {other_of}", percent(other.share()))
    } else {
        String::new()
    };
    let lines = if cpu_wins {
        &inputs.lines.cpu
    } else {
        &inputs.lines.alloc
    };
    let line = method_line(lines, pattern, &e, |_| true);
    let title = match &e.method {
        Some((method, _)) => format!("{title} in {method}"),
        None => title.to_owned(),
    };
    Draft {
        rule,
        title,
        fix,
        thresholds,
        ty,
        of,
        m,
        evidence: e,
        note,
        line,
    }
    .finish(requests)
}

/// The source line of `e`'s method where the pattern costs most, from the merge by lines.
pub(crate) fn method_line(
    lines: &Merged,
    pattern: &evidence::Pattern,
    e: &Evidence,
    keep: impl Fn(&str) -> bool,
) -> Option<String> {
    let (method, _) = e.method.as_ref()?;
    let by_line = evidence::find(lines, pattern, keep);
    by_line
        .methods
        .iter()
        .find(|(frame, _)| evidence::bare(frame) == method)
        .and_then(|(frame, _)| evidence::line_of(frame))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests;
