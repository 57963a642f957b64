//! `otelprof profile PID`: one profile of a running JVM in one file, the way async-profiler's
//! `asprof -d 30 -f out.html PID` gives one: attach and start a session of one profile type
//! (loading the agent if it is not loaded yet), wait for the duration (Ctrl-C or SIGTERM ends
//! the wait early), take the profile with the agent's `dump`, stop the session, and write the
//! file in the format its name asks for. It prints the samples and the file's size, so one
//! knows whether enough was collected.
//!
//! The session writes no files of its own (`out=none`) and exports nothing, whatever the JVM's
//! environment says: the profile goes only where `-o` says. A JVM that already runs an
//! otelprof session is left alone: ending someone else's session would be a surprise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::cli::ProfileArgs;
use crate::flame;
use crate::signals;
use otelprof_attach::{self as attach, AgentFiles, Outcome, Verb};
use otelprof_primitives::escape;
use otelprof_store::query;
use otelprof_store::select::Selector;

/// What the file's name asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Html,
    Svg,
    Pprof,
    Collapsed,
    Otlp,
}

impl Output {
    fn of(path: &Path) -> anyhow::Result<Output> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let format = [
            (".html", Output::Html),
            (".htm", Output::Html),
            (".svg", Output::Svg),
            (".pb.gz", Output::Pprof),
            (".collapsed", Output::Collapsed),
            (".folded", Output::Collapsed),
            (".otlp.pb", Output::Otlp),
        ]
        .into_iter()
        .find(|(ext, _)| name.ends_with(ext));
        match format {
            Some((_, f)) => Ok(f),
            None => bail!(
                "{}: name the output *.html (interactive flame graph), *.svg, *.pb.gz (pprof), \
                 *.collapsed (one stack per line) or *.otlp.pb (OTLP)",
                escape::path(path)
            ),
        }
    }
}

pub fn run(args: &ProfileArgs) -> anyhow::Result<ExitCode> {
    // Everything that can be checked here is, before the JVM is touched.
    let output = Output::of(&args.output)?;
    let options = session_options(args)?;
    let dir = match args.output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!("{}: no such directory", escape::path(&dir));
    }
    let agent = super::attach::agent_files()?;
    refuse_a_running_session(args, &agent)?;

    let started = Instant::now();
    let reply = verb(args, &Verb::Start(options.clone()), &agent)?;
    if !reply.ok {
        bail!("the agent did not start: {}", reply_text(&reply));
    }
    errln!(
        "otelprof: profiling {} in JVM {} for {} ({options}); Ctrl-C ends it early",
        args.ty,
        args.pid,
        otelprof_primitives::units::format_duration(args.duration),
    );
    let early = wait(args.duration)?;
    let elapsed = started.elapsed();
    // The dump goes to a name of our own beside the output, then becomes the output.
    let taken = dir.join(format!(
        ".otelprof-profile-{}-{}.pb.gz",
        args.pid,
        std::process::id()
    ));
    let dumped = verb(args, &Verb::Dump(Some(taken.clone())), &agent);
    // Stop whatever the dump did: the session must not outlive this command.
    let stopped = verb(args, &Verb::Stop, &agent);
    let dumped = dumped?;
    if !dumped.ok || !taken.is_file() {
        let _ = std::fs::remove_file(&taken);
        bail!("the agent gave no profile: {}", reply_text(&dumped));
    }
    match stopped {
        Ok(s) if s.ok => {}
        Ok(s) => errln!(
            "otelprof: warning: the session did not stop: {}",
            reply_text(&s)
        ),
        Err(e) => errln!("otelprof: warning: the session did not stop: {e:#}"),
    }
    let written = write(&taken, output, args);
    let _ = std::fs::remove_file(&taken);
    let (samples, amount) = written?;
    let size = std::fs::metadata(&args.output)
        .map(|m| m.len())
        .unwrap_or(0);
    outln!(
        "{amount} in {:.1} s{}; wrote {} ({})",
        elapsed.as_secs_f64(),
        if early { " (ended early)" } else { "" },
        escape::path(&args.output),
        human_size(size)
    )?;
    if samples == 0 {
        errln!(
            "otelprof: warning: no samples: the JVM did no {} work the agent could see while it \
             ran (a longer --duration, or a shorter --interval)",
            args.ty
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The agent options of a session of `args.ty` alone, at `args.interval` (checked by the
/// agent's own option table before the JVM is asked).
fn session_options(args: &ProfileArgs) -> anyhow::Result<String> {
    let (key, default) = match args.ty.as_str() {
        "cpu" => ("cpu", "10ms"),
        "wall" => ("wall", "50ms"),
        "alloc" => ("alloc", "512k"),
        "lock" => ("lock", "1ms"),
        "live" => ("live", "512k"),
        other => bail!("--type {other}: cpu, wall, alloc, lock or live"),
    };
    let interval = args.interval.as_deref().unwrap_or(default);
    if interval.is_empty() || interval.contains([',', '=']) || interval == "off" {
        bail!("--interval {interval:?}: a duration or a size, e.g. 10ms or 512k");
    }
    let mut options = if key == "cpu" {
        format!("cpu={interval}")
    } else {
        format!("cpu=off,{key}={interval}")
    };
    // One period longer than the profile: the dump ends it, so nothing is cut before.
    let period = args.duration.as_secs().saturating_add(3600);
    options.push_str(&format!(",period={period}s,out=none"));
    // The value is the only part from outside: checked by the agent's own table.
    match otelprof_agent_options::check_item(key, interval) {
        Ok(_) => Ok(options),
        Err(otelprof_agent_options::Problem::BadValue(why)) => {
            bail!("--type {} --interval {interval}: {why}", args.ty)
        }
        Err(_) => bail!("--type {}: this agent has no {key} profiling", args.ty),
    }
}

/// Fails when the JVM already runs an otelprof session (one started with the JVM, by attach
/// or over OpAMP).
fn refuse_a_running_session(args: &ProfileArgs, agent: &AgentFiles) -> anyhow::Result<()> {
    let status = verb(args, &Verb::Status, agent)?;
    let state = status
        .lines
        .iter()
        .find_map(|l| l.strip_prefix("state:"))
        .map(str::trim)
        .unwrap_or("");
    if state == "running" {
        bail!(
            "JVM {} already runs an otelprof session; `otelprof attach {} dump -o FILE` takes \
             its profile so far, `otelprof attach {} stop` ends it",
            args.pid,
            args.pid,
            args.pid
        );
    }
    Ok(())
}

fn verb(args: &ProfileArgs, verb: &Verb, agent: &AgentFiles) -> anyhow::Result<Outcome> {
    let outcome = attach::run(args.pid, verb, Some(agent), args.timeout)?;
    for note in &outcome.notes {
        errln!("otelprof: {}", escape::escape(note));
    }
    Ok(outcome)
}

fn reply_text(outcome: &Outcome) -> String {
    escape::escape(&outcome.lines.join("; ")).into_owned()
}

/// Sleeps for `duration` or until Ctrl-C (or SIGTERM); true when ended early.
fn wait(duration: Duration) -> anyhow::Result<bool> {
    signals::catch_interrupts().context("cannot catch Ctrl-C")?;
    let end = Instant::now() + duration;
    while Instant::now() < end {
        if signals::interrupted() {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
    Ok(false)
}

/// Writes the profile in `taken` (gzipped pprof, as the agent dumps it) to the output in its
/// format; returns the samples it holds and, as `top`'s header says it, how many and how
/// much (`307 samples, total 3.07s`; for allocations the samples are the estimated objects).
fn write(taken: &Path, output: Output, args: &ProfileArgs) -> anyhow::Result<(u64, String)> {
    let bytes = std::fs::read(taken).with_context(|| format!("cannot read {}", taken.display()))?;
    let profile = otel_bridge::pprof::decode(&bytes)
        .with_context(|| format!("the agent's profile {}", taken.display()))?;
    let source = super::open_source(&[taken.to_path_buf()])?;
    let selector = Selector::default();
    // By thread state: a wall profile's page can colour its frames by state.
    let spec = query::Spec::new(None, &selector).by(Some(query::states::STATE_KEY));
    let (merged, _) = query::merge(&source, spec)?;
    let samples = merged.total_count() as u64;
    // As top's header says it.
    let amount = if samples > 0 {
        format!(
            "{samples} samples, total {}",
            crate::table::value(merged.total(), &merged.unit)
        )
    } else {
        "0 samples".to_owned()
    };
    let title = format!("otelprof: {} of JVM {}", args.ty, args.pid);
    match output {
        Output::Pprof => save(&args.output, &bytes)?,
        Output::Otlp => {
            let resource = opentelemetry_sdk::Resource::builder_empty()
                .with_attributes([
                    opentelemetry::KeyValue::new("service.name", "unknown_service:java"),
                    opentelemetry::KeyValue::new("process.pid", i64::from(args.pid)),
                ])
                .build();
            let mut random = otelprof_primitives::rng::SplitMix64(
                super::now_unix_nanos() as u64 ^ u64::from(std::process::id()),
            );
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&random.next_u64().to_le_bytes());
            id[8..].copy_from_slice(&random.next_u64().to_le_bytes());
            let encoded = otel_bridge::otlp::encode_to_vec(
                &profile,
                &resource,
                otel_bridge::otlp::ProfileId::from_random(id),
                &otel_bridge::otlp::EncodeOptions::default(),
            )
            .context("cannot encode the profile as OTLP")?;
            save(&args.output, &encoded)?;
        }
        Output::Html | Output::Svg | Output::Collapsed => {
            let tree = flame::Tree::of(&merged, &title);
            if output == Output::Collapsed {
                save(&args.output, (tree.folded().join("\n") + "\n").as_bytes())?;
            } else {
                let subtitle =
                    crate::table::render_header(&merged, merged.total(), merged.total_count());
                flame::write(&tree, &subtitle, &args.output)?;
            }
        }
    }
    Ok((samples, amount))
}

/// Writes `bytes` to `path` under a temporary name first (a reader never sees half a file).
fn save(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("part");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_the_name() {
        assert_eq!(Output::of(Path::new("a/b.html")).unwrap(), Output::Html);
        assert_eq!(Output::of(Path::new("x.SVG")).unwrap(), Output::Svg);
        assert_eq!(Output::of(Path::new("x.pb.gz")).unwrap(), Output::Pprof);
        assert_eq!(
            Output::of(Path::new("x.folded")).unwrap(),
            Output::Collapsed
        );
        assert_eq!(Output::of(Path::new("x.otlp.pb")).unwrap(), Output::Otlp);
        let e = Output::of(Path::new("x.jfr")).unwrap_err().to_string();
        assert!(e.contains("*.html") && e.contains("x.jfr"), "{e}");
    }

    fn args(ty: &str, interval: Option<&str>) -> ProfileArgs {
        ProfileArgs {
            pid: 1,
            duration: Duration::from_secs(30),
            ty: ty.to_owned(),
            interval: interval.map(str::to_owned),
            output: PathBuf::from("x.html"),
            timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn one_type_alone_no_files_one_long_period() {
        assert_eq!(
            session_options(&args("cpu", None)).unwrap(),
            "cpu=10ms,period=3630s,out=none"
        );
        assert_eq!(
            session_options(&args("alloc", Some("256k"))).unwrap(),
            "cpu=off,alloc=256k,period=3630s,out=none"
        );
        for bad in ["banana", "10ms,wall=1ms", "off", ""] {
            assert!(
                session_options(&args("cpu", Some(bad))).is_err(),
                "{bad} accepted"
            );
        }
        assert!(session_options(&args("wall", Some("256k"))).is_err());
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(2048), "2.0 KiB");
        assert_eq!(human_size(3 << 20), "3.0 MiB");
    }
}
