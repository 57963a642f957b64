//! `otelprof findings`: the known performance patterns in a selection, sorted by cost, each
//! with its method, evidence stacks, endpoints, fix, severity and why it fired; as text or
//! JSON (`--format json`, for alerting), and a CI gate (`--fail-on SEVERITY`, exit code 3).

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use otelprof_store::merge::Merged;
use otelprof_store::query::findings::{self, Finding, Inputs, Severity};
use otelprof_store::query::requests;
use otelprof_store::select::ProfileType;

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
    let selector = args.select.selector()?;
    let source = super::open_source(&args.paths)?.narrow_to(&selector);
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
    }
    let counts = requests::endpoint_requests(&args.paths, &selector, &selector);
    Ok((findings::run(&inputs, &counts), inputs))
}

pub fn run(args: &FindingsArgs) -> anyhow::Result<ExitCode> {
    let (found, inputs) = answer(args)?;
    match args.format {
        FindingsFormat::Text => out!("{}", render(&found, &inputs))?,
        FindingsFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&to_json(&found, &inputs))?
        )?,
    }
    let gate = args.fail_on.as_deref().and_then(Severity::parse);
    if let Some(gate) = gate {
        let failing: Vec<&Finding> = found.iter().filter(|f| f.severity >= gate).collect();
        if !failing.is_empty() {
            for f in &failing {
                errln!("otelprof: {}: {} ({})", f.severity.name(), f.title, f.why);
            }
            return Ok(ExitCode::from(EXIT_REGRESSION));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The findings as text, most severe and costly first; "no findings" with what was examined.
pub fn render(found: &[Finding], inputs: &Inputs) -> String {
    let mut out = String::new();
    if found.is_empty() {
        let _ = writeln!(out, "No findings ({}).", inputs.examined());
        return out;
    }
    let _ = writeln!(out, "{} findings ({}).", found.len(), inputs.examined());
    for (i, f) in found.iter().enumerate() {
        let _ = writeln!(out, "\n{}. [{}] {}", i + 1, f.severity.name(), f.title);
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

/// The findings as JSON: one object per finding, and what was examined.
pub fn to_json(found: &[Finding], inputs: &Inputs) -> serde_json::Value {
    let findings: Vec<serde_json::Value> = found
        .iter()
        .map(|f| {
            serde_json::json!({
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
                "stacks": f.stacks.iter().map(|s| serde_json::json!({"frames": s.frames, "value": s.value})).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({ "examined": inputs.examined(), "findings": findings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use otelprof_store::query::findings::{EvidenceStack, Lines};

    fn inputs() -> Inputs {
        let cpu = Merged {
            profiles_used: 3,
            ..Merged::default()
        };
        Inputs {
            cpu,
            wall: Merged::default(),
            alloc: Merged::default(),
            lock: Merged::default(),
            lines: Lines::default(),
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
            fix: "compile it once",
            severity: Severity::Critical,
            why: "25.0 % of CPU".into(),
        }
    }

    #[test]
    fn no_findings_says_what_was_examined() {
        assert_eq!(
            render(&[], &inputs()),
            "No findings (cpu: 3 profiles, 0 stacks).\n"
        );
    }

    #[test]
    fn a_finding_prints_its_cost_method_and_evidence() {
        let text = render(&[finding()], &inputs());
        let expected = "\
1 findings (cpu: 3 profiles, 0 stacks).

1. [critical] Regular expression compiled on each call in app.V.check
   cost: 25.0 % of CPU (2s), 1ms per request
   method: app.V.check (V.java)
   why: 25.0 % of CPU
   fix: compile it once
   endpoints: GET /v (2s)
   stack 1 (2s):
     java.util.regex.Pattern.compile
     app.V.check
";
        assert_eq!(text, expected);
        let json = to_json(&[finding()], &inputs());
        assert_eq!(json["findings"][0]["severity"], "critical");
        assert_eq!(
            json["findings"][0]["stacks"][0]["frames"][1],
            "java.util.regex.Pattern.compile"
        );
        assert_eq!(json["findings"][0]["per_request"], 1e6);
    }
}
