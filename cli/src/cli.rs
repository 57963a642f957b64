//! What `otelprof` accepts: every command, flag and value parser, and nothing else. The
//! commands themselves are in [`crate::commands`], one module each.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use otelprof_store::select::ProfileType;

use otelprof_receiver::{DEFAULT_GRPC, DEFAULT_HTTP};

#[derive(Debug, Parser)]
#[command(
    name = "otelprof",
    version,
    about = "Continuous profiler for JVM services",
    after_help = "Reading commands take `otelprof receive` store directories, agent output directories, \
                  OTLP files (*.otlp.pb[.gz]) or pprof files (*.pb.gz), and merge everything selected, \
                  from any number of JVMs. A store may be in object storage: s3://bucket/prefix \
                  (gs://, az://; configured by AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, \
                  AWS_REGION, AWS_ALLOW_HTTP and the like), or file:///dir."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
    /// Where stores in object storage (s3://bucket/prefix, gs://, az://) are mirrored for
    /// reading, and maintained from by the receiver or `compact` that holds their lease
    /// (default: $XDG_CACHE_HOME/otelprof, or ~/.cache/otelprof)
    #[arg(long, value_name = "DIR", global = true)]
    pub cache: Option<PathBuf>,
    /// Keep the cache within SIZE (e.g. `2GiB`, `500MB`): after fetching what a command
    /// reads, the least recently used copies of other objects are removed [default: no limit]
    #[arg(long, value_name = "SIZE", global = true, value_parser = parse_size_u64)]
    pub cache_size: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run a command with the otelprof agent loaded, e.g. `otelprof run -- java -jar app.jar`
    #[command(override_usage = "otelprof run [OPTIONS] -- <COMMAND>...")]
    Run(RunArgs),
    /// Receive OTLP profiles (gRPC and HTTP) and store them in a directory
    Receive(ReceiveArgs),
    /// Receive OTLP profiles like `receive` and serve a web UI over the store (default
    /// http://127.0.0.1:4040)
    Serve(ServeArgs),
    /// Convert what a store received into its columnar form and compact every hour, now (for
    /// a store no receiver runs on: receivers do this by themselves as hours close)
    Compact(CompactArgs),
    /// The hottest functions, by self and total, or the total per endpoint/version/thread
    Top(TopArgs),
    /// Draw a flame graph: interactive HTML (zoom, search, tooltips; works offline) or SVG
    Flame(FlameArgs),
    /// How the functions GLOB names are called: the merged paths from them up to the thread
    /// roots, each with its share of the function's total (e.g. `callers '*.findProduct' STORE`)
    Callers(ButterflyArgs),
    /// What the functions GLOB names call: the merged tree below them, each path with its
    /// share of the function's total
    Callees(ButterflyArgs),
    /// The traces with the most time in the selection: time, samples, spans, endpoint,
    /// window (then `otelprof drilldown --trace-id` on one)
    Traces(TracesArgs),
    /// Where one trace or span spent its time: its samples, endpoint and time window
    Drilldown(DrilldownArgs),
    /// Leak candidates: the allocation sites whose live bytes grow across the live-heap
    /// snapshots (`live=`), fastest first, with a test that the growth is not noise
    #[command(after_help = "Examples:\n  \
        otelprof leaks /var/tmp/profiles\n  \
        otelprof leaks --from now-6h --where service.name=cart STORE")]
    Leaks(LeaksArgs),
    /// Compare two selections (e.g. two releases): what grew, what shrank, and is it significant
    #[command(after_help = "Examples:\n  \
        otelprof diff --base service.version=1.4 --head service.version=1.5 STORE\n  \
        otelprof diff --base-from now-25h --base-to now-24h --head-from now-1h STORE   \
        (the last hour against the same hour yesterday)\n  \
        otelprof diff --base service.version=1.4 --head service.version=1.5 --fail-above 2 STORE   \
        (exit code 3 on a regression: a CI gate, see docs/ci-gate.md)")]
    Diff(DiffArgs),
    /// Known performance patterns in the selection (exceptions as control flow, stack traces
    /// built for logging, regexes compiled per call, contended locks, reflection, sleeping in
    /// requests, GC pressure), each with its cost, method, evidence stacks and a fix
    #[command(after_help = "Examples:\n  \
        otelprof findings STORE\n  \
        otelprof findings --where service.name=cart --from now-1h --format json STORE\n  \
        otelprof findings --fail-on warning STORE   (exit code 3 when a finding is at least a warning)")]
    Findings(FindingsArgs),
    /// Profile an example service as version 1 and 2 and show what otelprof answers
    Demo(DemoArgs),
    /// Load and control the agent in a running JVM: start, stop, status, dump
    #[command(
        override_usage = "otelprof attach [--timeout DURATION] <PID> <start [OPTIONS]|stop|status|dump [-o FILE]|jcmd COMMAND...>",
        after_help = ATTACH_HELP
    )]
    Attach(AttachArgs),
    /// Start a capture on an agent connected to `otelprof serve` over OpAMP: extra profile
    /// types for a bounded time, e.g. `--instance ID --wall 20ms --alloc 256k --seconds 60`
    Capture(CaptureArgs),
    /// Profile a running JVM once and write one file: attach, profile for a while, write,
    /// stop (e.g. `otelprof profile 1234 --duration 30s -o cpu.html`)
    #[command(after_help = PROFILE_HELP)]
    Profile(ProfileArgs),
}

const PROFILE_HELP: &str = "\
Examples:
  otelprof profile 1234 --duration 30s -o cpu.html
  otelprof profile 1234 --type wall --interval 20ms -o wall.collapsed
  otelprof profile 1234 --type alloc -o alloc.pb.gz       (go tool pprof reads it)
The format follows the file name: .html (interactive flame graph), .svg, .pb.gz (pprof),
.collapsed or .folded (one stack per line), .otlp.pb (OTLP ProfilesData). Ctrl-C ends the
profile early and still writes the file. Refused while the JVM already runs an otelprof
session (`otelprof attach PID dump -o FILE` takes that one's profile without ending it).";

/// `otelprof profile`.
#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// Process id of the JVM, as seen from here (the host's pid of a containerised JVM)
    #[arg(value_name = "PID", value_parser = parse_pid)]
    pub pid: u32,
    /// How long to profile
    #[arg(long, short = 'd', value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// What to profile: cpu, wall, alloc, lock or live
    #[arg(long = "type", short = 't', value_name = "TYPE", default_value = "cpu", value_parser = ["cpu", "wall", "alloc", "lock", "live"])]
    pub ty: String,
    /// Sampling interval (cpu, wall: a duration, default 10ms and 50ms), bytes between
    /// samples (alloc, live: a size, default 512k), or the shortest wait recorded (lock:
    /// default 1ms)
    #[arg(long, short = 'i', value_name = "INTERVAL")]
    pub interval: Option<String>,
    /// The file to write; its name gives the format
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// How long to wait for the JVM at each step
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

const ATTACH_HELP: &str = "\
Examples:
  otelprof attach 1234 start cpu=10ms,wall=50ms,out=/var/tmp/profiles
  otelprof attach 1234 status
  otelprof attach 1234 dump -o now.pb.gz
  otelprof attach 1234 stop
  otelprof attach 1234 jcmd VM.version

Speaks HotSpot's attach protocol itself (no JDK tools needed) to JDK 11 to 25 JVMs. `start`
loads libotelprof.so from beside this otelprof (and otelprof.jar, for span context), like
`jcmd PID JVMTI.agent_load`; later verbs reach the same library (or the one the JVM was
started with); stop, status and dump never load it. The agent's reply is printed; the exit
status is 0 for `ok`, 1 for `error:` or when the JVM cannot be attached to.

Needs: the JVM's own user (HotSpot checks uid and gid), or root, which acts as the JVM's user.
Works across containers: the JVM is reached through /proc/PID (its pid namespace, its /tmp,
its user namespace); when it sees other files than otelprof, or cannot read ours, the library
is copied into its /tmp/otelprof-<hash>/; out= is then an absolute path inside the JVM's file
system. Refused, with nothing sent: a process that is not a HotSpot JVM, another user's JVM
(unless root), a JVM run with -XX:+DisableAttachMechanism, and a JVM whose attach listener
is down and would not survive the SIGQUIT that starts it (-Xrs: its listener runs from
start-up, so this is only when its socket was deleted).";

#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    /// Process id of the JVM, as seen from here (the host's pid of a containerised JVM)
    #[arg(value_name = "PID", value_parser = parse_pid)]
    pub pid: u32,
    /// How long to wait for each answer of the JVM (its attach listener, then each command)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, global = true)]
    pub timeout: Duration,
    #[command(subcommand)]
    pub verb: AttachVerb,
}

#[derive(Debug, Subcommand)]
pub enum AttachVerb {
    /// Load the agent (once) and start profiling; OPTIONS as for -agentpath, e.g.
    /// cpu=10ms,wall=50ms,out=/var/tmp/profiles (a relative out= is made absolute here)
    Start {
        /// Agent options, `key=value` pairs joined by commas (see the README's table)
        #[arg(value_name = "OPTIONS", default_value = "")]
        options: String,
    },
    /// Stop profiling: the agent's threads and timers end, the last profile is written
    Stop,
    /// Whether profiling runs, since when, with which options
    Status,
    /// Write the profile so far (where the agent writes, or to -o FILE here)
    Dump {
        /// Copy the profile to this file on this side (it is written in the JVM's /tmp
        /// first, then moved)
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Run a HotSpot diagnostic command, as `jcmd PID COMMAND...` would (e.g. VM.version,
    /// Thread.print, VM.system_properties)
    Jcmd {
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<String>,
    },
}

fn parse_pid(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(0) => Err("0 is not a process id".to_owned()),
        Ok(pid) if i32::try_from(pid).is_ok() => Ok(pid),
        _ => Err(format!("{text:?} is not a process id")),
    }
}

#[derive(Debug, clap::Args)]
pub struct CaptureArgs {
    /// The agent: its OpAMP instance uid or its service.instance.id (the Instances view
    /// shows both)
    #[arg(long, value_name = "ID")]
    pub instance: String,
    /// CPU sampling interval (at least 1ms)
    #[arg(long, value_name = "DURATION")]
    pub cpu: Option<String>,
    /// Wall-clock sampling interval (at least 5ms)
    #[arg(long, value_name = "DURATION")]
    pub wall: Option<String>,
    /// Mean bytes between allocation samples (at least 16k)
    #[arg(long, value_name = "SIZE")]
    pub alloc: Option<String>,
    /// Mean bytes between the allocation samples tracked for the live heap (at least 16k)
    #[arg(long, value_name = "SIZE")]
    pub live: Option<String>,
    /// Lock waits at least this long are all recorded (at least 1ms)
    #[arg(long, value_name = "DURATION")]
    pub lock: Option<String>,
    /// How long the capture lasts, 1 to 600
    #[arg(long, value_name = "N")]
    pub seconds: u64,
    /// The otelprof serve to ask (its UI's URL, http:// or https://)
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:4040")]
    pub server: String,
    /// The token serve was started with
    #[arg(
        long,
        value_name = "TOKEN",
        env = "OTELPROF_RECEIVE_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// PEM certificates to trust for an https:// --server (serve's own certificate, or its CA),
    /// besides the Mozilla roots
    #[arg(long, value_name = "PEM")]
    pub cacert: Option<PathBuf>,
    /// Wait until the capture is over, not only until the agent started it
    #[arg(long)]
    pub wait: bool,
    /// Longest wait for the agent's answer (it reads the server when it polls)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Clock {
    /// Per-thread CPU-time timers: samples land on the threads that burn CPU.
    Cpu,
    /// One process-wide setitimer(ITIMER_PROF).
    Itimer,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Directory the profiles are written to, created if missing [default: ./otel-bridges]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// CPU sampling interval, e.g. 10ms
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub cpu: Option<Duration>,
    /// How much time each profile covers, e.g. 10s
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub period: Option<Duration>,
    /// Timer that drives CPU sampling
    #[arg(long, value_enum)]
    pub clock: Option<Clock>,
    /// Deepest stack recorded, in frames
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: Option<u32>,
    /// Agent library [default: $OTELPROF_AGENT, else libotelprof.so beside this executable]
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// More agent options, `key=value` pairs joined by commas, appended verbatim
    #[arg(long, value_name = "STR")]
    pub agent_options: Option<String>,
    /// The command to profile and its arguments, e.g. `java -jar app.jar`
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

#[derive(Debug, clap::Args)]
pub struct ReceiveArgs {
    /// Directory the received profiles are stored in (created if missing), or a prefix in
    /// object storage: s3://bucket/prefix (gs://, az://; each request is acknowledged once its
    /// object is written)
    #[arg(long, value_name = "STORE")]
    pub store: PathBuf,
    /// gRPC listen address, or `off`
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_GRPC)]
    pub grpc: String,
    /// HTTP listen address, or `off`
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_HTTP)]
    pub http: String,
    /// Require `Authorization: Bearer TOKEN` on every request (required, or TLS, to listen
    /// beyond loopback)
    #[arg(
        long,
        value_name = "TOKEN",
        env = "OTELPROF_RECEIVE_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Serve TLS with this PEM certificate chain (with --tls-key)
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Largest request accepted, compressed or inflated (`k`, `m` suffixes)
    #[arg(long, value_name = "SIZE", default_value = "32m", value_parser = parse_size)]
    pub max_request_size: usize,
    /// Most connections open at once, over both listeners; at the limit the longest idle
    /// one is closed for each new client [default: what the open-file limit allows, after
    /// a reserve for the store; at most 1024]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Delete what is older than this, in whole hours (columnar store) and days (raw
    /// requests, metrics), e.g. `7d` [default: keep everything]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub retention: Option<Duration>,
    /// Keep each raw OTLP request (replayable into any backend) this long after it arrived,
    /// or `forever`; its profiles stay in the columnar store, which is what readers read
    #[arg(long = "keep-otlp", value_name = "DURATION", default_value = "1h", value_parser = parse_keep)]
    pub keep_otlp: Keep,
    /// How often the store is converted and compacted. With several receivers on one store
    /// in a bucket, one at a time does it, holding a lease that lasts five of these: a
    /// stopped receiver's work is taken over that long after its last pass
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub maintain_every: Duration,
    /// How long after its end an hour is compacted into one file (profiles exported late
    /// still arrive in it); requests are converted into the columnar store in 10-minute
    /// chunks of receipt time, 2 minutes after a chunk ends, both shortened to this when it is
    /// shorter. Under 2m (for tests), a request must be written within this time of its
    /// arrival, or a conversion may pass it by
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = parse_duration)]
    pub settle: Duration,
    /// Print nothing but errors
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// The store (`receive`/`serve --store`)
    #[arg(long, value_name = "DIR")]
    pub store: PathBuf,
    /// Delete what is older than this, in whole hours and days, e.g. `7d` [default: keep
    /// everything]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub retention: Option<Duration>,
    /// Remove each raw OTLP request this long after it arrived (once converted), or
    /// `forever` to keep them
    #[arg(long = "keep-otlp", value_name = "DURATION", default_value = "1h", value_parser = parse_keep)]
    pub keep_otlp: Keep,
}

/// How long something is kept: a duration, or forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep(pub Option<Duration>);

fn parse_keep(text: &str) -> Result<Keep, String> {
    if text == "forever" {
        return Ok(Keep(None));
    }
    parse_duration(text)
        .map(|d| Keep(Some(d)))
        .map_err(|e| format!("{e} (or `forever`)"))
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub receive: ReceiveArgs,
    /// Web UI listen address (loopback by default; any other address needs --token, which
    /// the UI then asks for)
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_UI)]
    pub ui: String,
}

/// Default address of `serve`'s UI: Pyroscope's port, on loopback.
pub const DEFAULT_UI: &str = "127.0.0.1:4040";

/// The selection every reading command shares: which of the profiles' samples count.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SelectArgs {
    /// Keep samples whose resource or sample attribute KEY equals VALUE (`KEY!=VALUE`:
    /// differs), e.g. service.version=1.5, span_name='GET /cart', thread.name=main; repeat
    /// to require several
    #[arg(long = "where", short = 'w', value_name = "KEY=VALUE")]
    pub conditions: Vec<String>,
    /// Keep samples taken in this trace (32 hex digits)
    #[arg(long, value_name = "HEX")]
    pub trace_id: Option<String>,
    /// Keep samples taken in this span (16 hex digits); repeatable
    #[arg(long, value_name = "HEX")]
    pub span_id: Vec<String>,
    /// Keep samples from this time on: RFC 3339, a date, Unix seconds, or now-15m
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Keep samples before this time (same forms as --from)
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Profile type: cpu, wall, alloc, lock or live (the live heap: the latest snapshot of
    /// each instance, never a sum over time) [default: cpu when present]
    #[arg(long = "type", value_name = "TYPE", value_parser = parse_type)]
    pub ty: Option<ProfileType>,
    /// What to add up, one unit at a time: time (cpu, wall) or samples; bytes (alloc) or
    /// objects; delay (lock) or contentions [default: time, bytes, delay]
    #[arg(long, value_name = "VALUE")]
    pub value: Option<String>,
    /// Break functions down to source lines: `Class.method (File.java:123)`
    #[arg(long)]
    pub lines: bool,
    #[command(flatten)]
    pub focus: FocusArgs,
}

/// Focus, shared by every reading command: which stacks and frames to keep.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct FocusArgs {
    /// Keep only stacks with a frame matching GLOB (`*` for any run of characters, matched
    /// against the whole `pkg.Class.method`, e.g. 'com.mycompany.*'); repeatable: any
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// Drop stacks with a frame matching GLOB; repeatable
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Remove frames matching GLOB from every stack (e.g. 'java.*' wrappers); a stack left
    /// empty is dropped; repeatable
    #[arg(long, value_name = "GLOB")]
    pub hide: Vec<String>,
}

impl SelectArgs {
    /// Only these `--where` conditions.
    pub fn conditions(conditions: &[&str]) -> SelectArgs {
        SelectArgs {
            conditions: conditions.iter().map(|c| (*c).to_owned()).collect(),
            ..SelectArgs::default()
        }
    }
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
    /// The trend of the functions matching GLOB (as --include matches): their total and self
    /// in each time bucket, their share of the selection, and per request where the store
    /// has request counts
    #[arg(long, value_name = "GLOB", conflicts_with_all = ["by", "by_thread"])]
    pub trend: Option<String>,
    /// Time buckets of --trend, at most [default: 20]
    #[arg(long, value_name = "N", requires = "trend",
          value_parser = clap::value_parser!(u16).range(2..=500))]
    pub buckets: Option<u16>,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

/// How `findings` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FindingsFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct FindingsArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Output format: text, or json (for alerting)
    #[arg(long, value_enum, default_value = "text")]
    pub format: FindingsFormat,
    /// Exit with code 3 when a finding of this severity or above is present
    /// (info, warning, critical): a CI gate
    #[arg(long, value_name = "SEVERITY", value_parser = ["info", "warning", "critical"])]
    pub fail_on: Option<String>,
    /// A baseline: comma-separated KEY=VALUE (KEY!=VALUE) terms, and from=TIME, to=TIME, e.g.
    /// service.version=1.4. Findings also present there (the same rule and method, at any
    /// severity) are marked old, and --fail-on counts only the new ones. The focus flags apply
    /// to it too; --where, --from and --to do not.
    #[arg(long, value_name = "SELECTOR", allow_hyphen_values = true)]
    pub new_against: Option<String>,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct LeaksArgs {
    /// Keep samples whose resource or sample attribute KEY equals VALUE (`KEY!=VALUE`:
    /// differs); repeat to require several
    #[arg(long = "where", short = 'w', value_name = "KEY=VALUE")]
    pub conditions: Vec<String>,
    /// Snapshots from this time on: RFC 3339, a date, Unix seconds, or now-6h
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Snapshots before this time (same forms as --from)
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Focus (a hidden method leaves a site to be named by the next method out)
    #[command(flatten)]
    pub focus: FocusArgs,
    /// Snapshots an instance needs for its sites to be tested
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub min_snapshots: usize,
    /// Also list the sites tested that are not candidates, this many (0: none)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub all: usize,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct TracesArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Traces to print
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: u32,
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

/// `otelprof callers` and `otelprof callees`.
#[derive(Debug, clap::Args)]
pub struct ButterflyArgs {
    /// The function: `pkg.Class.method`, `*` for any run of characters (e.g. '*.findProduct',
    /// 'com.shop.Cart.*'); each matching function gets its own tree
    #[arg(value_name = "GLOB")]
    pub function: String,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Levels shown below each function
    #[arg(long, value_name = "N", default_value = "8", value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: u32,
    /// Paths under this share of their function's total (percent) are left out
    #[arg(long, value_name = "PCT", default_value = "1")]
    pub min: f64,
    /// Also draw the tree as a flame graph: *.html or *.svg
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
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
    /// e.g. service.version=1.4 [default: everything selected, within --base-from/--base-to]
    #[arg(
        long,
        value_name = "SELECTOR",
        allow_hyphen_values = true,
        default_value = ""
    )]
    pub base: String,
    /// The selection compared to the baseline, e.g. service.version=1.5
    #[arg(
        long,
        value_name = "SELECTOR",
        allow_hyphen_values = true,
        default_value = ""
    )]
    pub head: String,
    #[command(flatten)]
    pub ranges: DiffRanges,
    /// Applies to both sides
    #[command(flatten)]
    pub select: SelectArgs,
    /// Key of the per-endpoint table: CPU per request where request counts exist (OTLP metric
    /// http.server.request.duration in the store), else shares
    #[arg(long, value_name = "KEY", default_value = "span_name")]
    pub by: String,
    /// Rows per ranking, 0 for all
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub limit: usize,
    /// Write a differential flame graph: *.html or *.svg
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit with code 3 when the samples show that a function's share (self or total) grew
    /// by more than PCT percentage points, at the false discovery rate (CPU profiles)
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// False discovery rate of the significance tests, in percent: the expected share of
    /// noise among the changes starred
    #[arg(long, value_name = "PCT", default_value_t = DEFAULT_FDR_PERCENT)]
    pub fdr: f64,
    /// Store directories, profile directories, or OTLP/pprof files
    #[arg(required = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

/// `diff --fdr` unless given: 1 %.
pub const DEFAULT_FDR_PERCENT: f64 = 1.0;

/// Each side's own time range (times as --from reads them), e.g. the last hour against the
/// same hour yesterday: --base-from now-25h --base-to now-24h --head-from now-1h.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DiffRanges {
    /// The baseline's samples from this time on
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub base_from: Option<String>,
    /// The baseline's samples before this time
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub base_to: Option<String>,
    /// The compared side's samples from this time on
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub head_from: Option<String>,
    /// The compared side's samples before this time
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub head_to: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory for the store, the compiled service and the flame graphs (emptied first)
    #[arg(long, value_name = "DIR", default_value = "otelprof-demo")]
    pub dir: PathBuf,
    /// Seconds of load per version
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(3..=600))]
    pub seconds: u32,
    /// JDK home to use [default: $JAVA_HOME, else java and javac on the PATH]
    #[arg(long, value_name = "DIR")]
    pub jdk: Option<PathBuf>,
    /// Agent library [default: libotelprof.so beside this executable]
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
}

fn parse_type(text: &str) -> Result<ProfileType, String> {
    ProfileType::parse(text).map_err(|e| e.to_string())
}

/// A positive duration in the workspace's one grammar ([`otelprof_primitives::units`]).
fn parse_duration(text: &str) -> Result<Duration, String> {
    match otelprof_primitives::units::parse_duration(text) {
        Ok(d) if d.is_zero() => Err(format!("{text:?} is zero: give a positive duration")),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// A size in bytes, zero allowed, in the workspace's one grammar
/// ([`otelprof_primitives::units`]).
fn parse_size_u64(text: &str) -> Result<u64, String> {
    otelprof_primitives::units::parse_size(text).map_err(|e| e.to_string())
}

/// A positive size in bytes, in the workspace's one grammar ([`otelprof_primitives::units`]).
fn parse_size(text: &str) -> Result<usize, String> {
    let size = otelprof_primitives::units::parse_size(text).map_err(|e| e.to_string())?;
    match usize::try_from(size) {
        Ok(0) => Err(format!("{text:?} is zero: give a positive size")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is out of range")),
    }
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

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(
            parse_keep("7d").unwrap(),
            Keep(Some(Duration::from_secs(7 * 86400)))
        );
        assert_eq!(parse_keep("forever").unwrap(), Keep(None));
        assert!(parse_keep("never").unwrap_err().contains("forever"));
        // One grammar with the agent's options and `now-15m`: `10 ms` and `5d` are durations
        // now (they were rejected by the CLI's own parser before).
        assert_eq!(parse_duration("10 ms").unwrap(), Duration::from_millis(10));
        assert_eq!(
            parse_duration("5d").unwrap(),
            Duration::from_secs(5 * 86_400)
        );
        for bad in ["10", "ms", "", "0s", "1.2.3s", "-1s", "1e3s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32m").unwrap(), 32 << 20);
        assert_eq!(parse_size("512k").unwrap(), 512 << 10);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        for bad in ["", "m", "0", "-1", "1x", "99999999999999999999g"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
