//! `otelprof`: run a JVM with the profiler, receive OTLP profiles, and answer questions from
//! them: where the CPU goes (`top`, `flame`), where one slow span spent its time
//! (`drilldown`), what changed between two releases (`diff`). `demo` shows all of it.

mod demo;
mod diff;
mod drilldown;
mod flame;
mod query;
mod receive;
mod requests;
mod run;
mod signals;
mod source;
mod store;
mod table;
mod top;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use otelprof_profile::select::{ProfileType, Selector};

use query::{SelectArgs, Spec};

/// Exit code of `diff --fail-above` when a regression exceeds the threshold.
pub const EXIT_REGRESSION: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "otelprof",
    version,
    about = "Continuous profiler for JVM services",
    after_help = "Reading commands take `otelprof receive` store directories, agent output directories, \
                  OTLP files (*.otlp.pb[.gz]) or pprof files (*.pb.gz), and merge everything selected, \
                  from any number of JVMs."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a command with the otelprof agent loaded, e.g. `otelprof run -- java -jar app.jar`
    #[command(override_usage = "otelprof run [OPTIONS] -- <COMMAND>...")]
    Run(run::RunArgs),
    /// Receive OTLP profiles (gRPC and HTTP) and store them in a directory
    Receive(receive::ReceiveArgs),
    /// The hottest functions, by self and total, or the total per endpoint/version/thread
    Top(TopArgs),
    /// Draw a flame graph: interactive HTML (zoom, search, tooltips; works offline) or SVG
    Flame(FlameArgs),
    /// Where one trace or span spent its time: its samples, endpoint and time window
    Drilldown(DrilldownArgs),
    /// Compare two selections (e.g. two releases): what grew, what shrank, and is it significant
    Diff(DiffArgs),
    /// Profile an example service as version 1 and 2 and show what otelprof answers
    Demo(demo::DemoArgs),
}

#[derive(Debug, clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Break the total down by this resource or sample attribute, e.g. span_name (the
    /// endpoint), service.version, thread.name
    #[arg(long, value_name = "KEY")]
    pub by: Option<String>,
    /// Same as --by thread.name
    #[arg(long, hide = true, conflicts_with = "by")]
    pub by_thread: bool,
    /// Rows to print, 0 for all
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct FlameArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Output file: *.html (interactive) or *.svg
    #[arg(long, short, value_name = "FILE")]
    pub output: PathBuf,
    /// Title of the graph
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DrilldownArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// With --span-id: also the spans that have it as their local root
    #[arg(long)]
    pub children: bool,
    /// The endpoint (span_name) to profile, alone or as the fallback when the span got no
    /// samples
    #[arg(long, value_name = "NAME")]
    pub endpoint: Option<String>,
    /// Rows of the function table, 0 for all
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub limit: usize,
    /// Also write a flame graph of the samples: *.html or *.svg
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The baseline: comma-separated KEY=VALUE (KEY!=VALUE) terms, and from=TIME, to=TIME,
    /// e.g. service.version=1.4
    #[arg(long, value_name = "SELECTOR", allow_hyphen_values = true)]
    pub base: String,
    /// The selection compared to the baseline, e.g. service.version=1.5
    #[arg(long, value_name = "SELECTOR", allow_hyphen_values = true)]
    pub head: String,
    /// Applies to both sides
    #[command(flatten)]
    pub select: SelectArgs,
    /// Key of the per-endpoint table
    #[arg(long, value_name = "KEY", default_value = "span_name")]
    pub by: String,
    /// Rows per ranking, 0 for all
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub limit: usize,
    /// Write a differential flame graph: *.html or *.svg
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit with code 3 when a function's share of the total (inclusive) grew by more than
    /// PCT percentage points, significantly
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::Run(args) => run::run(args).map(ExitCode::from),
        Cmd::Receive(args) => receive::command(args).map(|()| ExitCode::SUCCESS),
        Cmd::Top(args) => top_command(args),
        Cmd::Flame(args) => write_flame(args),
        Cmd::Drilldown(args) => drilldown_command(args),
        Cmd::Diff(args) => diff_report(args).map(|(code, _)| code),
        Cmd::Demo(args) => demo::command(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("otelprof: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub fn top_command(args: &TopArgs) -> anyhow::Result<ExitCode> {
    let selector = args.select.selector()?;
    let source = query::Source::open(&args.paths)?;
    let by = if args.by_thread {
        Some("thread.name")
    } else {
        args.by.as_deref()
    };
    let (merged, ty) = query::merge(&source, Spec::new(args.select.ty, &selector).by(by))?;
    if merged.stacks.is_empty() {
        bail!("{}", query::explain_empty(&source, &merged, ty, &selector));
    }
    let (total, count) = (merged.total(), merged.total_count());
    println!("{}", top::render_header(&merged, total, count));
    match by {
        Some(key) => {
            let mut rows = top::by_group(&merged);
            if key == "span_name" {
                let counts = requests::endpoint_requests(&args.paths, &selector, &selector);
                for r in &mut rows {
                    r.requests = counts.get(false, &r.name);
                }
            }
            print!(
                "{}",
                top::render_groups(&rows, key, &merged.unit, total, args.limit)
            );
        }
        None => {
            let table = top::top_functions(&merged, None);
            print!("{}", top::render_top(&table, &merged.unit, args.limit));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(selector: &Selector, ty: ProfileType) -> String {
    let mut parts = vec![ty.name().to_owned()];
    for c in &selector.conditions {
        let op = match c.op {
            otelprof_profile::select::Op::Eq => "=",
            otelprof_profile::select::Op::Ne => "!=",
        };
        parts.push(format!("{}{op}{}", c.key, c.value));
    }
    if let Some(t) = selector.trace_id {
        parts.push(format!("trace {}", otelprof_profile::model::hex(&t)));
    }
    for s in &selector.span_ids {
        parts.push(format!("span {}", otelprof_profile::model::hex(s)));
    }
    if let Some(f) = selector.from {
        parts.push(format!("from {}", otelprof_profile::select::format_time(f)));
    }
    if let Some(t) = selector.to {
        parts.push(format!("to {}", otelprof_profile::select::format_time(t)));
    }
    parts.join(", ")
}

pub fn write_flame(args: &FlameArgs) -> anyhow::Result<ExitCode> {
    flame::format_of(&args.output)?;
    let selector = args.select.selector()?;
    let source = query::Source::open(&args.paths)?;
    let (merged, ty) = query::merge(&source, Spec::new(args.select.ty, &selector))?;
    if merged.stacks.is_empty() {
        bail!("{}", query::explain_empty(&source, &merged, ty, &selector));
    }
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| format!("otelprof: {}", describe(&selector, ty)));
    let subtitle = top::render_header(&merged, merged.total(), merged.total_count());
    let tree = flame::Tree::of(&merged, &title);
    let path = flame::write(&tree, &subtitle, &args.output)?;
    println!("wrote {}", path.display());
    Ok(ExitCode::SUCCESS)
}

pub fn drilldown_command(args: &DrilldownArgs) -> anyhow::Result<ExitCode> {
    if let Some(o) = &args.output {
        flame::format_of(o)?;
    }
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
            .push(otelprof_profile::select::Condition::parse(&format!(
                "span_name={e}"
            ))?);
    }
    let source = query::Source::open(&args.paths)?;
    let target = drilldown::Target {
        selector: selector.clone(),
        children: args.children,
    };
    let (mut d, ty) = drilldown::drill(&source, args.select.ty, &target)?;
    if d.merged.stacks.is_empty() && d.fallback.is_none() {
        if let Some(e) = &args.endpoint {
            let mut by_endpoint = Selector::default();
            by_endpoint
                .conditions
                .push(otelprof_profile::select::Condition::parse(&format!(
                    "span_name={e}"
                ))?);
            let (m, _) = query::merge(&source, Spec::new(Some(ty), &by_endpoint))?;
            if !m.stacks.is_empty() {
                d.notes.push(format!(
                    "instead, the profile of the endpoint {e:?} follows"
                ));
                d.fallback = Some((e.clone(), m));
            }
        }
    }
    print!("{}", drilldown::render_summary(&d, selector.trace_id));
    for n in &d.notes {
        println!("note: {n}");
    }
    let (shown, title) = match (&d.fallback, d.merged.stacks.is_empty()) {
        (_, false) => (
            &d.merged,
            format!("otelprof drilldown: {}", describe(&selector, ty)),
        ),
        (Some((endpoint, m)), true) => (m, format!("otelprof: endpoint {endpoint} (fallback)")),
        (None, true) => {
            bail!("nothing to show for {}", describe(&selector, ty));
        }
    };
    if !d.merged.stacks.is_empty() && !endpoint_only {
        println!();
        print!("{}", drilldown::render_spans(&d, &d.merged.unit));
    }
    println!();
    if d.merged.stacks.is_empty() {
        println!(
            "{}",
            top::render_header(shown, shown.total(), shown.total_count())
        );
    }
    let table = top::top_functions(shown, None);
    print!("{}", top::render_top(&table, &shown.unit, args.limit));
    if let Some(o) = &args.output {
        let subtitle = top::render_header(shown, shown.total(), shown.total_count());
        let path = flame::write(&flame::Tree::of(shown, &title), &subtitle, o)?;
        println!("\nflame graph: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `diff`; also returns the function the largest significant increase is in.
pub fn diff_report(args: &DiffArgs) -> anyhow::Result<(ExitCode, Option<String>)> {
    if let Some(o) = &args.output {
        flame::format_of(o)?;
    }
    if let Some(p) = args.fail_above {
        if !(0.0..=100.0).contains(&p) {
            bail!("--fail-above takes percentage points between 0 and 100, got {p}");
        }
    }
    let shared = args.select.selector()?;
    let now = query::now_unix_nanos();
    let mut base_sel = Selector::default();
    base_sel.add_terms(&args.base, now).context("--base")?;
    let mut head_sel = Selector::default();
    head_sel.add_terms(&args.head, now).context("--head")?;
    if base_sel.is_empty() || head_sel.is_empty() {
        bail!("--base and --head each need a selector, e.g. --base service.version=1.4 --head service.version=1.5");
    }
    let (base_sel, head_sel) = (shared.and(&base_sel), shared.and(&head_sel));
    let source = query::Source::open(&args.paths)?;
    let by = Some(args.by.as_str());
    let mut sides = query::merge_many(
        &source,
        &[
            Spec::new(args.select.ty, &base_sel).by(by),
            Spec::new(args.select.ty, &head_sel).by(by),
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
    println!(
        "base: {}",
        top::render_header(&base, base.total(), base.total_count())
    );
    println!(
        "head: {}",
        top::render_header(&head, head.total(), head.total_count())
    );
    println!();
    let counts = requests::endpoint_requests(&args.paths, &base_sel, &head_sel);
    let groups = diff::group_changes(&base, &head, &|is_head, name| counts.get(is_head, name));
    print!("{}", diff::render_groups(&groups, &args.by, &head.unit));
    if counts.is_empty() {
        println!("(per-request columns need request counts: OTLP metrics http.server.request.duration in the store)");
    }
    println!();
    let changes = diff::changes(&base, &head);
    print!("{}", diff::render(&changes, args.limit));
    println!();
    let headline = diff::headline(&changes).map(|c| c.name.clone());
    match diff::headline(&changes) {
        Some(c) => println!(
            "Largest significant increase: {} (self {:+.2} pp, total {:+.2} pp, z = {:.1})",
            c.name,
            c.delta_self() * 100.0,
            c.delta_total() * 100.0,
            if c.z_self >= diff::SIGNIFICANT_Z {
                c.z_self
            } else {
                c.z_total
            }
        ),
        None => println!("No significant increase (|z| < {}).", diff::SIGNIFICANT_Z),
    }
    if let Some(o) = &args.output {
        let tree = flame::Tree::diff(
            &base,
            &head,
            &format!("otelprof diff: {} → {}", args.base, args.head),
        );
        let subtitle = format!(
            "base: {} | head: {}",
            describe(&base_sel, ty),
            describe(&head_sel, ty)
        );
        let path = flame::write(&tree, &subtitle, o)?;
        println!("differential flame graph: {}", path.display());
    }
    if let Some(limit) = args.fail_above {
        let bad = diff::regressions(&changes, limit);
        if !bad.is_empty() {
            for c in bad.iter().take(5) {
                eprintln!(
                    "otelprof: regression: {} grew from {:.2}% to {:.2}% of the total ({:+.2} pp > {limit} pp, z = {:.1})",
                    c.name,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    #[allow(clippy::unwrap_used, clippy::panic)]
    fn run_takes_everything_after_the_command_verbatim() {
        let cli = Cli::try_parse_from([
            "otelprof", "run", "--cpu", "10ms", "--", "java", "-Xmx1g", "--out", "x",
        ])
        .unwrap();
        let Cmd::Run(args) = cli.command else {
            panic!("expected run")
        };
        assert_eq!(args.cpu, Some(std::time::Duration::from_millis(10)));
        assert_eq!(args.out, None);
        assert_eq!(args.command, ["java", "-Xmx1g", "--out", "x"]);

        let cli = Cli::try_parse_from(["otelprof", "run", "java", "-jar", "a.jar"]).unwrap();
        let Cmd::Run(args) = cli.command else {
            panic!("expected run")
        };
        assert_eq!(args.command, ["java", "-jar", "a.jar"]);
        assert!(Cli::try_parse_from(["otelprof", "run", "--cpu", "10", "--", "java"]).is_err());
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn reading_commands_parse_selectors() {
        let cli = Cli::try_parse_from([
            "otelprof",
            "top",
            "--where",
            "service.version=1.5",
            "--from",
            "now-1h",
            "--type",
            "cpu",
            "--by",
            "span_name",
            "store",
        ])
        .unwrap();
        let Cmd::Top(args) = cli.command else {
            unreachable!()
        };
        let s = args.select.selector().unwrap();
        assert_eq!(s.conditions.len(), 1);
        assert!(s.from.is_some());
        assert!(Cli::try_parse_from(["otelprof", "top", "--type", "heap", "x"]).is_err());
        let cli = Cli::try_parse_from(["otelprof", "top", "--trace-id", "xyz", "x"]).unwrap();
        let Cmd::Top(args) = cli.command else {
            unreachable!()
        };
        assert!(args.select.selector().is_err());
    }
}
