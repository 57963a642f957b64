//! `otelprof`: run a JVM with the profiler (or attach it to a running one), receive OTLP
//! profiles, and answer questions from them: where the CPU goes (`top`, `flame`), where one
//! slow span spent its time (`drilldown`), what changed between two releases (`diff`).
//! `demo` shows all of it.
//!
//! [`cli`] declares the commands and their flags, [`commands`] runs them (one module each),
//! [`flame`] and [`table`] draw the answers, [`ui`] is `serve`'s web UI over the same answers
//! (handed to `serve` from here: the UI reads the commands' answers, so no command names it),
//! [`opamp`] the OpAMP server's HTTP side. The OTLP receiver ([`otelprof_receiver`]) and
//! HotSpot's attach protocol ([`otelprof_attach`]) are crates of their own. Everything printed
//! goes through [`output`] (a closed pipe stops the command quietly) and text from outside
//! through [`escape`] ([`otelprof_primitives::escape`]: no terminal escape injection).

/// The store's readers allocate and free a row group's columns per task and an hour's
/// traces per hour: mimalloc keeps that memory for the next one where glibc's malloc gives it
/// back to the kernel and faults it in again (BENCHMARKS.md, the store at fleet scale).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// First: the other modules use its macros.
#[macro_use]
mod output;

mod cli;
mod commands;
mod flame;
mod opamp;
mod signals;
mod table;
mod ui;

use std::process::ExitCode;

use clap::Parser as _;
use otelprof_primitives::escape;

use cli::{Cli, Cmd};
use otelprof_store::query::butterfly::Direction;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(size) = cli.cache_size {
        commands::stores::set_cache_size(size);
    }
    if let Some(dir) = &cli.cache {
        commands::stores::set_cache(dir);
    }
    let result = match &cli.command {
        Cmd::Run(args) => commands::run::run(args).map(ExitCode::from),
        Cmd::Receive(args) => commands::receive::run(args).map(|()| ExitCode::SUCCESS),
        Cmd::Serve(args) => commands::serve::run(args, ui::over_store).map(|()| ExitCode::SUCCESS),
        Cmd::Compact(args) => commands::compact::run(args).map(|()| ExitCode::SUCCESS),
        Cmd::Top(args) => commands::top::run(args),
        Cmd::Flame(args) => commands::flame::run(args),
        Cmd::Callers(args) => commands::butterfly::run(args, Direction::Callers),
        Cmd::Callees(args) => commands::butterfly::run(args, Direction::Callees),
        Cmd::Traces(args) => commands::traces::run(args),
        Cmd::Drilldown(args) => commands::drilldown::run(args),
        Cmd::Leaks(args) => commands::leaks::run(args),
        Cmd::Findings(args) => commands::findings::run(args),
        Cmd::Diff(args) => commands::diff::run(args).map(|(code, _)| code),
        Cmd::Demo(args) => commands::demo::command(args),
        Cmd::Attach(args) => commands::attach::run(args),
        Cmd::Capture(args) => commands::capture::run(args).map(ExitCode::from),
        Cmd::Profile(args) => commands::profile::run(args),
    };
    match result.and_then(|code| output::flush_stdout().map(|()| code)) {
        Ok(code) => code,
        Err(e) if output::is_stdout_closed(&e) => ExitCode::from(output::EXIT_STDOUT_CLOSED),
        Err(e) => {
            errln!("otelprof: {}", escape::message(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}
