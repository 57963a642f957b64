//! `otelprof run -- COMMAND…`: runs a program with the otelprof agent loaded.
//!
//! The agent goes in as `-agentpath:/abs/libotelprof.so=key=value,…`. For a `java` command it
//! is the first JVM argument; for anything else (launcher scripts, `mvn`, `gradle`) it is
//! appended to `JAVA_TOOL_OPTIONS`, which every JVM the command starts reads.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};

use crate::cli::{Clock, RunArgs};
use crate::signals;

/// Environment variable naming the agent library when `--agent` is not given.
pub const AGENT_ENV: &str = "OTELPROF_AGENT";
/// File name of the agent library, built by `cargo build --release` into `target/release/`.
pub const AGENT_FILE: &str = "libotelprof.so";
/// Output directory when neither `--out` nor an `out=` agent option is given.
pub const DEFAULT_OUT: &str = "otel-bridges";
const JAVA_TOOL_OPTIONS: &str = "JAVA_TOOL_OPTIONS";
/// The Java shim, built beside the agent library.
pub const JAR: &str = "otelprof.jar";

fn clock_option(clock: Clock) -> &'static str {
    match clock {
        Clock::Cpu => "cpu",
        Clock::Itimer => "itimer",
    }
}

/// Runs the command; returns the exit status to leave with (the child's, or 128 + signal).
pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let agent = locate_agent(
        args.agent.as_deref(),
        std::env::var_os(AGENT_ENV).as_deref(),
        std::env::current_exe().ok().as_deref(),
    )?;

    let extra_out = args.agent_options.as_deref().and_then(out_option);
    let (out_option_dir, report_dir) = match (&args.out, extra_out) {
        (Some(_), Some(_)) => {
            bail!("the output directory is given twice: --out and out= in --agent-options")
        }
        (None, Some(dir)) => (None, absolute(Path::new(dir))?),
        (out, None) => {
            let dir = absolute(out.as_deref().unwrap_or(Path::new(DEFAULT_OUT)))?;
            // Checked before the directory is created, so that a rejected path leaves nothing
            // behind; checked again below, once symlinks are resolved.
            out_option_value(&dir)?;
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create output directory {}", dir.display()))?;
            let dir = std::fs::canonicalize(&dir)
                .with_context(|| format!("cannot resolve output directory {}", dir.display()))?;
            (Some(dir.clone()), dir)
        }
    };

    let options = option_string(&AgentOptions {
        cpu: args.cpu,
        period: args.period,
        out: out_option_dir.as_deref(),
        clock: args.clock,
        depth: args.depth,
        extra: args.agent_options.as_deref(),
    })?;
    let mut jvm_args = vec![agentpath_argument(&agent, &options)?];
    // otelprof.jar beside the library follows OpenTelemetry context (span attribution). With
    // -agentpath also given, it finds the native methods already bound and does not load the
    // library again (so no restricted-method warning on JDK 24+).
    let jar = agent.with_file_name(JAR);
    if jar.is_file() {
        jvm_args.push(format!("-javaagent:{}", jar.display()));
    }
    let launch = plan_launch(
        &args.command,
        &jvm_args,
        std::env::var_os(JAVA_TOOL_OPTIONS).as_deref(),
    )?;

    let mut command = Command::new(&launch.program);
    command.args(&launch.args);
    if let Some(jto) = &launch.java_tool_options {
        command.env(JAVA_TOOL_OPTIONS, jto);
    }
    let started = SystemTime::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let program = Path::new(&launch.program).display();
            errln!("otelprof: cannot run {program}: {e}");
            // The shell's conventions: 127 not found, 126 found but not runnable.
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    signals::forward_to(child.id()).context("cannot install signal forwarding")?;
    let waited = signals::wait_for_exit(child.id());
    signals::stop_forwarding();
    waited.context("waiting for the command")?;
    let status = child.wait().context("waiting for the command")?;

    let files = count_new_files(&report_dir, started);
    errln!(
        "otelprof: profiles in {} ({files} file{})",
        report_dir.display(),
        if files == 1 { "" } else { "s" }
    );
    Ok(exit_code(status))
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 1,
    }
}

/// `--agent`, else `$OTELPROF_AGENT`, else `libotelprof.so` in the directory of `exe`;
/// returned canonical (absolute, symlinks resolved) because the JVM may run elsewhere.
pub fn locate_agent(
    explicit: Option<&Path>,
    from_env: Option<&OsStr>,
    exe: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    let (candidate, origin) = match (explicit, from_env.filter(|v| !v.is_empty())) {
        (Some(path), _) => (path.to_path_buf(), "--agent"),
        (None, Some(path)) => (PathBuf::from(path), AGENT_ENV),
        (None, None) => {
            let beside = exe.and_then(Path::parent).map(|dir| dir.join(AGENT_FILE));
            match beside {
                Some(path) if path.is_file() => (path, "the otelprof executable's directory"),
                _ => bail!(
                    "cannot find the agent library {AGENT_FILE}: build it with \
                     `cargo build --release` (it lands in target/release/ beside otelprof), \
                     or pass --agent PATH, or set {AGENT_ENV}"
                ),
            }
        }
    };
    if !candidate.is_file() {
        bail!(
            "agent library {} (from {origin}) does not exist or is not a file",
            candidate.display()
        );
    }
    std::fs::canonicalize(&candidate)
        .with_context(|| format!("cannot resolve agent library {}", candidate.display()))
}

/// `d` in the largest of `s`, `ms`, `us`, `ns` that represents it exactly, the form the
/// agent's option parser is given (`1m` → `60s`, `1.5s` → `1500ms`).
pub fn agent_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if (nanos / scale) * scale == nanos {
            return format!("{}{unit}", nanos / scale);
        }
    }
    format!("{nanos}ns")
}

/// Agent options as given on the command line, before they are joined.
#[derive(Debug, Default)]
pub struct AgentOptions<'a> {
    pub cpu: Option<Duration>,
    pub period: Option<Duration>,
    pub out: Option<&'a Path>,
    pub clock: Option<Clock>,
    pub depth: Option<u32>,
    pub extra: Option<&'a str>,
}

/// `cpu=10ms,period=10s,out=/abs/dir,clock=cpu,depth=2048`, with only the options given and
/// `extra` appended verbatim.
pub fn option_string(o: &AgentOptions<'_>) -> anyhow::Result<String> {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(d) = o.cpu {
        pairs.push(("cpu", agent_duration(d)));
    }
    if let Some(d) = o.period {
        pairs.push(("period", agent_duration(d)));
    }
    if let Some(dir) = o.out {
        pairs.push(("out", out_option_value(dir)?.to_owned()));
    }
    if let Some(clock) = o.clock {
        pairs.push(("clock", clock_option(clock).to_owned()));
    }
    if let Some(depth) = o.depth {
        pairs.push(("depth", depth.to_string()));
    }
    let mut joined: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some(extra) = o.extra.filter(|e| !e.is_empty()) {
        joined.push(extra.to_owned());
    }
    Ok(joined.join(","))
}

/// `dir` as the value of `out=`, or why it cannot be one.
fn out_option_value(dir: &Path) -> anyhow::Result<&str> {
    let Some(text) = dir.to_str() else {
        bail!("output directory {} is not valid UTF-8", dir.display());
    };
    if text.contains(',') {
        bail!(
            "output directory {text} contains a comma, which the agent option string cannot \
             carry (options are separated by commas): choose another --out"
        );
    }
    Ok(text)
}

/// The value of an `out=` pair in a verbatim option string, if any (the last one wins, as
/// with any repeated option).
fn out_option(options: &str) -> Option<&str> {
    options
        .split(',')
        .filter_map(|pair| pair.trim().strip_prefix("out="))
        .next_back()
}

/// `-agentpath:/abs/libotelprof.so=options` (no `=` when there are no options).
pub fn agentpath_argument(agent: &Path, options: &str) -> anyhow::Result<String> {
    let Some(path) = agent.to_str() else {
        bail!("agent path {} is not valid UTF-8", agent.display());
    };
    // The JVM splits `-agentpath:` at the first '=' into library and options.
    if path.contains('=') {
        bail!("agent path {path} contains '=', which -agentpath cannot carry: move the library");
    }
    Ok(if options.is_empty() {
        format!("-agentpath:{path}")
    } else {
        format!("-agentpath:{path}={options}")
    })
}

/// What to execute, with the agent injected.
#[derive(Debug, PartialEq, Eq)]
pub struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// New value of `JAVA_TOOL_OPTIONS`, when the agent goes in that way.
    pub java_tool_options: Option<OsString>,
}

pub fn plan_launch(
    command: &[OsString],
    jvm_args: &[String],
    java_tool_options: Option<&OsStr>,
) -> anyhow::Result<Launch> {
    let Some((program, args)) = command.split_first() else {
        bail!("no command to run: give one after --, e.g. otelprof run -- java -jar app.jar");
    };
    if Path::new(program).file_name() == Some(OsStr::new("java")) {
        let mut with_agent = Vec::with_capacity(args.len() + jvm_args.len());
        with_agent.extend(jvm_args.iter().map(OsString::from));
        with_agent.extend(args.iter().cloned());
        return Ok(Launch {
            program: program.clone(),
            args: with_agent,
            java_tool_options: None,
        });
    }
    // The JVM splits JAVA_TOOL_OPTIONS at white space.
    if let Some(arg) = jvm_args.iter().find(|a| a.contains(char::is_whitespace)) {
        bail!(
            "{arg} contains white space, which JAVA_TOOL_OPTIONS cannot carry: run \
             `java` directly (otelprof run -- java …) or use paths and options without spaces"
        );
    }
    let mut jto = OsString::new();
    if let Some(existing) = java_tool_options.filter(|v| !v.is_empty()) {
        jto.push(existing);
        jto.push(" ");
    }
    jto.push(jvm_args.join(" "));
    Ok(Launch {
        program: program.clone(),
        args: args.to_vec(),
        java_tool_options: Some(jto),
    })
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

/// Files in `dir` written since `since` (at one-second resolution, the coarsest mtime common
/// file systems keep); 0 when `dir` cannot be read.
fn count_new_files(dir: &Path, since: SystemTime) -> usize {
    let since = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .filter_map(|m| m.modified().ok())
        .filter_map(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .filter(|t| t.as_secs() >= since)
        .count()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn agent_durations_are_exact() {
        assert_eq!(agent_duration(Duration::from_secs(60)), "60s");
        assert_eq!(agent_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(agent_duration(Duration::from_micros(250)), "250us");
        assert_eq!(agent_duration(Duration::from_nanos(1001)), "1001ns");
    }

    #[test]
    fn options_join_only_what_was_given() {
        let all = AgentOptions {
            cpu: Some(Duration::from_millis(10)),
            period: Some(Duration::from_secs(10)),
            out: Some(Path::new("/abs/dir")),
            clock: Some(Clock::Cpu),
            depth: Some(2048),
            extra: Some("wall=50ms"),
        };
        assert_eq!(
            option_string(&all).unwrap(),
            "cpu=10ms,period=10s,out=/abs/dir,clock=cpu,depth=2048,wall=50ms"
        );
        let some = AgentOptions {
            period: Some(Duration::from_secs(90)),
            clock: Some(Clock::Itimer),
            ..Default::default()
        };
        assert_eq!(option_string(&some).unwrap(), "period=90s,clock=itimer");
        assert_eq!(option_string(&AgentOptions::default()).unwrap(), "");
    }

    #[test]
    fn commas_in_paths_are_rejected() {
        let o = AgentOptions {
            out: Some(Path::new("/tmp/a,b")),
            ..Default::default()
        };
        let err = option_string(&o).unwrap_err().to_string();
        assert!(err.contains("contains a comma"), "{err}");
        let err = agentpath_argument(Path::new("/x=y/libotelprof.so"), "")
            .unwrap_err()
            .to_string();
        assert!(err.contains("contains '='"), "{err}");
    }

    #[test]
    fn out_is_found_in_verbatim_options() {
        assert_eq!(out_option("wall=5ms,out=/a"), Some("/a"));
        assert_eq!(out_option("out=/a, out=/b"), Some("/b"));
        assert_eq!(out_option("wall=5ms,timeout=3"), None);
    }

    #[test]
    fn java_gets_the_agent_as_first_arguments() {
        let arg = agentpath_argument(Path::new("/opt/libotelprof.so"), "cpu=10ms").unwrap();
        assert_eq!(arg, "-agentpath:/opt/libotelprof.so=cpu=10ms");
        let jvm_args = vec![arg.clone(), "-javaagent:/opt/otelprof.jar".to_owned()];
        for java in ["java", "/usr/lib/jvm/java-21/bin/java", "./java"] {
            let launch = plan_launch(
                &os(&[java, "-Xmx1g", "-jar", "app.jar"]),
                &jvm_args,
                Some(OsStr::new("-Dx=1")),
            )
            .unwrap();
            assert_eq!(
                launch,
                Launch {
                    program: java.into(),
                    args: os(&[
                        &arg,
                        "-javaagent:/opt/otelprof.jar",
                        "-Xmx1g",
                        "-jar",
                        "app.jar"
                    ]),
                    java_tool_options: None,
                }
            );
        }
    }

    #[test]
    fn other_commands_get_the_agent_through_java_tool_options() {
        let arg = "-agentpath:/opt/libotelprof.so=cpu=10ms";
        let args = vec![arg.to_owned()];
        let launch = plan_launch(&os(&["./gradlew", "run"]), &args, None).unwrap();
        assert_eq!(launch.program, "./gradlew");
        assert_eq!(launch.args, os(&["run"]));
        assert_eq!(launch.java_tool_options, Some(arg.into()));

        let launch = plan_launch(&os(&["mvn"]), &args, Some(OsStr::new("-Xss2m"))).unwrap();
        assert_eq!(
            launch.java_tool_options,
            Some(format!("-Xss2m {arg}").into())
        );
        let two = vec![arg.to_owned(), "-javaagent:/opt/otelprof.jar".to_owned()];
        let launch = plan_launch(&os(&["mvn"]), &two, None).unwrap();
        assert_eq!(
            launch.java_tool_options,
            Some(format!("{arg} -javaagent:/opt/otelprof.jar").into())
        );
        // `javac` and `java.sh` are not `java`.
        for not_java in ["javac", "java.sh", "/opt/java/bin/javaw"] {
            let launch = plan_launch(&os(&[not_java]), &args, None).unwrap();
            assert!(launch.java_tool_options.is_some(), "{not_java}");
        }
        let err = plan_launch(
            &os(&["sh", "run.sh"]),
            &["-agentpath:/my dir/libotelprof.so".to_owned()],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("white space"), "{err}");
        assert!(plan_launch(&[], &args, None).is_err());
    }

    #[test]
    fn agent_is_found_in_order() {
        let dir = std::env::temp_dir().join(format!("otelprof-agent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join(AGENT_FILE);
        std::fs::write(&lib, b"").unwrap();
        let exe = dir.join("otelprof");
        let lib = std::fs::canonicalize(&lib).unwrap();

        assert_eq!(locate_agent(None, None, Some(&exe)).unwrap(), lib);
        assert_eq!(
            locate_agent(None, Some(lib.as_os_str()), None).unwrap(),
            lib
        );
        assert_eq!(
            locate_agent(Some(&lib), Some(OsStr::new("/nope")), None).unwrap(),
            lib
        );

        let err = locate_agent(None, Some(OsStr::new("/nope/libotelprof.so")), Some(&exe))
            .unwrap_err()
            .to_string();
        assert!(err.contains("from OTELPROF_AGENT"), "{err}");
        let err = locate_agent(None, None, Some(Path::new("/nonexistent/otelprof")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cargo build --release"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
