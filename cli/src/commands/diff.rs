//! `otelprof diff`: what changed between two selections (two releases, two time ranges), with
//! the significance of each change; `--fail-above` turns it into a CI gate.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use otelprof_store::select::Selector;

use crate::cli::DiffArgs;
use crate::escape::{self, escape};
use crate::flame;
use crate::table::{render_columns, render_header, value};
use otelprof_store::query;
use otelprof_store::query::diff::{self, Change, GroupChange, SIGNIFICANT_Z};
use otelprof_store::query::requests;

/// Exit code of `diff --fail-above` when a regression exceeds the threshold.
pub const EXIT_REGRESSION: u8 = 3;

/// Runs `diff`; also returns the function the largest significant increase is in.
pub fn run(args: &DiffArgs) -> anyhow::Result<(ExitCode, Option<String>)> {
    if let Some(o) = &args.output {
        flame::format_of(o)?;
    }
    if let Some(p) = args.fail_above {
        if !(0.0..=100.0).contains(&p) {
            bail!("--fail-above takes percentage points between 0 and 100, got {p}");
        }
    }
    let shared = args.select.selector()?;
    let now = super::now_unix_nanos();
    let mut base_sel = Selector::default();
    base_sel.add_terms(&args.base, now).context("--base")?;
    let mut head_sel = Selector::default();
    head_sel.add_terms(&args.head, now).context("--head")?;
    if base_sel.is_empty() || head_sel.is_empty() {
        bail!("--base and --head each need a selector, e.g. --base service.version=1.4 --head service.version=1.5");
    }
    let (base_sel, head_sel) = (shared.and(&base_sel), shared.and(&head_sel));
    let source = super::open_source(&args.paths)?;
    let by = Some(args.by.as_str());
    let mut sides = query::merge_many(
        &source,
        &[
            args.select.spec(&base_sel)?.by(by),
            args.select.spec(&head_sel)?.by(by),
        ],
    )?
    .into_iter();
    let (Some((base, ty)), Some((head, _))) = (sides.next(), sides.next()) else {
        bail!("internal error: the diff lost a side");
    };
    if base.stacks.is_empty() {
        bail!(
            "base: {}",
            query::explain_empty(&source, &base, ty, &base_sel)
        );
    }
    if head.stacks.is_empty() {
        bail!(
            "head: {}",
            query::explain_empty(&source, &head, ty, &head_sel)
        );
    }
    outln!(
        "base: {}",
        render_header(&base, base.total(), base.total_count())
    )?;
    outln!(
        "head: {}",
        render_header(&head, head.total(), head.total_count())
    )?;
    outln!()?;
    let counts = requests::endpoint_requests(&args.paths, &base_sel, &head_sel);
    let groups = diff::group_changes(&base, &head, &|is_head, name| counts.get(is_head, name));
    out!("{}", render_groups(&groups, &args.by, &head.unit))?;
    if counts.is_empty() {
        outln!("(per-request columns need request counts: OTLP metrics http.server.request.duration in the store)")?;
    }
    outln!()?;
    let changes = diff::changes(&base, &head);
    out!("{}", render(&changes, args.limit))?;
    outln!()?;
    let headline = diff::headline(&changes).map(|c| c.name.clone());
    match diff::headline(&changes) {
        Some(c) => outln!(
            "Largest significant increase: {} (self {:+.2} pp, total {:+.2} pp, z = {:.1})",
            escape(&c.name),
            c.delta_self() * 100.0,
            c.delta_total() * 100.0,
            if c.z_self >= diff::SIGNIFICANT_Z {
                c.z_self
            } else {
                c.z_total
            }
        ),
        None => outln!("No significant increase (|z| < {}).", diff::SIGNIFICANT_Z),
    }?;
    if let Some(o) = &args.output {
        let tree = flame::Tree::diff(
            &base,
            &head,
            &format!("otelprof diff: {} → {}", args.base, args.head),
        );
        let subtitle = format!(
            "base: {} | head: {}",
            super::describe(&base_sel, ty),
            super::describe(&head_sel, ty)
        );
        let path = flame::write(&tree, &subtitle, o)?;
        outln!("differential flame graph: {}", escape::path(&path))?;
    }
    if let Some(limit) = args.fail_above {
        let bad = diff::regressions(&changes, limit);
        if !bad.is_empty() {
            for c in bad.iter().take(5) {
                errln!(
                    "otelprof: regression: {} grew from {:.2}% to {:.2}% of the total ({:+.2} pp > {limit} pp, z = {:.1})",
                    escape(&c.name),
                    c.base_total * 100.0,
                    c.head_total * 100.0,
                    c.delta_total() * 100.0,
                    c.z_total
                );
            }
            return Ok((ExitCode::from(EXIT_REGRESSION), headline));
        }
    }
    Ok((ExitCode::SUCCESS, headline))
}

fn pp(x: f64) -> String {
    format!("{:+.2}", x * 100.0)
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

fn z_text(z: f64) -> String {
    if z.is_infinite() {
        return if z > 0.0 {
            "+inf".into()
        } else {
            "-inf".into()
        };
    }
    let mark = if z.abs() >= SIGNIFICANT_Z { " *" } else { "" };
    format!("{z:+.1}{mark}")
}

/// The ranking: functions that grew, then those that shrank, `limit` of each (0 = all).
pub fn render(changes: &[Change], limit: usize) -> String {
    let take = |it: &mut dyn Iterator<Item = &Change>| -> Vec<[String; 8]> {
        it.take(if limit == 0 { usize::MAX } else { limit })
            .map(|c| {
                [
                    pct(c.base_self),
                    pct(c.head_self),
                    pp(c.delta_self()),
                    z_text(c.z_self),
                    pct(c.base_total),
                    pct(c.head_total),
                    pp(c.delta_total()),
                    c.name.clone(),
                ]
            })
            .collect()
    };
    let header = [
        "base self",
        "head self",
        "Δself pp",
        "z",
        "base total",
        "head total",
        "Δtotal pp",
        "function",
    ];
    let mut out = String::new();
    let grew = take(
        &mut changes
            .iter()
            .filter(|c| c.delta_self() > 0.0 || (c.delta_self() == 0.0 && c.delta_total() > 0.0)),
    );
    let _ = writeln!(
        out,
        "Grew (share of own total; * = significant, |z| ≥ {SIGNIFICANT_Z}):"
    );
    out.push_str(&render_columns(&header, &grew));
    let mut shrank_list: Vec<&Change> = changes.iter().filter(|c| c.delta_self() < 0.0).collect();
    shrank_list.sort_by(|a, b| a.delta_self().total_cmp(&b.delta_self()));
    let shrank = take(&mut shrank_list.into_iter());
    let _ = writeln!(out, "\nShrank:");
    out.push_str(&render_columns(&header, &shrank));
    out
}

pub fn render_groups(groups: &[GroupChange], key: &str, unit: &str) -> String {
    let per_request = groups
        .iter()
        .any(|g| g.base_requests.is_some() && g.head_requests.is_some());
    let cells: Vec<[String; 6]> = groups
        .iter()
        .map(|g| {
            let per = |v: f64, n: Option<f64>| match n {
                Some(n) if n > 0.0 => Some(v / n),
                _ => None,
            };
            let (bp, hp) = (
                per(g.base_value, g.base_requests),
                per(g.head_value, g.head_requests),
            );
            let change = match (bp, hp) {
                (Some(b), Some(h)) if b > 0.0 => format!("{:+.1}%", (h / b - 1.0) * 100.0),
                _ => "-".into(),
            };
            [
                pct(g.base_share),
                pct(g.head_share),
                pp(g.head_share - g.base_share),
                bp.map_or("-".into(), |v| value(v, unit)),
                hp.map_or("-".into(), |v| value(v, unit)),
                if per_request {
                    format!("{change:>8}  {}", g.name)
                } else {
                    g.name.clone()
                },
            ]
        })
        .collect();
    render_columns(
        &[
            "base share",
            "head share",
            "Δ pp",
            "base/request",
            "head/request",
            if per_request {
                "Δ/request  endpoint"
            } else {
                key
            },
        ],
        &cells,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_render_in_percentage_points() {
        let slow = Change {
            name: "slow".into(),
            base_self: 0.1,
            head_self: 0.4,
            base_total: 0.1,
            head_total: 0.4,
            z_self: 20.0,
            z_total: 20.0,
        };
        let text = render(&[slow], 5);
        assert!(text.contains("+30.00"), "{text}");
        assert!(text.contains("+20.0 *"), "{text}");
    }
}
