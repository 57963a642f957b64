//! `otelprof diff`: what changed between two selections (two releases, two time ranges), with
//! the significance of each change and the call path that carries it; `--fail-above` turns it
//! into a CI gate (docs/ci-gate.md). The statistics are the store's
//! ([`otelprof_store::query::diff`]); this file reads the flags and renders the answer.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use otelprof_store::merge::Merged;
use otelprof_store::query;
use otelprof_store::query::diff::{
    self, Basis, Criteria, Dispersion, FunctionChange, FunctionDiff, GroupChange, GroupDiff,
    Measure, Regression, Test,
};
use otelprof_store::query::requests;
use otelprof_store::query::slices::{self, SliceSpec};
use otelprof_store::select::{ProfileType, Selector};

use crate::cli::{DiffArgs, DiffRanges};
use crate::flame;
use crate::table::{render_columns, render_header, value};
use otelprof_primitives::escape;

/// Exit code of `diff --fail-above` when a regression exceeds the threshold.
pub const EXIT_REGRESSION: u8 = 3;

/// Rows of the "Grew" table whose carrying call path is shown.
const PATH_ROWS: usize = 5;
/// Callers shown on a path before it is cut short.
const PATH_CALLERS: usize = 4;

/// What `diff` answers, before it is printed (the UI's `/api/diff` serialises the same).
pub struct DiffAnswer {
    pub base: Merged,
    pub head: Merged,
    pub ty: ProfileType,
    pub base_sel: Selector,
    pub head_sel: Selector,
    pub dispersion: Dispersion,
    pub groups: GroupDiff,
    pub functions: FunctionDiff,
}

/// Where each side's profiles are read from: both from all the paths (told apart by their
/// selectors), or base from the first path and head from the second.
#[derive(Clone, Debug, PartialEq)]
pub enum SidePaths {
    Shared(Vec<PathBuf>),
    Apart([PathBuf; 2]),
}

impl SidePaths {
    fn of(&self, head: bool) -> &[PathBuf] {
        match self {
            SidePaths::Shared(all) => all,
            SidePaths::Apart([base, h]) => std::slice::from_ref(if head { h } else { base }),
        }
    }
}

/// Checks the flags and computes the comparison (both merges, the noise between time slices,
/// the per-group and per-function tests).
pub fn answer(args: &DiffArgs) -> anyhow::Result<DiffAnswer> {
    check_flags(args)?;
    let (base_sel, head_sel, paths) = sides(args, super::now_unix_nanos())?;
    if let Some(warning) = overlap_warning(&base_sel, &head_sel) {
        if matches!(paths, SidePaths::Shared(_)) {
            errln!("otelprof: warning: {warning}");
        }
    }
    let (_, measure) = args.select.view()?;
    let by = Some(args.by.as_str());
    let specs = [
        args.select.spec(&base_sel)?.by(by),
        args.select.spec(&head_sel)?.by(by),
    ];
    let (base, head, ty, presliced) = match &paths {
        SidePaths::Shared(all) => merge_shared(all, &specs, measure, args.select.lines, by)?,
        SidePaths::Apart(_) => {
            let (b, ty) = merge_apart(&paths, &specs[0], false, by)?;
            let (h, _) = merge_apart(&paths, &specs[1], true, by)?;
            (b, h, ty, None)
        }
    };
    for (merged, selector, head) in [(&base, &base_sel, false), (&head, &head_sel, true)] {
        if merged.stacks.is_empty() {
            let source = super::open_source(paths.of(head))?;
            let side = if head { "head" } else { "base" };
            bail!(
                "{side}: {}",
                query::explain_empty(&source, merged, ty, selector)
            );
        }
    }
    if args.fail_above.is_some() && !diff::testable(ty) {
        bail!(
            "--fail-above needs significance tests, which are made for CPU profiles only (a {} \
             sample's value is a weight, and the merge does not keep how many samples are \
             behind it); compare --type cpu",
            ty.name()
        );
    }
    let dispersion = if diff::testable(ty) {
        let sides = [
            slice_spec(args, &base, &base_sel, ty, measure),
            slice_spec(args, &head, &head_sel, ty, measure),
        ];
        let sliced = slice(&paths, &sides, presliced, by)?;
        let slices: Vec<&[Merged]> = sliced.slices.iter().map(Vec::as_slice).collect();
        let assumed = diff::dispersion::Assumption::of(&[&base, &head]);
        diff::dispersion::estimate(&slices, &sliced.weights, assumed)
    } else {
        Dispersion::binomial()
    };
    let criteria =
        Criteria::new(args.fdr / 100.0).with_dispersion(dispersion.factor, dispersion.test_df());
    let counts = match &paths {
        SidePaths::Shared(all) => requests::endpoint_requests(all, &base_sel, &head_sel),
        SidePaths::Apart([b, h]) => requests::EndpointCounts::sides(
            requests::endpoint_requests(std::slice::from_ref(b), &base_sel, &base_sel),
            requests::endpoint_requests(std::slice::from_ref(h), &head_sel, &head_sel),
        ),
    };
    let groups = diff::compare_groups(
        &base,
        &head,
        &|is_head, name| counts.get(is_head, name),
        ty,
        criteria,
    );
    let functions = diff::compare(&base, &head, ty, criteria);
    Ok(DiffAnswer {
        base,
        head,
        ty,
        base_sel,
        head_sel,
        dispersion,
        groups,
        functions,
    })
}

/// The flags' ranges.
fn check_flags(args: &DiffArgs) -> anyhow::Result<()> {
    if let Some(p) = args.fail_above {
        if !(0.0..=100.0).contains(&p) {
            bail!("--fail-above takes percentage points between 0 and 100, got {p}");
        }
    }
    if !(args.fdr > 0.0 && args.fdr <= 50.0) {
        bail!(
            "--fdr takes a false discovery rate in percent, above 0 and at most 50, got {}",
            args.fdr
        );
    }
    Ok(())
}

/// Both sides' merges from the same paths, in one pass over the partitions either can touch
/// (hours that lie wholly inside or outside each side from their rollups); with the slices
/// too when each side's slices follow from its selection alone (a time range cut in
/// slot-long slices, shorter than an hour): one pass over the slot rollups makes both merges
/// and the slices, and the guess is checked against the merges in [`slice`].
fn merge_shared(
    paths: &[PathBuf],
    specs: &[query::Spec; 2],
    measure: otelprof_store::select::Measure,
    lines: bool,
    by: Option<&str>,
) -> anyhow::Result<(Merged, Merged, ProfileType, Option<Presliced>)> {
    let both = [specs[0].selector.clone(), specs[1].selector.clone()];
    let guess = guessed_slices(specs, measure, lines);
    let ([(base, ty), (head, _)], presliced) = match guess {
        Some(sides) => {
            let slots = super::open_source_for(paths, &both)?
                .narrow_to_any(&both)
                .use_slots(by);
            let (merges, sliced) = slices::merge_many_and_slices(&slots, specs, &sides)?;
            (merges, Some(Presliced { sides, sliced }))
        }
        None => {
            let source = super::open_source_for(paths, &both)?
                .narrow_to_any(&both)
                .use_rollups(false, by);
            (query::merge_many(&source, specs)?, None)
        }
    };
    Ok((base, head, ty, presliced))
}

/// One side's merge, from the side's own paths.
fn merge_apart(
    paths: &SidePaths,
    spec: &query::Spec,
    head: bool,
    by: Option<&str>,
) -> anyhow::Result<(Merged, ProfileType)> {
    let source = super::open_source_for(paths.of(head), std::slice::from_ref(&spec.selector))?
        .narrow_to_any(std::slice::from_ref(&spec.selector))
        .use_rollups(false, by);
    let [merged] = query::merge_many(&source, std::array::from_ref(spec))?;
    Ok(merged)
}

/// Slices made with the merges, and the guess of the sides they were cut for.
struct Presliced {
    sides: Vec<SliceSpec>,
    sliced: slices::Sliced,
}

/// How a side is sliced for the noise estimate: as many slices as its samples support,
/// within the window its merge covered.
fn slice_spec(
    args: &DiffArgs,
    merged: &Merged,
    selector: &Selector,
    ty: ProfileType,
    measure: otelprof_store::select::Measure,
) -> SliceSpec {
    SliceSpec {
        ty,
        measure,
        lines: args.select.lines,
        selector: selector.clone(),
        window: merged.window.unwrap_or((0, 0)),
        slices: slices::slices_for(merged.total_count()),
    }
}

/// Both sides cut into their slices: the slices made with the merges when they were cut as
/// `sides` asks, else a pass of their own. Slices of whole hours are sums of hours, which
/// hourly rollups answer; of whole slots (6 minutes), sums of slots, which slot rollups
/// answer; shorter ones need the sample rows (and their timestamps). Sides read from paths of
/// their own are sliced apart.
fn slice(
    paths: &SidePaths,
    sides: &[SliceSpec; 2],
    presliced: Option<Presliced>,
    by: Option<&str>,
) -> anyhow::Result<slices::Sliced> {
    if let Some(p) = presliced {
        if p.sides.iter().zip(sides).all(|(g, s)| g.cuts_like(s)) {
            return Ok(p.sliced);
        }
    }
    let pass = |paths: &[PathBuf], sides: &[SliceSpec]| -> anyhow::Result<slices::Sliced> {
        let selectors: Vec<Selector> = sides.iter().map(|s| s.selector.clone()).collect();
        let source = super::open_source_for(paths, &selectors)?.narrow_to_any(&selectors);
        Ok(if sides.iter().all(SliceSpec::whole_hours) {
            slices::merge_slices(&source.use_rollups(false, by), sides)?
        } else if sides.iter().all(SliceSpec::whole_slots) {
            slices::merge_slices(&source.use_slots(None), sides)?
        } else {
            slices::merge_slices(&source, sides)?
        })
    };
    match paths {
        SidePaths::Shared(all) => pass(all, sides),
        SidePaths::Apart([b, h]) => {
            let base = pass(std::slice::from_ref(b), std::slice::from_ref(&sides[0]))?;
            let head = pass(std::slice::from_ref(h), std::slice::from_ref(&sides[1]))?;
            Ok(slices::Sliced {
                slices: base.slices.into_iter().chain(head.slices).collect(),
                weights: base.weights.into_iter().chain(head.weights).collect(),
            })
        }
    }
}

/// The slices each side will be cut in, when its selection alone tells: a time range (from
/// and to) that the most slices cut in whole slots, shorter than an hour each, of a CPU
/// profile (the only type whose changes are tested). Checked against the sides' merges
/// ([`SliceSpec::cuts_like`]): a side whose profiles do not fill its range is sliced again.
fn guessed_slices(
    specs: &[query::Spec; 2],
    measure: otelprof_store::select::Measure,
    lines: bool,
) -> Option<Vec<SliceSpec>> {
    specs
        .iter()
        .map(|spec| {
            let s = &spec.selector;
            let side = SliceSpec {
                ty: ProfileType::Cpu,
                measure,
                lines,
                selector: s.clone(),
                window: (s.from?, s.to?),
                slices: slices::SLICES,
            };
            let cpu = spec.ty.is_none_or(|t| t == ProfileType::Cpu);
            (cpu && side.whole_slots() && !side.whole_hours()).then_some(side)
        })
        .collect()
}

/// Runs `diff`; also returns the function the largest significant increase is in.
pub fn run(args: &DiffArgs) -> anyhow::Result<(ExitCode, Option<String>)> {
    if let Some(o) = &args.output {
        flame::format_of(o)?;
    }
    let DiffAnswer {
        base,
        head,
        ty,
        base_sel,
        head_sel,
        dispersion,
        groups,
        functions,
    } = answer(args)?;
    outln!(
        "base: {}",
        render_header(&base, base.total(), base.total_count())
    )?;
    outln!(
        "head: {}",
        render_header(&head, head.total(), head.total_count())
    )?;
    outln!()?;
    out!(
        "{}",
        render_group_section(&groups, &args.by, &base, args.limit)
    )?;
    out!("{}", render(&functions, args.limit))?;
    if let Some(line) = render_dispersion(&dispersion) {
        outln!("{line}")?;
    }
    outln!()?;
    outln!("{}", render_headline(&functions))?;

    if let Some(o) = &args.output {
        let tree = flame::Tree::diff(&base, &head, &format!("otelprof diff: {}", title(args)));
        let subtitle = format!(
            "base: {} | head: {}",
            super::describe(&base_sel, ty),
            super::describe(&head_sel, ty)
        );
        let path = flame::write(&tree, &subtitle, o)?;
        outln!("differential flame graph: {}", escape::path(&path))?;
    }
    let headline = functions.headline().map(|c| c.name.clone());
    if let Some(limit) = args.fail_above {
        if let Some(warning) = blind_spot_warning(&functions, limit) {
            errln!("otelprof: warning: {warning}");
        }
        let bad = functions.regressions(limit);
        if !bad.is_empty() {
            for r in bad.iter().take(5) {
                errln!("otelprof: regression: {}", render_regression(r, limit));
            }
            return Ok((ExitCode::from(EXIT_REGRESSION), headline));
        }
    }
    Ok((ExitCode::SUCCESS, headline))
}

/// The two sides' selectors (each side's terms and time range, and the shared flags) and
/// where each side is read: with neither selectors nor time ranges, two paths are base then
/// head, as `go tool pprof -diff_base` takes them.
fn sides(args: &DiffArgs, now: i64) -> anyhow::Result<(Selector, Selector, SidePaths)> {
    let shared = args.select.selector()?;
    let DiffRanges {
        base_from,
        base_to,
        head_from,
        head_to,
    } = &args.ranges;
    let side = |terms: &str,
                from: &Option<String>,
                to: &Option<String>,
                name: &str|
     -> anyhow::Result<Selector> {
        let mut s = Selector::default();
        s.add_terms(terms, now)
            .with_context(|| format!("--{name}"))?;
        if let Some(t) = from {
            s.from =
                Some(otelprof_store::parse_time(t, now).with_context(|| format!("--{name}-from"))?);
        }
        if let Some(t) = to {
            s.to =
                Some(otelprof_store::parse_time(t, now).with_context(|| format!("--{name}-to"))?);
        }
        if let (Some(f), Some(t)) = (s.from, s.to) {
            if f >= t {
                bail!("the {name} side's time range is empty: its start must be before its end");
            }
        }
        Ok(s)
    };
    let base = side(&args.base, base_from, base_to, "base")?;
    let head = side(&args.head, head_from, head_to, "head")?;
    let paths = match args.paths.as_slice() {
        [b, h] if base.is_empty() && head.is_empty() => SidePaths::Apart([b.clone(), h.clone()]),
        _ if base.is_empty() && head.is_empty() => bail!(
            "say what to compare: a selector or a time range for either side, e.g. --base \
             service.version=1.4 --head service.version=1.5, or --base-from now-25h --base-to \
             now-24h --head-from now-1h; or give two paths, base then head"
        ),
        all => SidePaths::Shared(all.to_vec()),
    };
    let (base, head) = (shared.and(&base), shared.and(&head));
    for (name, s) in [("base", &base), ("head", &head)] {
        if let (Some(f), Some(t)) = (s.from, s.to) {
            if f >= t {
                bail!("the {name} side's time range and --from/--to do not overlap");
            }
        }
    }
    Ok((base, head, paths))
}

/// A warning when the two sides can hold the same samples: the same conditions and
/// overlapping, different time ranges. Samples on both sides make the tests conservative
/// and the changes smaller than they are.
fn overlap_warning(base: &Selector, head: &Selector) -> Option<String> {
    let strip = |s: &Selector| Selector {
        from: None,
        to: None,
        ..s.clone()
    };
    if strip(base) != strip(head) || (base.from, base.to) == (head.from, head.to) {
        return None;
    }
    let (bf, bt) = (base.from.unwrap_or(i64::MIN), base.to.unwrap_or(i64::MAX));
    let (hf, ht) = (head.from.unwrap_or(i64::MIN), head.to.unwrap_or(i64::MAX));
    (bf < ht && hf < bt).then(|| {
        "the two sides' time ranges overlap and nothing else tells them apart: samples in \
         both ranges count on both sides, which hides part of any change"
            .to_owned()
    })
}

pub fn title(args: &DiffArgs) -> String {
    let side = |terms: &str, from: &Option<String>, to: &Option<String>| {
        let mut parts: Vec<String> = Vec::new();
        if !terms.is_empty() {
            parts.push(terms.to_owned());
        }
        if let Some(f) = from {
            parts.push(format!("from {f}"));
        }
        if let Some(t) = to {
            parts.push(format!("to {t}"));
        }
        if parts.is_empty() {
            "everything".to_owned()
        } else {
            parts.join(" ")
        }
    };
    let r = &args.ranges;
    format!(
        "{} → {}",
        side(&args.base, &r.base_from, &r.base_to),
        side(&args.head, &r.head_from, &r.head_to)
    )
}

pub fn pp(x: f64) -> String {
    format!("{:+.2}", x * 100.0)
}

pub fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// A test as a cell: z, starred when significant; `-` when not tested.
fn z_cell(test: Option<&Test>) -> String {
    let Some(t) = test else {
        return "-".into();
    };
    let z = if t.z.is_infinite() {
        if t.z > 0.0 {
            "+inf".to_owned()
        } else {
            "-inf".to_owned()
        }
    } else {
        format!("{:+.1}", t.z)
    };
    if t.significant {
        format!("{z} *")
    } else {
        format!("{z}  ")
    }
}

/// `pkg.Class.method` as `Class.method`, for call paths (the table above has the full names).
fn short(name: &str) -> &str {
    let mut dots = name.rmatch_indices('.').map(|(i, _)| i);
    match (dots.next(), dots.next()) {
        // Only for Java-like names: no spaces or slashes (native libraries, pseudo-frames).
        (Some(_), Some(i)) if !name.contains([' ', '/', '[']) => name.get(i + 1..).unwrap_or(name),
        _ => name,
    }
}

/// `leaf ← caller ← …` of a carrying path.
pub fn render_path(path: &[String]) -> String {
    let mut out = String::new();
    for (i, f) in path.iter().enumerate() {
        if i > PATH_CALLERS {
            out.push_str(" ← …");
            break;
        }
        if i > 0 {
            out.push_str(" ← ");
        }
        out.push_str(short(f));
    }
    out
}

/// What the stars mean, in one line.
fn legend(d: &FunctionDiff) -> String {
    match d.family {
        Some(f) => {
            let mut line = format!(
                "* = significant: Benjamini–Hochberg at a {} false discovery rate over {} tests \
                 (the self and total share of {} functions",
                percent_text(f.criteria.fdr),
                f.tests,
                f.functions
            );
            if f.left_out > 0 {
                let _ = write!(
                    line,
                    ", but for {} shares too rare to be significant however their samples split",
                    f.left_out
                );
            }
            line.push(')');
            line
        }
        None => "not tested: significance is computed for CPU profiles only (a sample of this \
                 type weighs what it stands for, and the merge does not keep how many samples \
                 are behind a value)"
            .to_owned(),
    }
}

fn percent_text(fraction: f64) -> String {
    let s = format!("{:.2}", fraction * 100.0);
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

/// The rankings: functions that grew, then those that shrank, `limit` of each (0 = all), with
/// the call paths that carry the top increases.
pub fn render(d: &FunctionDiff, limit: usize) -> String {
    let take = if limit == 0 { usize::MAX } else { limit };
    let header = [
        "base self",
        "head self",
        "Δself pp",
        "z self",
        "base total",
        "head total",
        "Δtotal pp",
        "z total",
        "function",
    ];
    let rows = |list: &[FunctionChange]| -> Vec<[String; 9]> {
        list.iter()
            .take(take)
            .map(|c| {
                [
                    pct(c.base_self),
                    pct(c.head_self),
                    pp(c.delta_self()),
                    z_cell(c.test(Measure::SelfShare)),
                    pct(c.base_total),
                    pct(c.head_total),
                    pp(c.delta_total()),
                    z_cell(c.test(Measure::TotalShare)),
                    c.name.clone(),
                ]
            })
            .collect()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Grew (shares of each side's own total; {}):",
        legend(d)
    );
    out.push_str(&render_columns(&header, &rows(&d.grew)));
    let carried: Vec<String> = d
        .grew
        .iter()
        .take(take.min(PATH_ROWS))
        .filter(|c| c.increase().is_some())
        .filter_map(|c| {
            let path = c.carrier.as_ref()?;
            Some(format!(
                "  {:>7} pp  {}",
                pp(path.delta),
                render_path(&path.path)
            ))
        })
        .collect();
    if !carried.is_empty() {
        let _ = writeln!(
            out,
            "\nWhere the top increases are carried (the function's call-tree node whose \
             inclusive share grew most, callers to the right):"
        );
        for line in carried {
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = writeln!(out, "\nShrank:");
    out.push_str(&render_columns(&header, &rows(&d.shrank)));
    out
}

/// The closing line: the largest significant increase, or what the samples could have shown.
pub fn render_headline(d: &FunctionDiff) -> String {
    if let Some(c) = d.headline() {
        let (measure, delta) = c.increase().unwrap_or((Measure::TotalShare, 0.0));
        let other = match measure {
            Measure::SelfShare => Measure::TotalShare,
            Measure::TotalShare => Measure::SelfShare,
        };
        let z = c.test(measure).map_or(0.0, |t| t.z);
        let mut line = format!(
            "Largest significant increase: {} ({} {} pp, z = {:.1}; {} {} pp)",
            c.name,
            measure.name(),
            pp(delta),
            z,
            other.name(),
            pp(c.delta(other))
        );
        if let Some(path) = &c.carrier {
            let _ = write!(line, "\n  via {}", render_path(&path.path));
        }
        return line;
    }
    let Some(f) = d.family else {
        return "No significance tested (CPU profiles only): the changes above are shares, \
                nothing more."
            .to_owned();
    };
    let mut line = format!(
        "No significant increase (at a {} false discovery rate over {} tests).",
        percent_text(f.criteria.fdr),
        f.tests
    );
    if let (Some(half), Some(tenth)) = (d.detectable(0.5), d.detectable(0.1)) {
        let _ = write!(
            line,
            " Smallest change these {:.0} and {:.0} samples would have caught 4 times in 5: \
             {} for a function at 50% of the total, {} at 10%.",
            d.base_samples,
            d.head_samples,
            detectable_text(half, 0.5),
            detectable_text(tenth, 0.1)
        );
    }
    line
}

/// A detectable change of a share `p` in words: its size in pp, or that no change a share at
/// `p` can make (up to all of the total or none of it) would be caught, rather than a size
/// larger than any share can change by.
fn detectable_text(change: f64, p: f64) -> String {
    if change > p.max(1.0 - p) {
        "none that a share can make (too few samples)".to_owned()
    } else {
        format!("{:.2} pp", change * 100.0)
    }
}

/// How noisy the sides were taken to be, under the tables: what the slices measured, what
/// was assumed, and how the two were combined (the z above are divided by √φ).
pub fn render_dispersion(d: &Dispersion) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if d.estimated() {
        parts.push(format!(
            "shares varied {:.2} times as much as their sample counts explain from one time \
             slice to the next ({} and {} slices per side)",
            d.between_slices, d.slices[0], d.slices[1]
        ));
    } else if d.slices != [0, 0] {
        parts.push(format!(
            "too few samples or time slices to measure it ({} and {} slices per side)",
            d.slices[0], d.slices[1]
        ));
    }
    if let Some(a) = d.assumed {
        let rate = a.rate.map_or_else(
            || "an unknown sampling rate".to_owned(),
            |r| format!("{r:.0} samples per CPU-second"),
        );
        parts.push(format!(
            "assumed: a CPU-second carries at most {:.0} independent observations, so φ₀ = \
             {:.2} at {rate}, worth {:.0} degrees of freedom",
            diff::dispersion::INFORMATION_RATE,
            a.factor,
            a.df
        ));
    }
    if let Some(w) = d.weights {
        parts.push(format!(
            "sample timestamps show each CPU signal counting {w:.2} times in variance (the \
             timer intervals it stood for), a floor"
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let df = if d.test_df().is_finite() {
        format!("{:.0}", d.test_df())
    } else {
        "infinite".to_owned()
    };
    let how = match (d.estimated(), d.assumed.is_some()) {
        (true, true) => format!(
            "the two combined ({:.0}% measured): ",
            d.measured_weight() * 100.0
        ),
        (false, true) => "the assumption alone: ".to_owned(),
        _ => String::new(),
    };
    let scaled = if d.factor > 1.0 {
        format!(
            "{how}every z is divided by √{:.2} and read as Student's t with {df} degrees of \
             freedom",
            d.factor
        )
    } else {
        format!("{how}z assume independent samples, read with {df} degrees of freedom")
    };
    Some(format!("\n(noise: {}; {scaled})", parts.join("; ")))
}

/// One failing function of `--fail-above`, for stderr.
pub fn render_regression(r: &Regression<'_>, limit: f64) -> String {
    let c = r.change;
    let (base, head) = match r.measure {
        Measure::SelfShare => (c.base_self, c.head_self),
        Measure::TotalShare => (c.base_total, c.head_total),
    };
    let mut line = format!(
        "{} grew from {:.2}% to {:.2}% of the total ({}, {} pp, more than {limit} pp by {:.1} \
         standard errors)",
        c.name,
        base * 100.0,
        head * 100.0,
        r.measure.name(),
        pp(r.delta),
        r.beyond.z
    );
    if let Some(path) = &c.carrier {
        let _ = write!(line, " via {}", render_path(&path.path));
    }
    line
}

/// A warning when the samples are too few for `--fail-above` to see a change of its size in
/// a function at half the total (where a share is noisiest).
fn blind_spot_warning(d: &FunctionDiff, limit: f64) -> Option<String> {
    let mde = d.detectable(0.5)?;
    (mde * 100.0 > limit).then(|| {
        let takes = match detectable_text(mde, 0.5) {
            pp if pp.ends_with(" pp") => format!("that takes {pp}"),
            _ => "no growth a share can make would be".to_owned(),
        };
        format!(
            "--fail-above {limit}: with {:.0} and {:.0} samples, a growth of {limit} pp in a \
             function at 50% of the total is found less than 4 times in 5 ({takes}); profile \
             longer, under more load, or at a shorter CPU interval with the perf engine \
             (`clock=perf`; the CPU timers of `clock=cpu` fire on the kernel's tick, 4 ms at \
             HZ=250, so a shorter interval adds counts but no information)",
            d.base_samples, d.head_samples
        )
    })
}

/// The per-group table (or why there is none) and its headline.
pub fn render_group_section(groups: &GroupDiff, key: &str, base: &Merged, limit: usize) -> String {
    let mut out = String::new();
    // Rows of threads that run no Java code (`[GC]`, …) carry no key either.
    let only_none = groups.rows.iter().all(|g| {
        g.name == otelprof_store::merge::NO_GROUP
            || otelprof_primitives::thread_role::is_role_frame(&g.name)
    });
    if only_none {
        let _ = writeln!(out, "(no sample carries {key}: no table by {key})\n");
        return out;
    }
    out.push_str(&render_groups(groups, key, &base.unit, limit));
    if !groups.per_request && key == "span_name" {
        out.push_str(
            "(per-request columns need request counts: OTLP metrics http.server.request.duration in the store)\n",
        );
    }
    if let Some(g) = groups.headline() {
        let _ = writeln!(
            out,
            "Largest significant increase by {key}: {}",
            render_group_change(g, &base.sample_type, &base.unit)
        );
    }
    out.push('\n');
    out
}

/// A group's change in words: `GET /cart (cpu per request +98.2%: 1.02ms → 2.02ms, z = 15.3)`.
pub fn render_group_change(g: &GroupChange, sample_type: &str, unit: &str) -> String {
    let z = g.test.map_or(0.0, |t| t.z);
    match (g.basis, g.base_per_request(), g.head_per_request()) {
        (Basis::PerRequest, Some(b), Some(h)) => format!(
            "{} ({sample_type} per request {:+.1}%: {} → {}, z = {z:.1})",
            g.name,
            g.per_request_change().unwrap_or(0.0) * 100.0,
            value(b, unit),
            value(h, unit)
        ),
        _ => format!(
            "{} (share {} pp: {} → {}, z = {z:.1})",
            g.name,
            pp(g.head_share - g.base_share),
            pct(g.base_share),
            pct(g.head_share)
        ),
    }
}

/// The table by `key`: shares, and per request when request counts exist; `limit` rows (0 =
/// all).
pub fn render_groups(groups: &GroupDiff, key: &str, unit: &str, limit: usize) -> String {
    let take = if limit == 0 { usize::MAX } else { limit };
    let rows = groups.rows.iter().take(take);
    if !groups.per_request {
        let cells: Vec<[String; 5]> = rows
            .map(|g| {
                [
                    pct(g.base_share),
                    pct(g.head_share),
                    pp(g.head_share - g.base_share),
                    z_cell(g.test.as_ref()),
                    g.name.clone(),
                ]
            })
            .collect();
        return render_columns(&["base share", "head share", "Δ pp", "z", key], &cells);
    }
    let cells: Vec<[String; 7]> = rows
        .map(|g| {
            let change = g
                .per_request_change()
                .map_or("-".into(), |c| format!("{:+.1}%", c * 100.0));
            [
                pct(g.base_share),
                pct(g.head_share),
                pp(g.head_share - g.base_share),
                g.base_per_request().map_or("-".into(), |v| value(v, unit)),
                g.head_per_request().map_or("-".into(), |v| value(v, unit)),
                z_cell(g.test.as_ref()),
                format!("{change:>9}  {}", g.name),
            ]
        })
        .collect();
    let mut out = render_columns(
        &[
            "base share",
            "head share",
            "Δ pp",
            "base/request",
            "head/request",
            "z",
            "Δ/request  endpoint",
        ],
        &cells,
    );
    let _ = writeln!(
        out,
        "(z: of the value per request where both sides have request counts, else of the share)"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use otelprof_store::merge::MergedStack;
    use otelprof_store::select::ProfileType;

    fn side(stacks: &[(&[u32], f64)]) -> Merged {
        Merged {
            sample_type: "cpu".into(),
            unit: "nanoseconds".into(),
            frames: vec![
                "a.Main.run".into(),
                "a.Web.handle".into(),
                "a.Web.renderHtml".into(),
                "a.Text.escape".into(),
                "a.Search.score".into(),
            ],
            groups: vec![String::new()],
            stacks: stacks
                .iter()
                .map(|(f, n)| MergedStack {
                    group: 0,
                    frames: f.to_vec(),
                    value: *n * 1e7,
                    count: *n,
                })
                .collect(),
            ..Merged::default()
        }
    }

    #[test]
    fn the_regression_is_ranked_starred_and_carried() {
        let base = side(&[(&[0, 1, 2, 3], 1000.0), (&[0, 1, 4], 3000.0)]);
        let head = side(&[(&[0, 1, 2, 3], 3000.0), (&[0, 1, 4], 3000.0)]);
        let d = diff::compare(&base, &head, ProfileType::Cpu, Criteria::new(0.01));
        let text = render(&d, 5);
        let grew = text.split("Shrank:").next().unwrap();
        // renderHtml and escape hold the same samples: one leads, both carry the path.
        assert!(grew.contains("+25.00"), "{text}");
        assert!(grew.contains(" *  "), "{text}");
        assert!(
            text.contains("Web.renderHtml ← Web.handle ← Main.run"),
            "{text}"
        );
        // Five shares, of which Main.run's and Web.handle's are all of both sides: no split
        // of their samples can change them, so they are left out of the family.
        assert!(
            text.contains(
                "over 3 tests (the self and total share of 5 functions, but for 2 shares too rare"
            ),
            "{text}"
        );
        let line = render_headline(&d);
        assert!(
            line.starts_with("Largest significant increase: a.Text.escape (self +25.00 pp"),
            "{line}"
        );
        assert!(line.contains("via Text.escape ← Web.renderHtml"), "{line}");
        let failing = render_regression(&d.regressions(20.0)[0], 20.0);
        assert!(
            failing.contains(
                "grew from 25.00% to 50.00% of the total (self, +25.00 pp, more than 20 pp by"
            ),
            "{failing}"
        );
    }

    #[test]
    fn no_change_says_what_could_have_been_seen() {
        let base = side(&[(&[0, 1, 2, 3], 1000.0), (&[0, 1, 4], 1000.0)]);
        let head = side(&[(&[0, 1, 2, 3], 1010.0), (&[0, 1, 4], 990.0)]);
        let d = diff::compare(&base, &head, ProfileType::Cpu, Criteria::new(0.01));
        let line = render_headline(&d);
        assert!(line.starts_with("No significant increase (at a 1% false discovery rate over 3 tests). Smallest change these 2000 and 2000 samples would have caught 4 times in 5: "), "{line}");
        // The roots, all of both sides, are not tested: 3 tests.
        // (z of p = 0.01 / 3, two-sided, + z of 80% power) × sqrt(0.25 × 2 / 2000)
        // = (2.94 + 0.84) × 0.0158 = 5.97 pp.
        assert!(line.contains(": 5.97 pp for a function at 50%"), "{line}");
        assert!(blind_spot_warning(&d, 5.0).is_some());
        assert!(blind_spot_warning(&d, 10.0).is_none());
    }

    #[test]
    fn the_noise_line_says_where_its_factor_comes_from() {
        let assumed = diff::dispersion::Assumption {
            factor: 2.5,
            df: 14.0,
            rate: Some(100.0),
        };
        let d = Dispersion {
            factor: 4.0,
            between_slices: 2.5,
            df: 40.0,
            slices: [10, 8],
            weights: Some(4.0),
            assumed: Some(assumed),
        };
        let line = render_dispersion(&d).unwrap();
        assert!(line.contains("varied 2.50 times"), "{line}");
        assert!(
            line.contains("φ₀ = 2.50 at 100 samples per CPU-second"),
            "{line}"
        );
        assert!(line.contains("counting 4.00 times in variance"), "{line}");
        assert!(line.contains("combined (53% measured)"), "{line}");
        assert!(line.contains("divided by √4.00"), "{line}");
        assert!(line.contains("t with 30 degrees of freedom"), "{line}");
        // One slice a side: the assumption alone says how noisy.
        let alone = Dispersion {
            factor: 2.5,
            slices: [1, 1],
            assumed: Some(assumed),
            ..Dispersion::binomial()
        };
        let line = render_dispersion(&alone).unwrap();
        assert!(
            line.contains("too few samples or time slices to measure it (1 and 1"),
            "{line}"
        );
        assert!(
            line.contains("the assumption alone: every z is divided by √2.50"),
            "{line}"
        );
        assert!(line.contains("t with 14 degrees of freedom"), "{line}");
        assert!(render_dispersion(&Dispersion::binomial()).is_none());
    }

    #[test]
    fn paths_are_short_and_bounded() {
        assert_eq!(short("org.apache.Foo$Bar.run"), "Foo$Bar.run");
        assert_eq!(short("main"), "main");
        assert_eq!(short("Foo.run"), "Foo.run");
        assert_eq!(short("libc.so.6 [native]"), "libc.so.6 [native]");
        let long: Vec<String> = (0..20).map(|i| format!("p.C.m{i}")).collect();
        let text = render_path(&long);
        assert!(
            text.starts_with("C.m0 ← C.m1") && text.ends_with("C.m4 ← …"),
            "{text}"
        );
    }

    #[test]
    fn sides_take_terms_and_time_ranges() {
        use clap::Parser as _;
        let with_paths = |extra: &[&str], paths: &[&str]| {
            let mut argv = vec!["otelprof", "diff"];
            argv.extend_from_slice(extra);
            argv.extend_from_slice(paths);
            let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
            let crate::cli::Cmd::Diff(args) = cli.command else {
                unreachable!()
            };
            sides(&args, 100_000_000_000_000)
        };
        let parse = |extra: &[&str]| {
            with_paths(extra, &["store"]).map(|(b, h, paths)| {
                assert_eq!(paths, SidePaths::Shared(vec!["store".into()]));
                (b, h)
            })
        };
        let (b, h) = parse(&[
            "--base-from",
            "now-25h",
            "--base-to",
            "now-24h",
            "--head-from",
            "now-1h",
        ])
        .unwrap();
        let hour = 3_600_000_000_000;
        assert_eq!(
            (b.from, b.to),
            (
                Some(100_000_000_000_000 - 25 * hour),
                Some(100_000_000_000_000 - 24 * hour)
            )
        );
        assert_eq!((h.from, h.to), (Some(100_000_000_000_000 - hour), None));
        assert!(overlap_warning(&b, &h).is_none());
        let (b, h) = parse(&[
            "--base",
            "service.version=1",
            "--head",
            "service.version=2",
            "--from",
            "now-1h",
        ])
        .unwrap();
        assert_eq!(b.conditions.len(), 1);
        assert_eq!(b.from, h.from);
        assert!(parse(&[]).is_err(), "nothing to compare");
        assert!(parse(&["--base-from", "now-1h", "--base-to", "now-2h"]).is_err());
        assert!(parse(&["--head-from", "yesterday"]).is_err());
        let (b, h) = parse(&["--base-from", "now-2h", "--head-from", "now-1h"]).unwrap();
        assert!(overlap_warning(&b, &h).is_some(), "the base runs on to now");
        // Two paths and nothing else: base then head, everything of each.
        let (b, h, paths) = with_paths(&[], &["v1.pb.gz", "v2"]).unwrap();
        assert_eq!(paths, SidePaths::Apart(["v1.pb.gz".into(), "v2".into()]));
        assert!(b.is_empty() && h.is_empty());
        // Two paths with selectors: both sides from both paths, as before.
        let (_, _, paths) = with_paths(&["--base", "a=1", "--head", "a=2"], &["x", "y"]).unwrap();
        assert!(matches!(paths, SidePaths::Shared(p) if p.len() == 2));
        // Three paths and nothing that tells the sides apart: an error that says what to do.
        let err = with_paths(&[], &["x", "y", "z"]).unwrap_err().to_string();
        assert!(err.contains("give two paths, base then head"), "{err}");
    }
}
