//! `otelprof attach PID VERB`: runs a verb in a JVM ([`otelprof_attach`]) and prints what the
//! agent or the JVM answered, escaped. Exit status: 0 when the answer is `ok`, 1 when it is
//! `error:` (the failures to attach are errors, printed by `main`, also 1).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cli::{AttachArgs, AttachVerb};
use crate::commands::run::{AGENT_FILE, JAR};
use otelprof_attach::{self as attach, AgentFiles, Verb};
use otelprof_primitives::escape;

pub fn run(args: &AttachArgs) -> anyhow::Result<ExitCode> {
    let verb = match &args.verb {
        AttachVerb::Start { options } => Verb::Start(options.clone()),
        AttachVerb::Stop => Verb::Stop,
        AttachVerb::Status => Verb::Status,
        AttachVerb::Dump { output } => Verb::Dump(output.clone()),
        AttachVerb::Jcmd { command } => Verb::Jcmd(command.join(" ")),
    };
    // A diagnostic command needs no agent.
    let agent = match verb {
        Verb::Jcmd(_) => None,
        _ => Some(agent_files()?),
    };
    let outcome = attach::run(args.pid, &verb, agent.as_ref(), args.timeout)?;
    for line in &outcome.lines {
        outln!("{}", escape::escape(line))?;
    }
    for note in &outcome.notes {
        errln!("otelprof: {}", escape::escape(note));
    }
    Ok(if outcome.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `libotelprof.so` and `otelprof.jar` beside this executable (resolved: the JVM gets the
/// same path whichever link `otelprof` was started through).
fn agent_files() -> anyhow::Result<AgentFiles> {
    let exe = std::env::current_exe().context("cannot find this executable's path")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let library = dir.join(AGENT_FILE);
    let library = std::fs::canonicalize(&library).with_context(|| {
        format!(
            "no agent library {} beside otelprof (build it with `cargo build --release`)",
            escape::path(&library)
        )
    })?;
    let jar = std::fs::canonicalize(dir.join(JAR)).ok();
    Ok(AgentFiles { library, jar })
}
