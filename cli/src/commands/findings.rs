//! `otelprof findings`: the known performance patterns in a selection, sorted by cost, each
//! with its method, evidence stacks, endpoints, fix, severity and why it fired; as text or
//! JSON (`--format json`, for alerting), and a CI gate (`--fail-on SEVERITY`, exit code 3),
//! which with a baseline (`--new-against SELECTOR`) stops only what the baseline did not have.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{bail, Context};
use otelprof_store::focus::Glob;
use otelprof_store::merge::Merged;
use otelprof_store::query::findings::{self, Finding, Inputs, Severity};
use otelprof_store::query::{requests, traces, Spec};
use otelprof_store::select::{ProfileType, Selector};

use super::diff::EXIT_REGRESSION;
use crate::cli::{FindingsArgs, FindingsFormat};
use crate::table::value;

/// The frames of an evidence stack printed, from its leaf.
const STACK_FRAMES: usize = 12;

/// The findings of the selection `args` describes, and the merges they were read from.
pub fn answer(args: &FindingsArgs) -> anyhow::Result<(Vec<Finding>, Inputs)> {
    if args.select.value.is_some() || args.select.lines {
        bail!("findings reads each profile type's own value by function: drop --value and --lines");
    }
    answer_for(args, &args.select.selector()?)
}

/// The findings of `selector` (the type flag of `args` applies).
fn answer_for(args: &FindingsArgs, selector: &Selector) -> anyhow::Result<(Vec<Finding>, Inputs)> {
    let selector = selector.clone();
    let source =
        super::open_source_for(&args.paths, std::slice::from_ref(&selector))?.narrow_to(&selector);
    let mut inputs = Inputs::read(&source, &selector)?;
    if let Some(t) = args.select.ty {
        for (ty, m) in [
            (ProfileType::Cpu, &mut inputs.cpu),
            (ProfileType::Wall, &mut inputs.wall),
            (ProfileType::Alloc, &mut inputs.alloc),
            (ProfileType::Lock, &mut inputs.lock),
        ] {
            if ty != t {
                *m = Merged::default();
            }
        }
        if t != ProfileType::Cpu {
            inputs.cpu_late = None;
        }
    }
    let counts = requests::endpoint_requests(&args.paths, &selector, &selector);
    let mut found = findings::run(&inputs, &counts);
    add_traces(args, &selector, &mut found)?;
    Ok((found, inputs))
}

/// Traces listed per finding.
const TRACES: usize = 3;

/// Each finding's traces: those with the most of its type in its method (the store's trace
/// query, focused on the method), where its samples are in traces.
fn add_traces(
    args: &FindingsArgs,
    selector: &Selector,
    found: &mut [Finding],
) -> anyhow::Result<()> {
    for f in found.iter_mut() {
        let Some(method) = &f.method else {
            continue;
        };
        let Ok(glob) = Glob::parse(method) else {
            continue;
        };
        let mut s = selector.clone();
        s.focus.include.push(glob);
        let source = super::open_source_for(&args.paths, std::slice::from_ref(&s))?
            .narrow_to(&s)
            .use_spans(None);
        let t = traces::top_traces(&source, Spec::new(Some(f.ty), &s), TRACES)?;
        f.traces = t.rows.iter().map(|r| (r.trace_id_hex(), r.value)).collect();
    }
    Ok(())
}

/// What identifies a finding across selections: its rule and method.
type Key = (&'static str, Option<String>);

fn key(f: &Finding) -> Key {
    (f.rule, f.method.clone())
}

/// The keys of the baseline's findings, when `--new-against` names one.
fn baseline(args: &FindingsArgs) -> anyhow::Result<Option<HashSet<Key>>> {
    let Some(terms) = &args.new_against else {
        return Ok(None);
    };
    let mut selector = Selector::default();
    selector
        .add_terms(terms, super::now_unix_nanos())
        .context("--new-against")?;
    selector.focus = args.select.selector()?.focus;
    let (found, inputs) = answer_for(args, &selector)?;
    if inputs.examined() == "no samples" {
        bail!("--new-against {terms}: the baseline selects no samples");
    }
    Ok(Some(found.iter().map(key).collect()))
}

/// The findings of `args` and, against the `--new-against` baseline, whether each is new
/// (`None` without a baseline): what `run` prints and the web UI's `/api/findings` serialises.
pub fn marked(args: &FindingsArgs) -> anyhow::Result<(Vec<Finding>, Inputs, Option<Vec<bool>>)> {
    let (found, inputs) = answer(args)?;
    let new = baseline(args)?.map(|old| found.iter().map(|f| !old.contains(&key(f))).collect());
    Ok((found, inputs, new))
}

pub fn run(args: &FindingsArgs) -> anyhow::Result<ExitCode> {
    let (found, inputs, new) = marked(args)?;
    let marks = new.as_deref();
    let is_new = |i: usize| marks.is_none_or(|m| m.get(i).copied().unwrap_or(true));
    match args.format {
        FindingsFormat::Text => out!("{}", render(&found, &inputs, marks))?,
        FindingsFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&to_json(&found, &inputs, marks))?
        )?,
    }
    let gate = args.fail_on.as_deref().and_then(Severity::parse);
    if let Some(gate) = gate {
        let failing: Vec<&Finding> = found
            .iter()
            .enumerate()
            .filter(|&(i, f)| f.severity >= gate && is_new(i))
            .map(|(_, f)| f)
            .collect();
        if !failing.is_empty() {
            let new = if marks.is_some() { "new: " } else { "" };
            for f in &failing {
                errln!(
                    "otelprof: {}: {new}{} ({})",
                    f.severity.name(),
                    f.title,
                    f.why
                );
            }
            return Ok(ExitCode::from(EXIT_REGRESSION));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The findings as text, most severe and costly first; "no findings" with what was examined.
/// With `new` (one per finding, against a baseline) each finding says whether it is new.
pub fn render(found: &[Finding], inputs: &Inputs, new: Option<&[bool]>) -> String {
    let mut out = String::new();
    if found.is_empty() {
        let _ = writeln!(out, "No findings ({}).", inputs.examined());
        return out;
    }
    let _ = writeln!(out, "{} findings ({}).", found.len(), inputs.examined());
    for (i, f) in found.iter().enumerate() {
        let age = match new.and_then(|n| n.get(i)) {
            Some(true) => " new:",
            Some(false) => " (also in the baseline)",
            None => "",
        };
        let (before, after) = if age.ends_with(':') {
            (age, "")
        } else {
            ("", age)
        };
        let _ = writeln!(
            out,
            "\n{}. [{}]{before} {}{after}",
            i + 1,
            f.severity.name(),
            f.title
        );
        let mut cost = format!(
            "   cost: {:.1} % of {} ({})",
            f.share * 100.0,
            f.of,
            value(f.value, &f.unit)
        );
        if let Some(r) = f.per_request {
            let _ = write!(cost, ", {} per request", value(r, &f.unit));
        }
        let _ = writeln!(out, "{cost}");
        if let Some(m) = &f.method {
            match &f.file {
                Some(file) => writeln!(out, "   method: {m} ({file})"),
                None => writeln!(out, "   method: {m}"),
            }
            .ok();
        }
        let _ = writeln!(out, "   why: {}", f.why);
        let _ = writeln!(out, "   fix: {}", f.fix);
        if !f.endpoints.is_empty() {
            let eps: Vec<String> = f
                .endpoints
                .iter()
                .map(|(e, v)| format!("{e} ({})", value(*v, &f.unit)))
                .collect();
            let _ = writeln!(out, "   endpoints: {}", eps.join(", "));
        }
        if !f.traces.is_empty() {
            let traces: Vec<String> = f
                .traces
                .iter()
                .map(|(t, v)| format!("{t} ({})", value(*v, &f.unit)))
                .collect();
            let _ = writeln!(out, "   traces: {}", traces.join(", "));
        }
        for (n, s) in f.stacks.iter().enumerate() {
            let _ = writeln!(out, "   stack {} ({}):", n + 1, value(s.value, &f.unit));
            for frame in s.frames.iter().rev().take(STACK_FRAMES) {
                let _ = writeln!(out, "     {frame}");
            }
            if s.frames.len() > STACK_FRAMES {
                let _ = writeln!(out, "     … {} more", s.frames.len() - STACK_FRAMES);
            }
        }
    }
    out
}

/// The findings as JSON: one object per finding, and what was examined. With `new` (against
/// a baseline) each finding has `"new": true|false`.
pub fn to_json(found: &[Finding], inputs: &Inputs, new: Option<&[bool]>) -> serde_json::Value {
    let findings: Vec<serde_json::Value> = found
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut v = serde_json::json!({
                "rule": f.rule,
                "title": f.title,
                "severity": f.severity.name(),
                "type": f.ty.name(),
                "value": f.value,
                "unit": f.unit,
                "share": f.share,
                "of": f.of,
                "per_request": f.per_request,
                "method": f.method,
                "file": f.file,
                "why": f.why,
                "fix": f.fix,
                "endpoints": f.endpoints.iter().map(|(e, v)| serde_json::json!({"endpoint": e, "value": v})).collect::<Vec<_>>(),
                "traces": f.traces.iter().map(|(t, v)| serde_json::json!({"trace_id": t, "value": v})).collect::<Vec<_>>(),
                "stacks": f.stacks.iter().map(|s| serde_json::json!({"frames": s.frames, "value": s.value})).collect::<Vec<_>>(),
            });
            if let (Some(n), Some(obj)) = (new.and_then(|n| n.get(i)), v.as_object_mut()) {
                obj.insert("new".to_owned(), serde_json::Value::Bool(*n));
            }
            v
        })
        .collect();
    serde_json::json!({ "examined": inputs.examined(), "findings": findings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use otelprof_store::query::findings::EvidenceStack;

    fn inputs() -> Inputs {
        let cpu = Merged {
            profiles_used: 3,
            ..Merged::default()
        };
        Inputs {
            cpu,
            ..Inputs::default()
        }
    }

    fn finding() -> Finding {
        Finding {
            rule: "regex-compiled-per-call",
            title: "Regular expression compiled on each call in app.V.check".into(),
            ty: ProfileType::Cpu,
            value: 2e9,
            unit: "nanoseconds".into(),
            share: 0.25,
            of: "CPU",
            per_request: Some(1e6),
            method: Some("app.V.check".into()),
            file: Some("V.java".into()),
            stacks: vec![EvidenceStack {
                frames: vec![
                    "app.V.check".into(),
                    "java.util.regex.Pattern.compile".into(),
                ],
                value: 2e9,
            }],
            endpoints: vec![("GET /v".into(), 2e9)],
            traces: vec![("0af7651916cd43dd8448eb211c80319c".into(), 1e9)],
            fix: "compile it once",
            severity: Severity::Critical,
            why: "25.0 % of CPU".into(),
        }
    }

    #[test]
    fn no_findings_says_what_was_examined() {
        assert_eq!(
            render(&[], &inputs(), None),
            "No findings (cpu: 3 profiles, 0 stacks).\n"
        );
    }

    #[test]
    fn a_finding_prints_its_cost_method_and_evidence() {
        let text = render(&[finding()], &inputs(), None);
        let expected = "\
1 findings (cpu: 3 profiles, 0 stacks).

1. [critical] Regular expression compiled on each call in app.V.check
   cost: 25.0 % of CPU (2s), 1ms per request
   method: app.V.check (V.java)
   why: 25.0 % of CPU
   fix: compile it once
   endpoints: GET /v (2s)
   traces: 0af7651916cd43dd8448eb211c80319c (1s)
   stack 1 (2s):
     java.util.regex.Pattern.compile
     app.V.check
";
        assert_eq!(text, expected);
        let json = to_json(&[finding()], &inputs(), None);
        assert_eq!(json["findings"][0]["severity"], "critical");
        assert_eq!(
            json["findings"][0]["stacks"][0]["frames"][1],
            "java.util.regex.Pattern.compile"
        );
        assert_eq!(json["findings"][0]["per_request"], 1e6);
        assert_eq!(
            json["findings"][0]["traces"][0]["trace_id"],
            "0af7651916cd43dd8448eb211c80319c"
        );
    }

    #[test]
    fn against_a_baseline_each_finding_says_whether_it_is_new() {
        let both = [finding(), finding()];
        let text = render(&both, &inputs(), Some(&[true, false]));
        assert!(
            text.contains(
                "1. [critical] new: Regular expression compiled on each call in app.V.check\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("2. [critical] Regular expression compiled on each call in app.V.check (also in the baseline)\n"),
            "{text}"
        );
        let json = to_json(&both, &inputs(), Some(&[true, false]));
        assert_eq!(json["findings"][0]["new"], true);
        assert_eq!(json["findings"][1]["new"], false);
        assert!(to_json(&both, &inputs(), None)["findings"][0]
            .get("new")
            .is_none());
    }
}
