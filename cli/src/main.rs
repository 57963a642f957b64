//! `otelprof`: run a JVM with the profiler, receive OTLP profiles, and answer questions from
//! them: where the CPU goes (`top`, `flame`), where one slow span spent its time
//! (`drilldown`), what changed between two releases (`diff`). `demo` shows all of it.
//!
//! [`cli`] declares the commands and their flags, [`commands`] runs them (one module each),
//! [`receive`] is the OTLP receiver, [`flame`] and [`table`] draw the answers.

mod cli;
mod commands;
mod demo;
mod flame;
mod receive;
mod run;
mod signals;
mod table;

use std::process::ExitCode;

use clap::Parser as _;

use cli::{Cli, Cmd};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Cmd::Run(args) => run::run(args).map(ExitCode::from),
        Cmd::Receive(args) => receive::command(args).map(|()| ExitCode::SUCCESS),
        Cmd::Top(args) => commands::top::run(args),
        Cmd::Flame(args) => commands::flame::run(args),
        Cmd::Drilldown(args) => commands::drilldown::run(args),
        Cmd::Diff(args) => commands::diff::run(args).map(|(code, _)| code),
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
