//! `otelprof traces`: the traces with the most time in the selection, each with its time,
//! samples, spans, endpoints and window: where to start a `drilldown`. The web UI's Traces
//! view is this answer serialised ([`answer`]).

use std::process::ExitCode;

use anyhow::bail;
use otelprof_store::format_time;
use otelprof_store::query::traces::{self, TraceRow, Traces};

use crate::cli::TracesArgs;
use crate::table::{render_columns, render_header, share, value};

/// Computes the answer; fails, saying why, when the selection has no sample in a trace.
pub fn answer(args: &TracesArgs) -> anyhow::Result<Traces> {
    let selector = args.select.selector()?;
    // Compacted hours answer from their spans: a row per span, no stacks.
    let source = super::open_source_for(&args.paths, std::slice::from_ref(&selector))?
        .narrow_to(&selector)
        .use_spans(None);
    let spec = args.select.spec(&selector)?;
    let t = traces::top_traces(&source, spec, args.limit as usize)?;
    if t.merged.stacks.is_empty() {
        bail!(
            "{}",
            otelprof_store::query::explain_empty(&source, &t.merged, t.ty, &selector)
        );
    }
    if t.rows.is_empty() {
        bail!(
            "no {} sample of the selection is in a trace (the agent links samples to the \
             sampled traces of OpenTelemetry or otelprof's Java API)",
            t.ty.name()
        );
    }
    Ok(t)
}

/// When a trace's samples were taken: their first and last timestamps, else the window of
/// the profiles they are in.
pub fn window(r: &TraceRow) -> String {
    match (r.first, r.last, r.profiles) {
        (Some(a), Some(b), _) => format!("{} .. {}", format_time(a), format_time(b)),
        (_, _, Some((a, b))) => format!("within {} .. {}", format_time(a), format_time(b)),
        _ => "-".to_owned(),
    }
}

pub fn run(args: &TracesArgs) -> anyhow::Result<ExitCode> {
    let t = answer(args)?;
    let (total, count) = (t.merged.total(), t.merged.total_count());
    outln!("{}", render_header(&t.merged, total, count))?;
    let unit = &t.merged.unit;
    let cells: Vec<[String; 7]> = t
        .rows
        .iter()
        .map(|r| {
            [
                value(r.value, unit),
                share(r.value, total),
                format!("{:.0}", r.count),
                r.spans.to_string(),
                if r.endpoints.is_empty() {
                    "-".to_owned()
                } else {
                    r.endpoints.join(", ")
                },
                window(r),
                r.trace_id_hex(),
            ]
        })
        .collect();
    out!(
        "{}",
        render_columns(
            &["time", "time%", "samples", "spans", "endpoint", "window", "trace"],
            &cells
        )
    )?;
    if t.total > t.rows.len() {
        outln!(
            "({} traces with samples; the first {} shown, --limit N for more)",
            t.total,
            t.rows.len()
        )?;
    }
    if let Some(first) = t.rows.first() {
        outln!(
            "Next: otelprof drilldown --trace-id {} …",
            first.trace_id_hex()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
