//! `otelprof`: run a JVM with the profiler loaded, and read the profiles it writes.

mod load;
mod run;
mod signals;
mod top;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "otelprof",
    version,
    about = "Continuous profiler for JVM services"
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
    /// Print the hottest functions (or threads) of pprof files
    Top(TopArgs),
}

#[derive(Debug, clap::Args)]
struct TopArgs {
    /// Sample type to rank by, e.g. cpu, samples, alloc_space [default: the profiles' last type]
    #[arg(long, value_name = "NAME")]
    sample_index: Option<String>,
    /// Rows to print, 0 for all
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// Total per thread (`thread_name` label) instead of per function
    #[arg(long)]
    by_thread: bool,
    /// pprof files (.pb.gz, .pb), or directories of *.pb.gz files
    #[arg(required = true, value_name = "PATHS")]
    paths: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::Run(args) => run::run(args).map(ExitCode::from),
        Cmd::Top(args) => top_command(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("otelprof: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn top_command(args: &TopArgs) -> anyhow::Result<ExitCode> {
    let loaded = load::load(&args.paths);
    for (path, err) in &loaded.failures {
        eprintln!("otelprof: {}: {err:#}", path.display());
    }
    let profiles: Vec<_> = loaded.profiles.iter().map(|(_, p)| p).collect();
    if profiles.is_empty() {
        anyhow::bail!("no profile could be read");
    }
    let pool = top::pool(&profiles, args.sample_index.as_deref())?;
    if args.by_thread {
        let table = top::by_thread(&pool);
        println!("{}", top::render_header(&pool, table.total, table.samples));
        print!("{}", top::render_threads(&table, &pool.unit, args.limit));
    } else {
        let table = top::top_functions(&pool);
        println!("{}", top::render_header(&pool, table.total, table.samples));
        print!("{}", top::render_top(&table, &pool.unit, args.limit));
    }
    Ok(if loaded.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
}
