//! `otelprof drilldown`: where one trace or span spent its time. Short spans often get no
//! samples; then the profile of the span's endpoint is offered instead.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use otelprof_store::format_time;
use otelprof_store::merge::Merged;
use otelprof_store::select::{Condition, ProfileType, Selector};

use crate::cli::DrilldownArgs;
use crate::flame;
use crate::table::{format_value, render_columns, render_header, share, value};
use otelprof_primitives::escape::{self, escape};
use otelprof_store::query::drilldown::{self, Drilldown};
use otelprof_store::query::top;
use otelprof_store::query::{self, Spec};

/// What `drilldown` answers, before it is printed (the UI's `/trace/<id>` shows the same).
pub struct DrilldownAnswer {
    pub drilldown: Drilldown,
    pub selector: Selector,
    pub ty: ProfileType,
    /// Only `--endpoint` was given: no trace or span.
    pub endpoint_only: bool,
}

impl DrilldownAnswer {
    /// The profile shown: the selection's, or the endpoint's when the span had no samples.
    pub fn shown(&self) -> Option<&Merged> {
        match (
            &self.drilldown.fallback,
            self.drilldown.merged.stacks.is_empty(),
        ) {
            (_, false) => Some(&self.drilldown.merged),
            (Some((_, m)), true) => Some(m),
            (None, true) => None,
        }
    }
}

/// Checks the flags and drills into the trace, span or endpoint they name.
pub fn answer(args: &DrilldownArgs) -> anyhow::Result<DrilldownAnswer> {
    let mut selector = args.select.selector()?;
    if selector.trace_id.is_none() && selector.span_ids.is_empty() && args.endpoint.is_none() {
        bail!("say what to drill into: --trace-id T [--span-id S], or --endpoint NAME");
    }
    if args.children && selector.span_ids.is_empty() {
        bail!("--children needs --span-id");
    }
    let endpoint_only = selector.trace_id.is_none() && selector.span_ids.is_empty();
    if let (Some(e), true) = (&args.endpoint, endpoint_only) {
        selector
            .conditions
            .push(Condition::parse(&format!("span_name={e}"))?);
    }
    let (ty, measure) = args.select.view()?;
    // Per-span statistics need every sample's trace link: sample rows, never rollups.
    let source =
        super::open_source_for(&args.paths, std::slice::from_ref(&selector))?.narrow_to(&selector);
    let target = drilldown::Target {
        selector: selector.clone(),
        children: args.children,
        measure,
        lines: args.select.lines,
    };
    let (mut d, ty) = drilldown::drill(&source, ty, &target)?;
    if d.merged.stacks.is_empty() && d.fallback.is_none() {
        if let Some(e) = &args.endpoint {
            let mut by_endpoint = Selector::default();
            by_endpoint
                .conditions
                .push(Condition::parse(&format!("span_name={e}"))?);
            let spec = Spec::new(Some(ty), &by_endpoint).view(measure, args.select.lines);
            let (m, _) = query::merge(&source, spec)?;
            if !m.stacks.is_empty() {
                d.notes.push(format!(
                    "instead, the profile of the endpoint {} follows",
                    escape::quote(e)
                ));
                d.fallback = Some((e.clone(), m));
            }
        }
    }
    Ok(DrilldownAnswer {
        drilldown: d,
        selector,
        ty,
        endpoint_only,
    })
}

pub fn run(args: &DrilldownArgs) -> anyhow::Result<ExitCode> {
    if let Some(o) = &args.output {
        flame::format_of(o)?;
    }
    let DrilldownAnswer {
        drilldown: d,
        selector,
        ty,
        endpoint_only,
    } = answer(args)?;
    out!("{}", render_summary(&d, selector.trace_id))?;
    for n in &d.notes {
        outln!("note: {}", escape(n))?;
    }
    let (shown, title) = match (&d.fallback, d.merged.stacks.is_empty()) {
        (_, false) => (
            &d.merged,
            format!("otelprof drilldown: {}", super::describe(&selector, ty)),
        ),
        (Some((endpoint, m)), true) => (m, format!("otelprof: endpoint {endpoint} (fallback)")),
        (None, true) => {
            bail!("nothing to show for {}", super::describe(&selector, ty));
        }
    };
    if !d.merged.stacks.is_empty() && !endpoint_only {
        outln!()?;
        out!("{}", render_spans(&d, &d.merged.unit))?;
    }
    outln!()?;
    if d.merged.stacks.is_empty() {
        outln!(
            "{}",
            render_header(shown, shown.total(), shown.total_count())
        )?;
    }
    let table = top::top_functions(shown, None);
    out!(
        "{}",
        super::top::render_top(
            &table,
            otelprof_store::query::states::state_columns(shown).as_ref(),
            shown,
            args.limit
        )
    )?;
    if let Some(o) = &args.output {
        let subtitle = render_header(shown, shown.total(), shown.total_count());
        let path = flame::write(&flame::Tree::of(shown, &title), &subtitle, o)?;
        outln!("\nflame graph: {}", escape::path(&path))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The span table: one row per span with samples.
pub fn render_spans(d: &Drilldown, unit: &str) -> String {
    let total = d.merged.total();
    let cells: Vec<[String; 6]> = d
        .spans
        .iter()
        .map(|(link, s)| {
            let window = match (s.first, s.last, s.window) {
                (Some(a), Some(b), _) => format!("{} .. {}", format_time(a), format_time(b)),
                (_, _, Some((a, b))) => {
                    format!("within profile {} .. {}", format_time(a), format_time(b))
                }
                _ => "-".into(),
            };
            [
                link.span_id_hex(),
                value(s.value, unit),
                share(s.value, total),
                format!("{:.0}", s.count),
                if s.endpoints.is_empty() {
                    "-".to_owned()
                } else {
                    s.endpoints.join(", ")
                },
                window,
            ]
        })
        .collect();
    render_columns(
        &[
            "span",
            "value",
            "share",
            "samples",
            "endpoint",
            "sampled between",
        ],
        &cells,
    )
}

/// The header of a drilldown: trace, endpoint(s), time window, totals.
pub fn render_summary(d: &Drilldown, trace: Option<[u8; 16]>) -> String {
    let mut out = String::new();
    if let Some(t) = trace {
        let _ = writeln!(out, "trace {}", otel_bridge::model::hex(&t));
    }
    let mut endpoints: Vec<std::borrow::Cow<'_, str>> = d
        .spans
        .iter()
        .flat_map(|(_, s)| s.endpoints.iter().map(|e| escape(e)))
        .collect();
    endpoints.sort_unstable();
    endpoints.dedup();
    if !endpoints.is_empty() {
        let _ = writeln!(out, "endpoint {}", endpoints.join(", "));
    }
    let first = d.spans.iter().filter_map(|(_, s)| s.first).min();
    let last = d.spans.iter().filter_map(|(_, s)| s.last).max();
    match (first, last, d.merged.window) {
        (Some(a), Some(b), _) => {
            let _ = writeln!(
                out,
                "samples from {} to {} ({} apart)",
                format_time(a),
                format_time(b),
                format_value(b - a, "nanoseconds")
            );
        }
        (_, _, Some((a, b))) => {
            let _ = writeln!(
                out,
                "samples in the profiles of {} .. {} (no per-sample timestamps; the agent's timestamps=on adds them)",
                format_time(a),
                format_time(b)
            );
        }
        _ => {}
    }
    if !d.merged.stacks.is_empty() {
        let _ = writeln!(
            out,
            "{} on CPU in {:.0} samples, {} span{}",
            value(d.merged.total(), &d.merged.unit),
            d.merged.total_count(),
            d.spans.len(),
            if d.spans.len() == 1 { "" } else { "s" }
        );
    }
    out
}
