//! `otelprof leaks`: the allocation sites whose live bytes grow across the live-heap
//! snapshots of the selection ([`otelprof_store::query::leaks`] ranks them and says how).

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::bail;

use crate::cli::{LeaksArgs, SelectArgs};
use crate::table::{format_value, render_columns};
use otelprof_store::query::leaks::{self, Leak, LeakOptions, LeakReport, FDR};
use otelprof_store::select::ProfileType;

pub fn run(args: &LeaksArgs) -> anyhow::Result<ExitCode> {
    let report = answer(args)?;
    print!("{}", render(&report, args.all));
    Ok(ExitCode::SUCCESS)
}

/// Ranks the sites of the snapshots `args` selects; fails when there is no snapshot.
pub fn answer(args: &LeaksArgs) -> anyhow::Result<LeakReport> {
    let select = SelectArgs {
        conditions: args.conditions.clone(),
        from: args.from.clone(),
        to: args.to.clone(),
        ty: Some(ProfileType::Live),
        focus: args.focus.clone(),
        ..SelectArgs::default()
    };
    let selector = select.selector()?;
    // Every snapshot's own rows: an hour's rollup keeps only its latest snapshot.
    let source =
        super::open_source_for(&args.paths, std::slice::from_ref(&selector))?.narrow_to(&selector);
    let options = LeakOptions {
        min_snapshots: args.min_snapshots,
    };
    let report = leaks::leaks(&source, &selector, &options)?;
    if report.snapshots == 0 {
        bail!(
            "no live-heap snapshot in the selection (the agent writes them with live=SIZE; \
             try a wider --from/--to)"
        );
    }
    Ok(report)
}

fn bytes(v: f64) -> String {
    format_value(v.round() as i64, "bytes")
}

fn row(l: &Leak) -> [String; 6] {
    [
        format!("{}/h", bytes(l.slope_per_hour)),
        bytes(l.growth),
        format!("{:.1}", l.t),
        bytes(l.latest),
        format!("{:.1}%", 100.0 * l.share),
        l.site.clone(),
    ]
}

/// The report as text: a header, then the candidates (or "no leak candidates"), then as
/// many of the other sites as asked for.
pub fn render(r: &LeakReport, others: usize) -> String {
    let mut out = String::new();
    let window = r
        .window
        .map(|(a, b)| (b - a) as f64 / 60e9)
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Live heap: {} snapshots over {window:.1} min, {} instance(s) with enough of them; \
         latest live {}. Sites: the allocated class and the leaf-most method outside the JDK.",
        r.snapshots,
        r.instances,
        bytes(r.latest_total),
    );
    let header = ["slope", "growth", "t", "latest", "share", "site"];
    let candidates: Vec<[String; 6]> = r.candidates().map(row).collect();
    if candidates.is_empty() {
        let _ = writeln!(
            out,
            "no leak candidates among {} sites (growth must pass a t-test at {:.0}% FDR and \
             exceed the sampling noise)",
            r.sites.len(),
            100.0 * FDR
        );
    } else {
        let _ = writeln!(
            out,
            "{} leak candidate(s), fastest first (t-test at {:.0}% FDR, growth above the \
             sampling noise):",
            candidates.len(),
            100.0 * FDR
        );
        out.push_str(&render_columns(&header, &candidates));
    }
    if others > 0 {
        let rest: Vec<[String; 6]> = r
            .sites
            .iter()
            .filter(|l| !l.significant)
            .take(others)
            .map(row)
            .collect();
        if !rest.is_empty() {
            let _ = writeln!(out, "Other sites, by slope:");
            out.push_str(&render_columns(&header, &rest));
        }
    }
    out
}
