//! `otelprof demo`: the whole product on one machine in about a minute. A small shop service
//! (JDK-only Java, `com.sun.net.httpserver`, four endpoints, its own load generator, spans
//! through otelprof's direct Java API) runs as version 1.0 and as version 2.0, which carries
//! one deliberate regression. Both are profiled by the agent, which exports OTLP to the
//! receiver running inside this process; then the demo answers the three questions: CPU per
//! endpoint, where the slowest trace spent its time, and what got slower from 1.0 to 2.0.
//!
//! The Java sources are compiled into this binary, so `otelprof demo` needs only a JDK and
//! the agent (`libotelprof.so`, `otelprof.jar`) beside the executable.

use std::io::{BufRead as _, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{bail, Context as _};

use crate::cli::{DemoArgs, DiffArgs, DrilldownArgs, FlameArgs, SelectArgs, TopArgs};
use crate::commands;
use otelprof_receiver::{self as receiver, ReceiveConfig};

/// The demo service, compiled at run time.
const SOURCES: [(&str, &str); 6] = [
    (
        "Shop.java",
        include_str!("../../../examples/demo/otelprof/demo/Shop.java"),
    ),
    (
        "Catalog.java",
        include_str!("../../../examples/demo/otelprof/demo/Catalog.java"),
    ),
    (
        "Pricing.java",
        include_str!("../../../examples/demo/otelprof/demo/Pricing.java"),
    ),
    (
        "Tracer.java",
        include_str!("../../../examples/demo/otelprof/demo/Tracer.java"),
    ),
    (
        "OtlpMetrics.java",
        include_str!("../../../examples/demo/otelprof/demo/OtlpMetrics.java"),
    ),
    (
        "LoadGen.java",
        include_str!("../../../examples/demo/otelprof/demo/LoadGen.java"),
    ),
];

/// The method version 2.0 made slower.
pub const REGRESSED_METHOD: &str = "otelprof.demo.Catalog.findProduct";

fn jdk_tool(args: &DemoArgs, tool: &str) -> anyhow::Result<PathBuf> {
    let home = args
        .jdk
        .clone()
        .or_else(|| std::env::var_os("JAVA_HOME").map(PathBuf::from));
    if let Some(home) = home {
        let p = home.join("bin").join(tool);
        if p.is_file() {
            return Ok(p);
        }
        if args.jdk.is_some() {
            bail!("{} has no bin/{tool}", home.display());
        }
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(tool))
                .find(|p| p.is_file())
        })
        .with_context(|| {
            format!(
                "no {tool} found: the demo needs a JDK 17 or newer (Debian: apt-get install \
                 openjdk-17-jdk-headless), on the PATH or given with --jdk / JAVA_HOME"
            )
        })
}

/// What one run of the shop printed.
#[derive(Debug, Default)]
struct ShopRun {
    served: String,
    /// What the load generator said it sent.
    sent: String,
    slowest_trace: Option<String>,
    /// Its endpoint: the drilldown's fallback when the trace got no CPU samples (a request can
    /// be slow because it waited).
    slowest_endpoint: Option<String>,
    slowest_line: String,
}

/// The shop's JVM, profiled by the agent, exporting to the receiver at `grpc` (profiles) and
/// `http` (the shop's own metrics).
fn spawn_shop(
    java: &Path,
    classpath: &str,
    agent: &Path,
    (grpc, http): (SocketAddr, SocketAddr),
    version: &str,
) -> anyhow::Result<Child> {
    // Wall clock too: the store shows where request threads wait, and in which thread state.
    let options =
        format!("endpoint=http://{grpc},protocol=grpc,period=5s,timestamps=on,wall=20ms,log=warn");
    let mut command = Command::new(java);
    crate::signals::end_with_parent(&mut command);
    command
        .arg(format!("-agentpath:{}={options}", agent.display()))
        .args([
            "-Xms256m",
            "-Xmx256m",
            "-cp",
            classpath,
            "otelprof.demo.Shop",
        ])
        .args(["--version", version.split('.').next().unwrap_or("1")])
        .args(["--metrics", &format!("http://{http}/v1/metrics")])
        .env("OTEL_SERVICE_NAME", "shop")
        // The agent's metrics (heap after GC, pauses) every period, as its profiles: the
        // timeline's heap line gets a point per bucket, not one at exit.
        .env("OTEL_METRIC_EXPORT_INTERVAL", "5000")
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("service.version={version},deployment.environment.name=demo"),
        )
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("_JAVA_OPTIONS")
        .env_remove("JDK_JAVA_OPTIONS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", java.display()))
}

/// Everything `stream` says until it ends, read on a thread of its own.
fn read_all(stream: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(e) = stream {
            for line in BufReader::new(e).lines().map_while(Result::ok) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    })
}

/// The load against the shop at `base` for `seconds`, in a JVM of its own, without the agent,
/// so that the profile is the service's, not its clients'.
fn run_load(
    java: &Path,
    classpath: &str,
    base: &str,
    seconds: u32,
) -> anyhow::Result<std::process::Output> {
    let mut command = Command::new(java);
    crate::signals::end_with_parent(&mut command);
    command
        .args([
            "-Xms64m",
            "-Xmx256m",
            "-cp",
            classpath,
            "otelprof.demo.LoadGen",
        ])
        .args([base, &seconds.to_string(), "3"])
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("_JAVA_OPTIONS")
        .env_remove("JDK_JAVA_OPTIONS")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot start the load generator with {}", java.display()))
}

impl ShopRun {
    /// Takes what a line of the shop's output says about the run.
    fn read(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("slowest ") {
            self.slowest_line = rest.replace('_', " ");
            self.slowest_trace = rest
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix("trace="))
                .map(str::to_owned);
            self.slowest_endpoint = rest
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix("endpoint="))
                .map(|e| e.replace('_', " "));
        } else if line.contains(": served ") {
            self.served = line.to_owned();
        }
    }
}

/// Runs shop `version` under load for `seconds`, profiled, exporting to `receiver` (its gRPC
/// and HTTP addresses), and reads what it said.
fn run_shop(
    java: &Path,
    classpath: &str,
    agent: &Path,
    receiver: (SocketAddr, SocketAddr),
    version: &str,
    seconds: u32,
) -> anyhow::Result<ShopRun> {
    let mut child = spawn_shop(java, classpath, agent, receiver, version)?;
    let errors = read_all(child.stderr.take());
    let mut run = ShopRun::default();
    let mut out_text = String::new();
    let mut lines = child
        .stdout
        .take()
        .map(|out| BufReader::new(out).lines().map_while(Result::ok));
    // The shop says where it listens; then the load runs.
    let mut base = None;
    if let Some(lines) = lines.as_mut() {
        for line in lines.by_ref() {
            out_text.push_str(&line);
            out_text.push('\n');
            if let Some((_, url)) = line.split_once(": listening on ") {
                base = Some(url.to_owned());
                break;
            }
        }
    }
    let load = match &base {
        Some(base) => run_load(java, classpath, base, seconds),
        None => Err(anyhow::anyhow!("the shop did not say where it listens")),
    };
    // Closing its standard input stops the shop, whatever happened to the load.
    drop(child.stdin.take());
    for line in lines.into_iter().flatten() {
        run.read(&line);
        out_text.push_str(&line);
        out_text.push('\n');
    }
    let load = load?;
    let load_text =
        String::from_utf8_lossy(&load.stdout).into_owned() + &String::from_utf8_lossy(&load.stderr);
    if !load.status.success() {
        bail!("the load generator failed ({}):\n{load_text}", load.status);
    }
    run.sent = load_text
        .lines()
        .find(|l| l.starts_with("load: "))
        .unwrap_or("")
        .to_owned();
    let status = child.wait().context("waiting for the shop")?;
    let err_text = errors.join().unwrap_or_default();
    if !status.success() || run.served.is_empty() {
        bail!("the shop (version {version}) failed: {status}\n{out_text}{err_text}");
    }
    if err_text.contains("profiling is off") || err_text.contains("internal error") {
        bail!("the agent did not profile the shop:\n{err_text}");
    }
    Ok(run)
}

fn section(title: &str, command: &str) -> anyhow::Result<()> {
    outln!("\n== {title}")?;
    outln!("   ({command})\n")
}

/// What the demo runs: the JDK's tools, and the agent with its jar.
struct Tools {
    java: PathBuf,
    javac: PathBuf,
    agent: PathBuf,
    jar: PathBuf,
}

fn tools(args: &DemoArgs) -> anyhow::Result<Tools> {
    let java = jdk_tool(args, "java")?;
    let javac = jdk_tool(args, "javac")?;
    let agent = crate::commands::run::locate_agent(
        args.agent.as_deref(),
        std::env::var_os(crate::commands::run::AGENT_ENV).as_deref(),
        std::env::current_exe().ok().as_deref(),
    )?;
    let jar = agent.with_file_name("otelprof.jar");
    if !jar.is_file() {
        bail!(
            "{} is missing: it holds otelprof's Java API (otelprof.ThreadContext) the shop sets \
             its spans with; `cargo build --release` builds it beside {}",
            jar.display(),
            agent.display()
        );
    }
    Ok(Tools {
        java,
        javac,
        agent,
        jar,
    })
}

/// Writes the shop's sources under `dir` (after removing what an earlier demo wrote there)
/// and compiles them; returns the class path to run it with.
fn compile_shop(dir: &Path, tools: &Tools) -> anyhow::Result<String> {
    if dir.exists() {
        // Only what the demo itself writes is removed.
        for sub in ["store", "classes", "src"] {
            let _ = std::fs::remove_dir_all(dir.join(sub));
        }
    }
    let src = dir.join("src/otelprof/demo");
    std::fs::create_dir_all(&src).with_context(|| format!("cannot create {}", src.display()))?;
    let classes = dir.join("classes");
    let mut files = Vec::new();
    for (name, text) in SOURCES {
        let p = src.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
        files.push(p);
    }
    errln!(
        "otelprof demo: compiling the shop service (JDK-only Java) with {}",
        tools.javac.display()
    );
    let status = Command::new(&tools.javac)
        .args(["--release", "17", "-g", "-cp"])
        .arg(&tools.jar)
        .arg("-d")
        .arg(&classes)
        .args(&files)
        .status()
        .with_context(|| format!("cannot run {}", tools.javac.display()))?;
    if !status.success() {
        bail!("javac failed ({status})");
    }
    Ok(
        std::env::join_paths([classes.as_path(), tools.jar.as_path()])
            .context("class path")?
            .to_string_lossy()
            .into_owned(),
    )
}

/// Runs versions 1.0 and 2.0 of the shop one after the other, profiled, into a receiver
/// storing in `store`; returns what each run said.
fn profile_both_versions(
    args: &DemoArgs,
    tools: &Tools,
    classpath: &str,
    store: &Path,
) -> anyhow::Result<Vec<ShopRun>> {
    let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let running = receiver::start(&ReceiveConfig {
        store: store.to_path_buf(),
        grpc: Some(loopback(0)),
        http: Some(loopback(0)),
        token: None,
        tls: None,
        max_bytes: 32 << 20,
        limits: receiver::Limits::default(),
        keep: receiver::Keep::default(),
        maintenance: receiver::Maintenance::default(),
        cache: None,
    })?;
    let (Some(grpc), Some(http)) = (running.grpc, running.http) else {
        bail!("the embedded receiver did not start");
    };
    errln!(
        "otelprof demo: embedded receiver on grpc://{grpc} and http://{http}, storing in {}",
        store.display()
    );
    let mut runs = Vec::new();
    for (i, version) in ["1.0", "2.0"].into_iter().enumerate() {
        errln!(
            "otelprof demo: [{}/2] shop version {version} under load for {} s, profiled (CPU every 10 ms) ...",
            i + 1,
            args.seconds
        );
        let t = Instant::now();
        let run = run_shop(
            &tools.java,
            classpath,
            &tools.agent,
            (grpc, http),
            version,
            args.seconds,
        )?;
        errln!(
            "  {}; {} ({:.0} s)",
            run.served,
            run.sent,
            t.elapsed().as_secs_f64()
        );
        runs.push(run);
    }
    let summary = receiver::summary(running.counters());
    running.stop();
    errln!("otelprof demo: receiver stopped; {summary}");
    Ok(runs)
}

/// The first question: CPU per endpoint of version 2.0 (`otelprof top`).
fn show_top(paths: &[PathBuf], store_arg: &str) -> anyhow::Result<()> {
    section(
        "CPU per endpoint, version 2.0",
        &format!("otelprof top --by span_name --where service.version=2.0 {store_arg}"),
    )?;
    commands::top::run(&TopArgs {
        select: SelectArgs::conditions(&["service.version=2.0"]),
        by: Some("span_name".to_owned()),
        by_thread: false,
        limit: 10,
        trend: None,
        buckets: None,
        paths: paths.to_vec(),
    })?;
    Ok(())
}

/// The second: where the slowest trace of version 2.0 spent its time (`otelprof drilldown`);
/// returns the flame graph written, if the shop named a slowest trace.
fn show_slowest_trace(
    dir: &Path,
    paths: &[PathBuf],
    store_arg: &str,
    run: &ShopRun,
) -> anyhow::Result<Option<PathBuf>> {
    let Some(trace) = &run.slowest_trace else {
        return Ok(None);
    };
    section(
        &format!("The slowest trace of version 2.0: {}", run.slowest_line),
        &format!("otelprof drilldown --trace-id {trace} {store_arg}"),
    )?;
    let out = dir.join("slowest-trace.html");
    let s = SelectArgs {
        trace_id: Some(trace.clone()),
        ..SelectArgs::default()
    };
    commands::drilldown::run(&DrilldownArgs {
        select: s,
        children: false,
        endpoint: run.slowest_endpoint.clone(),
        limit: 10,
        output: Some(out.clone()),
        paths: paths.to_vec(),
    })?;
    Ok(Some(out))
}

/// The third: what changed from 1.0 to 2.0 (`otelprof diff`), and whether the diff found the
/// deliberate regression; returns the diff's flame graph.
fn show_diff(dir: &Path, paths: &[PathBuf], store_arg: &str) -> anyhow::Result<PathBuf> {
    section(
        "What changed from version 1.0 to 2.0",
        &format!("otelprof diff --base service.version=1.0 --head service.version=2.0 {store_arg}"),
    )?;
    let diff_html = dir.join("diff-1.0-2.0.html");
    let (_, headline) = commands::diff::run(&DiffArgs {
        base: "service.version=1.0".to_owned(),
        head: "service.version=2.0".to_owned(),
        ranges: Default::default(),
        select: SelectArgs::default(),
        by: "span_name".to_owned(),
        limit: 6,
        output: Some(diff_html.clone()),
        fail_above: None,
        fdr: crate::cli::DEFAULT_FDR_PERCENT,
        paths: paths.to_vec(),
    })?;
    outln!()?;
    match headline.as_deref() {
        Some(REGRESSED_METHOD) => outln!(
            "The regression: {REGRESSED_METHOD}. Version 2.0 replaced its hash lookup with a \
             scan of the catalogue, and the diff found it without being told."
        ),
        Some(other) => outln!(
            "The diff's top suspect is {other}; the deliberate regression is in \
             {REGRESSED_METHOD} (too little load to separate them? try --seconds 40)."
        ),
        None => outln!(
            "The diff found no significant change; the deliberate regression is in \
             {REGRESSED_METHOD} (too little load? try --seconds 40)."
        ),
    }?;
    Ok(diff_html)
}

/// The flame graphs of both versions; returns the files written.
fn write_flames(dir: &Path, paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (version, name) in [
        ("1.0", "flame-1.0.html"),
        ("2.0", "flame-2.0.html"),
        ("2.0", "flame-2.0.svg"),
    ] {
        let out = dir.join(name);
        commands::flame::run(&FlameArgs {
            select: SelectArgs::conditions(&[&format!("service.version={version}")]),
            output: out.clone(),
            title: Some(format!("shop {version}: CPU")),
            paths: paths.to_vec(),
        })?;
        written.push(out);
    }
    Ok(written)
}

/// The files written, and where to go on from here.
fn say_what_next(written: &[PathBuf], store_arg: &str, started: Instant) -> anyhow::Result<()> {
    outln!("\n== Flame graphs (self-contained: open them in any browser, offline)")?;
    for p in written {
        outln!("   {}", otelprof_primitives::escape::path(p))?;
    }
    outln!(
        "\nThe store is plain OTLP: explore it with otelprof top|flame|drilldown|diff {store_arg}\n\
         (e.g. otelprof top --by thread.name --where service.version=2.0 {store_arg}).\n\
         Demo finished in {:.0} s.",
        started.elapsed().as_secs_f64()
    )?;
    outln!(
        "\n== Browse it: otelprof serve --store {store_arg}\n   then open the Compare view of \
         1.0 -> 2.0: http://{}/diff?base=service.version%3D1.0&head=service.version%3D2.0",
        crate::cli::DEFAULT_UI
    )
}

pub fn command(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let tools = tools(args)?;
    let dir = &args.dir;
    let classpath = compile_shop(dir, &tools)?;
    let store = dir.join("store");
    let runs = profile_both_versions(args, &tools, &classpath, &store)?;

    let paths = vec![store.clone()];
    let store_arg = store.display().to_string();
    show_top(&paths, &store_arg)?;
    let mut written = Vec::new();
    if let Some(run) = runs.get(1) {
        written.extend(show_slowest_trace(dir, &paths, &store_arg, run)?);
    }
    written.push(show_diff(dir, &paths, &store_arg)?);
    written.extend(write_flames(dir, &paths)?);
    say_what_next(&written, &store_arg, started)?;
    Ok(ExitCode::SUCCESS)
}

/// Keeps the sources' file list honest: every embedded file compiles as part of the shop.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_declare_their_package() {
        for (name, text) in SOURCES {
            assert!(text.starts_with("package otelprof.demo;"), "{name}");
            let class = name.trim_end_matches(".java");
            assert!(text.contains(&format!("class {class}")), "{name}");
        }
    }

    #[test]
    fn the_regressed_method_exists() {
        let (_, catalog) = SOURCES[1];
        assert!(catalog.contains("Product findProduct(long id)"));
        assert!(REGRESSED_METHOD.ends_with("Catalog.findProduct"));
    }
}
