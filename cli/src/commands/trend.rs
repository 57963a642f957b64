//! `otelprof top --trend GLOB`: how the functions matching a pattern changed over the
//! selection's time, one row per time bucket (the buckets of the UI's timeline), from the
//! store's one trend query ([`otelprof_store::query::trend`]).

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use otelprof_primitives::escape;
use otelprof_store::focus::Glob;
use otelprof_store::format_time;
use otelprof_store::query::trend::{self, Trend};

use crate::cli::TopArgs;
use crate::table::{render_columns, value};

/// Time buckets of a trend, unless `--buckets` asks for others.
pub const BUCKETS: usize = 20;
/// Width of the share bar at the largest share.
const BAR: usize = 30;

/// The trend `args` ask for (`--trend`, the selection, `--buckets`); fails, saying why, when
/// nothing is selected or nothing matches.
pub fn answer(args: &TopArgs, pattern: &str, buckets: usize) -> anyhow::Result<Trend> {
    let glob = Glob::parse(pattern)
        .map_err(|why| anyhow::anyhow!("--trend {}: {why}", escape::quote(pattern)))?;
    let selector = args.select.selector()?;
    let spec = args.select.spec(&selector)?;
    let t = trend::trend(
        || super::open_source(&args.paths),
        &args.paths,
        spec,
        &glob,
        buckets,
    )?;
    if t.points.iter().all(|p| p.selection == 0.0) {
        bail!(
            "no {} samples in the selection ({})",
            t.ty.name(),
            super::describe(&selector, t.ty)
        );
    }
    if t.functions.is_empty() {
        bail!(
            "no function matches {} in the selection: patterns match the whole \
             pkg.Class.method, `*` for any run, e.g. 'com.shop.*' or '*.findProduct'",
            escape::quote(pattern)
        );
    }
    Ok(t)
}

pub fn run(args: &TopArgs, pattern: &str) -> anyhow::Result<ExitCode> {
    let buckets = args.buckets.map_or(BUCKETS, usize::from);
    let t = answer(args, pattern, buckets)?;
    out!("{}", render(&t))?;
    Ok(ExitCode::SUCCESS)
}

/// `x` as a percentage with two decimals, `-` when unknown.
fn percent(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |x| format!("{:.2}%", 100.0 * x))
}

/// The heading, then one row per bucket: its start, the total and self of the matching
/// functions and their shares of the bucket's selection, per request when known, and a bar
/// of the share.
pub fn render(t: &Trend) -> String {
    let mut out = String::new();
    let matched: Vec<&str> = t.functions.iter().take(3).map(|f| f.0.as_str()).collect();
    let more = t.functions.len().saturating_sub(matched.len());
    let _ = write!(
        out,
        "Trend of {} ({}, {}): {} function{} ({}{})",
        escape::quote(&t.pattern),
        t.ty.name(),
        escape::escape(&t.unit),
        t.functions.len(),
        if t.functions.len() == 1 { "" } else { "s" },
        escape::escape(&matched.join(", ")),
        if more > 0 {
            format!(", {more} more")
        } else {
            String::new()
        }
    );
    if let (Some(a), Some(b)) = (t.times.first(), t.times.last()) {
        let _ = write!(
            out,
            "; {} buckets from {} to {}",
            t.points.len(),
            format_time(*a),
            format_time(*b)
        );
    }
    out.push('\n');
    let top = t
        .points
        .iter()
        .filter_map(|p| p.share())
        .fold(0.0f64, f64::max);
    let bar = |share: Option<f64>| match share {
        Some(s) if top > 0.0 => "#".repeat((s / top * BAR as f64).round() as usize),
        _ => String::new(),
    };
    let unit = &t.unit;
    let cell = |v: f64, p: &trend::TrendPoint| {
        if p.selection == 0.0 {
            "-".to_owned()
        } else {
            value(v, unit)
        }
    };
    // The request columns only where the store has request counts.
    let requests = t.has_requests();
    let rows: Vec<Vec<String>> = t
        .points
        .iter()
        .zip(&t.times)
        .map(|(p, at)| {
            let mut row = vec![
                format_time(*at),
                cell(p.total, p),
                percent(p.share()),
                cell(p.self_value, p),
                percent(p.self_share()),
            ];
            if requests {
                row.push(p.requests.map_or("-".to_owned(), |n| format!("{n:.0}")));
                row.push(p.per_request().map_or("-".to_owned(), |v| value(v, unit)));
            }
            row.push(bar(p.share()));
            row
        })
        .collect();
    let mut header = vec!["start", "total", "total%", "self", "self%"];
    if requests {
        header.extend(["requests", "per request"]);
    }
    header.push("total% bar");
    out.push_str(&render_columns(&header, &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use otelprof_store::query::trend::TrendPoint;
    use otelprof_store::ProfileType;

    fn point(total: f64, self_value: f64, selection: f64) -> TrendPoint {
        TrendPoint {
            total,
            self_value,
            selection,
            requests: None,
        }
    }

    #[test]
    fn a_row_per_bucket_with_shares_and_a_bar() {
        let s = 1_000_000_000;
        let t = Trend {
            ty: ProfileType::Wall,
            unit: "nanoseconds".to_owned(),
            pattern: "app.Render.*".to_owned(),
            times: vec![0, 10 * s, 20 * s, 30 * s],
            points: vec![
                point(1e9, 5e8, 4e9),
                TrendPoint::default(),
                point(2e9, 1e9, 4e9),
            ],
            functions: vec![("app.Render.html".to_owned(), 3e9)],
        };
        assert_eq!(
            render(&t),
            "\
Trend of \"app.Render.*\" (wall, nanoseconds): 1 function (app.Render.html); 3 buckets from \
1970-01-01T00:00:00.000Z to 1970-01-01T00:00:30.000Z
                   start  total  total%   self   self%  total% bar
1970-01-01T00:00:00.000Z     1s  25.00%  500ms  12.50%  ###############
1970-01-01T00:00:10.000Z      -       -      -       -  
1970-01-01T00:00:20.000Z     2s  50.00%     1s  25.00%  ##############################
"
        );
    }
}
