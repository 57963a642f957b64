//! Agent options: `key=value,key=value` from `-agentpath:libotelprof.so=<options>`.
//!
//! Parsing is strict: an unknown key or a malformed value is an error naming the option, and
//! the agent then stays off (the JVM runs normally). A typo must never silently profile with
//! defaults the user did not ask for. The keys and their rules are the workspace's one table
//! (`otelprof_agent_options`), which `otelprof attach` and the OpAMP bounds read too; this
//! file stores what it accepts, and checks what only the agent can (a directory exists).
//!
//! `backend=pyroscope` (or `OTELPROF_BACKEND`) is a preset of the table's: it sets the
//! defaults of a few options and refuses values that would take exports outside the
//! backend's limits (`otelprof_agent_options::backend`).
//!
//! Errors quote what was given through [`echo`]: at most 64 characters, control characters
//! escaped. Options come from command lines and `JAVA_TOOL_OPTIONS`, and the error line lands
//! in the application's log; a pasted megabyte or an escape sequence must not land with it.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use otel_bridge::otlp::LinkTarget;
use otelprof_agent_options::backend::{self, Preset};
use otelprof_agent_options::{check_item, items, known_keys, Problem, Value};
use otelprof_exporter::config::echo;

use crate::log::LogLevel;

/// OTLP protocols, as `OTEL_EXPORTER_OTLP_PROTOCOL` spells them.
pub(crate) use otelprof_exporter::Protocol;

/// How CPU samples are triggered (README, "CPU engines").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// `perf` when the kernel allows per-thread perf events that count kernel time, else
    /// `cpu` (the default).
    Auto,
    /// One perf_events `cpu-clock` event per thread (hrtimer-driven: the interval asked is
    /// the interval sampled), with kernel call chains where allowed; user time only where
    /// the kernel allows no more.
    Perf,
    /// One POSIX timer per thread on that thread's CPU-time clock (`timer_create`),
    /// delivering SIGPROF to that thread: accurate per-thread CPU attribution, checked on the
    /// scheduler tick.
    ThreadCpu,
    /// One process-wide `setitimer(ITIMER_PROF)`: the kernel picks the thread. Fallback for
    /// systems where per-thread timers are unavailable.
    Itimer,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Options {
    /// CPU sampling interval; `None` when CPU profiling is off (`cpu=off`).
    pub(crate) cpu_interval: Option<Duration>,
    pub(crate) clock: Clock,
    /// Maximum frames per stack; deeper stacks are truncated at the root end.
    pub(crate) max_depth: u32,
    /// Directory for pprof files.
    pub(crate) out_dir: Option<PathBuf>,
    /// `out=none`: no pprof files at all, not even in the working directory when nothing is
    /// exported (a dump's `file=` still writes; `otelprof profile` takes its profile so).
    pub(crate) files_off: bool,
    /// How often a profile is cut and written.
    pub(crate) period: Duration,
    pub(crate) log: LogLevel,
    /// OTLP base endpoint (`endpoint=`), like `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub(crate) endpoint: Option<String>,
    /// OTLP protocol (`protocol=`), like `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub(crate) protocol: Option<Protocol>,
    /// `service.name` (`service=`); wins over `OTEL_SERVICE_NAME`.
    pub(crate) service: Option<String>,
    /// Send sample timestamps in OTLP (`timestamps=on`; Elastic needs them).
    pub(crate) timestamps: bool,
    /// Send `thread.id` as an OTLP sample attribute (`thread_id=on`). Off by default:
    /// Pyroscope makes sample attributes series labels, and thread ids multiply series.
    pub(crate) thread_id: bool,
    /// What each sample's OTLP link names (`links=`).
    pub(crate) links: LinkTarget,
    /// Send the trace id in OTLP links (`link_trace_id=`).
    pub(crate) link_trace_id: bool,
    /// The backend preset in force (`backend=`, or `OTELPROF_BACKEND`): it set the defaults
    /// above, and the exporter keeps each profile within its bounds.
    pub(crate) backend: Option<&'static Preset>,
    /// Bound of the OTLP export queue in bytes (`queue=`).
    pub(crate) queue_bytes: usize,
    /// Wall-clock sampling interval (`wall=`); `None` when off (the default).
    pub(crate) wall_interval: Option<Duration>,
    /// Most threads signalled per wall-clock interval (`wall_threads=`).
    pub(crate) wall_threads: u32,
    /// Mean bytes between allocation samples (`alloc=`; 0 samples every object); `None`
    /// when off (the default).
    pub(crate) alloc_interval: Option<u32>,
    /// Mean bytes between the allocation samples tracked for the live heap (`live=`): the
    /// same sampler as `alloc=`, each keeping its own share of the samples. `None` when off
    /// (the default).
    pub(crate) live_interval: Option<u32>,
    /// Most allocation samples per second (`alloc_rate=`; 0: no bound): above it the
    /// interval grows until the rate fits, and shrinks back when allocation slows down.
    pub(crate) alloc_rate: u32,
    /// Monitor waits at least this long are all recorded; shorter ones are sampled in
    /// proportion to their length (`lock=`; 0 records every contended wait). `None` when
    /// off (the default).
    pub(crate) lock_threshold: Option<Duration>,
    /// OpAMP server to be managed by (`opamp=`, full URL); wins over
    /// `OTELPROF_OPAMP_ENDPOINT`.
    pub(crate) opamp: Option<String>,
    /// How often the OpAMP client polls (`opamp_interval=`).
    pub(crate) opamp_interval: Option<Duration>,
    /// The id of the OpAMP capture this session runs for (never an option: set by the
    /// agent when a server starts a capture); its profiles' samples carry it.
    pub(crate) capture_id: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cpu_interval: Some(Duration::from_millis(10)),
            clock: Clock::Auto,
            max_depth: 2048,
            out_dir: None,
            files_off: false,
            period: Duration::from_secs(60),
            log: LogLevel::Info,
            endpoint: None,
            protocol: None,
            service: None,
            timestamps: false,
            thread_id: false,
            links: LinkTarget::Span,
            link_trace_id: true,
            backend: None,
            queue_bytes: otelprof_exporter::config::DEFAULT_QUEUE_BYTES,
            wall_interval: None,
            wall_threads: DEFAULT_WALL_THREADS,
            alloc_interval: None,
            live_interval: None,
            alloc_rate: DEFAULT_ALLOC_RATE,
            lock_threshold: None,
            opamp: None,
            opamp_interval: None,
            capture_id: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OptionError {
    #[error("unknown option '{}' (known: {})", echo(.0), known_keys())]
    UnknownKey(String),
    #[error("option '{key}' needs a value, as in {key}={example}")]
    MissingValue { key: String, example: &'static str },
    #[error("option '{key}={}': {reason}", echo(.value))]
    BadValue {
        key: String,
        value: String,
        reason: String,
    },
    #[error("option '{}' is given twice", echo(.0))]
    Duplicate(String),
    #[error("{name}=\"{}\": {reason}", echo(.value))]
    BadVariable {
        name: &'static str,
        value: String,
        reason: String,
    },
}

pub(crate) const DEFAULT_WALL_THREADS: u32 = 16;
/// Default bound of allocation samples per second: the cost of a sample is mostly HotSpot's
/// GetStackTrace (several µs for a deep stack), so this caps allocation profiling near 0.5 %
/// of one CPU however fast the application allocates. JFR bounds its allocation samples the
/// same way (150/s in its default settings, 300/s in `profile`).
pub(crate) const DEFAULT_ALLOC_RATE: u32 = 500;

impl Options {
    /// Reads `key=value,…`: each item checked against the options' table, then stored.
    #[cfg(test)]
    pub(crate) fn parse(s: &str) -> Result<Options, OptionError> {
        Options::parse_with(s, None)
    }

    /// [`Options::parse`], with `backend_variable` (the value of `OTELPROF_BACKEND`) naming
    /// the preset when no `backend=` does. A preset sets its defaults for the options not
    /// given, and refuses given values it cannot go with.
    pub(crate) fn parse_with(
        s: &str,
        backend_variable: Option<&str>,
    ) -> Result<Options, OptionError> {
        let mut o = Options::default();
        let mut given: Vec<(&str, &str, Value<'_>)> = Vec::new();
        for item in items(s) {
            let (key, value) = item.map_err(|d| OptionError::Duplicate(d.0.to_owned()))?;
            let bad = |reason: String| OptionError::BadValue {
                key: key.to_owned(),
                value: value.to_owned(),
                reason,
            };
            let checked = match check_item(key, value) {
                Ok((_, checked)) => checked,
                Err(Problem::Unknown) => return Err(OptionError::UnknownKey(key.to_owned())),
                Err(Problem::MissingValue { example }) => {
                    return Err(OptionError::MissingValue {
                        key: key.to_owned(),
                        example,
                    })
                }
                Err(Problem::BadValue(reason)) => return Err(bad(reason)),
            };
            o.set(key, checked)
                .map_err(|reason| bad(reason.to_owned()))?;
            given.push((key, value, checked));
        }
        let named = given.iter().find(|(k, _, _)| *k == "backend");
        let preset = match (named, backend_variable.map(str::trim)) {
            (Some((_, name, _)), _) => backend::find(name),
            (None, Some(name)) if !name.is_empty() => match check_item("backend", name) {
                Ok(_) => backend::find(name),
                Err(Problem::BadValue(reason)) => {
                    return Err(OptionError::BadVariable {
                        name: backend::ENV,
                        value: name.to_owned(),
                        reason,
                    })
                }
                // The key is the table's and the value not empty.
                Err(Problem::Unknown | Problem::MissingValue { .. }) => None,
            },
            _ => None,
        };
        if let Some(preset) = preset {
            o.apply_preset(preset, &given)?;
        }
        Ok(o)
    }

    /// Sets `preset`'s defaults for the options not `given`, after refusing given values it
    /// cannot go with.
    fn apply_preset(
        &mut self,
        preset: &'static Preset,
        given: &[(&str, &str, Value<'_>)],
    ) -> Result<(), OptionError> {
        for (key, text, value) in given {
            if let Some(reason) = preset.refuses(key, text, value) {
                return Err(OptionError::BadValue {
                    key: (*key).to_owned(),
                    value: (*text).to_owned(),
                    reason,
                });
            }
        }
        for (key, text) in preset.defaults {
            if given.iter().any(|(k, _, _)| k == key) {
                continue;
            }
            let bad = |reason: String| OptionError::BadValue {
                key: (*key).to_owned(),
                value: (*text).to_owned(),
                reason,
            };
            // The preset's own test holds its defaults to the table.
            let (_, value) = check_item(key, text).map_err(|_| bad("not a value".into()))?;
            self.set(key, value).map_err(|r| bad(r.to_owned()))?;
        }
        self.backend = Some(preset);
        Ok(())
    }

    /// Stores one value the table has checked; what only the agent can check (that `out` is
    /// a directory) is refused here, with the reason.
    fn set(&mut self, key: &str, value: Value<'_>) -> Result<(), &'static str> {
        use Value::{Duration as D, Number as N, Off, Size as S, Text as T};
        match (key, value) {
            ("cpu", v) => self.cpu_interval = interval(v),
            ("wall", v) => self.wall_interval = interval(v),
            ("lock", v) => self.lock_threshold = interval(v),
            ("period", D(d)) => self.period = d,
            ("opamp_interval", D(d)) => self.opamp_interval = Some(d),
            ("alloc", Off) => self.alloc_interval = None,
            // The table's bounds make the numbers fit: a jint, 1024 threads, 8192 frames.
            ("alloc", S(n)) => self.alloc_interval = Some(fit(n)?),
            ("live", Off) => self.live_interval = None,
            ("live", S(n)) => self.live_interval = Some(fit(n)?),
            ("wall_threads", N(n)) => self.wall_threads = fit(n)?,
            ("depth", N(n)) => self.max_depth = fit(n)?,
            ("alloc_rate", N(n)) => self.alloc_rate = fit(n)?,
            ("queue", S(n)) => {
                self.queue_bytes = usize::try_from(n).map_err(|_| "size too large")?
            }
            ("clock", T("itimer")) => self.clock = Clock::Itimer,
            ("clock", T("perf")) => self.clock = Clock::Perf,
            ("clock", T("auto")) => self.clock = Clock::Auto,
            ("clock", T(_)) => self.clock = Clock::ThreadCpu,
            ("log", T(w)) => self.log = log_level(w)?,
            ("timestamps", T(w)) => self.timestamps = w == "on",
            ("thread_id", T(w)) => self.thread_id = w == "on",
            ("links", T(w)) => {
                self.links = if w == "local_root" {
                    LinkTarget::LocalRoot
                } else {
                    LinkTarget::Span
                }
            }
            ("link_trace_id", T(w)) => self.link_trace_id = w == "on",
            // Applied once every item is read (`parse_with`): defaults never beat a given option.
            ("backend", T(_)) => {}
            ("protocol", T(w)) => {
                self.protocol =
                    Some(Protocol::parse(w).ok_or("expected 'grpc' or 'http/protobuf'")?)
            }
            ("service", T(t)) => self.service = Some(t.to_owned()),
            ("endpoint", T(t)) => self.endpoint = Some(t.to_owned()),
            ("opamp", T(t)) => self.opamp = Some(t.to_owned()),
            ("out", T("none")) => {
                self.out_dir = None;
                self.files_off = true;
            }
            ("out", T(t)) => {
                let dir = PathBuf::from(t);
                if !dir.is_dir() {
                    return Err("no such directory");
                }
                self.out_dir = Some(dir);
            }
            // The table gives each key one kind of value: nothing else arrives here.
            _ => return Err("not a value this option takes"),
        }
        Ok(())
    }

    /// The profile types in force, e.g. `cpu=10ms wall=50ms alloc=512 KiB lock=10ms` (for
    /// status replies and the start line).
    pub(crate) fn types(&self) -> String {
        let mut t = Vec::new();
        if let Some(i) = self.cpu_interval {
            t.push(format!("cpu={i:?}"));
        }
        if let Some(i) = self.wall_interval {
            t.push(format!("wall={i:?}"));
        }
        if let Some(b) = self.alloc_interval {
            t.push(format!(
                "alloc={}",
                otelprof_exporter::config::format_size(u64::from(b))
            ));
        }
        if let Some(b) = self.live_interval {
            t.push(format!(
                "live={}",
                otelprof_exporter::config::format_size(u64::from(b))
            ));
        }
        if let Some(l) = self.lock_threshold {
            t.push(format!("lock={l:?}"));
        }
        t.join(" ")
    }

    /// Every option in force, defaults included, as `key=value` pairs (credentials in an
    /// endpoint shown as `***`).
    pub(crate) fn in_force(&self) -> String {
        let off = |d: Option<Duration>| d.map_or_else(|| "off".to_owned(), |d| format!("{d:?}"));
        let on_off = |b: bool| if b { "on" } else { "off" };
        let mut o = vec![
            format!("cpu={}", off(self.cpu_interval)),
            format!("clock={}", self.clock.name()),
            format!("wall={}", off(self.wall_interval)),
            format!("wall_threads={}", self.wall_threads),
            format!(
                "alloc={}",
                self.alloc_interval.map_or_else(
                    || "off".to_owned(),
                    |b| otelprof_exporter::config::format_size(u64::from(b))
                )
            ),
            format!(
                "live={}",
                self.live_interval.map_or_else(
                    || "off".to_owned(),
                    |b| otelprof_exporter::config::format_size(u64::from(b))
                )
            ),
            format!("alloc_rate={}", self.alloc_rate),
            format!("lock={}", off(self.lock_threshold)),
            format!("depth={}", self.max_depth),
            format!("period={:?}", self.period),
        ];
        if let Some(d) = &self.out_dir {
            o.push(format!("out={}", d.display()));
        } else if self.files_off {
            o.push("out=none".to_owned());
        }
        if let Some(e) = &self.endpoint {
            o.push(format!(
                "endpoint={}",
                otelprof_exporter::config::shown_endpoint(e)
            ));
        }
        if let Some(s) = &self.service {
            o.push(format!("service={s}"));
        }
        o.push(format!("timestamps={}", on_off(self.timestamps)));
        o.push(format!("thread_id={}", on_off(self.thread_id)));
        o.push(format!(
            "links={}",
            match self.links {
                LinkTarget::Span => "span",
                LinkTarget::LocalRoot => "local_root",
            }
        ));
        o.push(format!("link_trace_id={}", on_off(self.link_trace_id)));
        if let Some(preset) = self.backend {
            o.push(format!("backend={}", preset.name));
        }
        o.join(",")
    }
}

impl Clock {
    /// The option's word for it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Clock::Auto => "auto",
            Clock::Perf => "perf",
            Clock::ThreadCpu => "cpu",
            Clock::Itimer => "itimer",
        }
    }
}

/// An interval, or `None` for `off`.
fn interval(v: Value<'_>) -> Option<Duration> {
    match v {
        Value::Duration(d) => Some(d),
        _ => None,
    }
}

fn fit<T: TryFrom<u64>>(n: u64) -> Result<T, &'static str> {
    T::try_from(n).map_err(|_| "out of range")
}

fn log_level(word: &str) -> Result<LogLevel, &'static str> {
    match word {
        "quiet" => Ok(LogLevel::Quiet),
        "warn" => Ok(LogLevel::Warn),
        "info" => Ok(LogLevel::Info),
        "debug" => Ok(LogLevel::Debug),
        _ => Err("expected quiet, warn, info or debug"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_full_set() {
        assert_eq!(Options::parse("").unwrap(), Options::default());
        let dir = std::env::temp_dir();
        let o = Options::parse(&format!(
            "cpu=1ms,clock=itimer,depth=64,out={},period=10s,log=debug",
            dir.display()
        ))
        .unwrap();
        assert_eq!(o.cpu_interval, Some(Duration::from_millis(1)));
        assert_eq!(o.clock, Clock::Itimer);
        assert_eq!(o.max_depth, 64);
        assert_eq!(o.out_dir, Some(dir));
        assert_eq!(o.period, Duration::from_secs(10));
        assert_eq!(o.log, LogLevel::Debug);
        assert_eq!(Options::parse("cpu=off").unwrap().cpu_interval, None);
        let o = Options::parse(
            "endpoint=https://collector.example:4317,protocol=grpc,service=shop,timestamps=on,queue=1m",
        )
        .unwrap();
        assert_eq!(
            o.endpoint.as_deref(),
            Some("https://collector.example:4317")
        );
        assert_eq!(o.protocol, Some(Protocol::Grpc));
        assert_eq!(o.service.as_deref(), Some("shop"));
        assert!(o.timestamps);
        assert_eq!(o.queue_bytes, 1 << 20);
        assert!(!o.thread_id);
        assert!(Options::parse("thread_id=on").unwrap().thread_id);
        let o = Options::parse("opamp=http://127.0.0.1:4040/v1/opamp,opamp_interval=2s").unwrap();
        assert_eq!(o.opamp.as_deref(), Some("http://127.0.0.1:4040/v1/opamp"));
        assert_eq!(o.opamp_interval, Some(Duration::from_secs(2)));
        let o = Options::parse("protocol=http/protobuf,timestamps=off,queue=65536").unwrap();
        assert_eq!(o.protocol, Some(Protocol::HttpProtobuf));
        assert!(!o.timestamps);
        assert_eq!(o.endpoint, None);
        assert_eq!(Options::default().queue_bytes, 16 << 20);
    }

    #[test]
    fn durations_and_sizes_share_the_workspace_grammar() {
        let o = Options::parse("cpu=1.5ms,period=1m30s,wall=PT0.05S,queue=16M").unwrap();
        assert_eq!(o.cpu_interval, Some(Duration::from_micros(1500)));
        assert_eq!(o.period, Duration::from_secs(90));
        assert_eq!(o.wall_interval, Some(Duration::from_millis(50)));
        assert_eq!(o.queue_bytes, 16 << 20);
        // The agent's bounds still apply to what the grammar accepts.
        let e = Options::parse("period=0.5s").unwrap_err().to_string();
        assert!(e.contains("period=0.5s") && e.contains("1s"), "{e}");
        let e = Options::parse("cpu=-1ms").unwrap_err().to_string();
        assert!(e.contains("cpu=-1ms"), "{e}");
    }

    #[test]
    fn profile_types_parse_and_default_off() {
        let d = Options::default();
        assert_eq!(
            (d.wall_interval, d.alloc_interval, d.lock_threshold),
            (None, None, None)
        );
        assert_eq!(d.wall_threads, 16);
        let o = Options::parse("cpu=off,wall=50ms,wall_threads=4,alloc=512k,lock=10ms").unwrap();
        assert_eq!(o.cpu_interval, None);
        assert_eq!(o.wall_interval, Some(Duration::from_millis(50)));
        assert_eq!(o.wall_threads, 4);
        assert_eq!(o.alloc_interval, Some(512 << 10));
        assert_eq!(o.alloc_rate, 500, "bounded by default");
        assert_eq!(o.lock_threshold, Some(Duration::from_millis(10)));
        assert_eq!(Options::parse("alloc_rate=0").unwrap().alloc_rate, 0);
        assert_eq!(d.live_interval, None);
        let o = Options::parse("alloc=512k,live=256k").unwrap();
        assert_eq!(
            (o.alloc_interval, o.live_interval),
            (Some(512 << 10), Some(256 << 10))
        );
        assert_eq!(Options::parse("live=off").unwrap().live_interval, None);
        assert_eq!(Options::parse("alloc_rate=2000").unwrap().alloc_rate, 2000);
        let o = Options::parse("alloc=0,lock=0,wall=off").unwrap();
        assert_eq!(o.alloc_interval, Some(0));
        assert_eq!(o.lock_threshold, Some(Duration::ZERO));
        assert_eq!(o.wall_interval, None);
        let o = Options::parse("alloc=off,lock=off,lock_unused_check=1");
        assert!(o.is_err());
        assert_eq!(
            Options::parse("lock=0ms").unwrap().lock_threshold,
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn profile_type_errors_name_the_option() {
        for (opts, mention) in [
            ("wall=100us", "wall=100us"),
            ("wall=50", "wall=50"),
            ("wall", "needs a value"),
            ("wall_threads=0", "wall_threads=0"),
            ("wall_threads=2000", "wall_threads=2000"),
            ("alloc_rate=fast", "alloc_rate=fast"),
            ("alloc_rate=-1", "alloc_rate=-1"),
            ("alloc_rate=2000000", "alloc_rate=2000000"),
            ("wall_threads=many", "wall_threads=many"),
            ("alloc=3g", "alloc=3g"),
            ("alloc=lots", "alloc=lots"),
            ("live=0", "live=0"),
            ("live=3g", "live=3g"),
            ("lock=10", "lock=10"),
            ("lock=soon", "lock=soon"),
        ] {
            let e = Options::parse(opts).unwrap_err().to_string();
            assert!(e.contains(mention), "{opts}: {e}");
        }
        let e = Options::parse("walls=1ms").unwrap_err().to_string();
        assert!(e.contains("'walls'") && e.contains("wall_threads"), "{e}");
    }

    #[test]
    fn export_option_errors_name_the_option() {
        for (opts, mention) in [
            ("endpoint=collector:4317", "endpoint=collector:4317"),
            ("endpoint=http://", "endpoint=http://"),
            ("protocol=http/json", "protocol=http/json"),
            ("timestamps=yes", "timestamps=yes"),
            ("thread_id=1", "thread_id=1"),
            ("queue=1k", "queue=1k"),
            ("queue=12q", "queue=12q"),
            ("service", "needs a value"),
            ("opamp=127.0.0.1:4040", "opamp=127.0.0.1:4040"),
            ("opamp_interval=10ms", "opamp_interval=10ms"),
            ("opamp_interval=5", "opamp_interval=5"),
        ] {
            let e = Options::parse(opts).unwrap_err().to_string();
            assert!(e.contains(mention), "{opts}: {e}");
        }
    }

    #[test]
    fn out_none_turns_files_off_and_round_trips() {
        let o = Options::parse("out=none").unwrap();
        assert!(o.files_off && o.out_dir.is_none());
        assert!(o.in_force().contains("out=none"), "{}", o.in_force());
        let o = Options::parse("out=/tmp").unwrap();
        assert!(!o.files_off && o.out_dir.is_some());
    }

    #[test]
    fn errors_name_the_option() {
        let e = Options::parse("cpu=banana").unwrap_err().to_string();
        assert!(e.contains("cpu=banana"), "{e}");
        let e = Options::parse("nosuchkey=1").unwrap_err().to_string();
        assert!(e.contains("nosuchkey"), "{e}");
        let e = Options::parse("out=/nonexistent/dir")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("out=/nonexistent/dir") && e.contains("no such directory"),
            "{e}"
        );
        assert!(Options::parse("cpu=10")
            .unwrap_err()
            .to_string()
            .contains("unit"));
        assert!(Options::parse("cpu=10us").is_err());
        assert!(Options::parse("depth=0").is_err());
        assert!(Options::parse("depth=99999999999").is_err());
        assert!(Options::parse("cpu")
            .unwrap_err()
            .to_string()
            .contains("needs a value"));
        assert_eq!(
            Options::parse("cpu=1ms,cpu=2ms").unwrap_err(),
            OptionError::Duplicate("cpu".into())
        );
        assert!(Options::parse("period=99999999999999999999s").is_err());
    }

    #[test]
    fn echoed_values_are_cut_and_inert() {
        let long = "9".repeat(100_000);
        for opts in [
            format!("cpu={long}ms"),
            format!("queue={long}q"),
            format!("depth={long}"),
            format!("{long}=1"),
            format!("{long}=1,{long}=2"),
        ] {
            let e = Options::parse(&opts).unwrap_err().to_string();
            assert!(e.len() < 300, "{}: {e}", e.len());
            assert!(e.contains(&format!("{}…", "9".repeat(64))), "{e}");
        }
        let e = Options::parse("cpu=\x1b]0;pwned\x07\x1b[2J\u{202e}")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "option 'cpu=\\x1b]0;pwned\\x07\\x1b[2J\\u{202e}': not a duration (e.g. 10ms, 1.5s, 2m, 1h)"
        );
        let e = Options::parse("\x1b[31m=1").unwrap_err().to_string();
        assert!(e.starts_with("unknown option '\\x1b[31m'"), "{e}");
    }

    #[test]
    fn links_default_to_the_span_and_take_the_local_root() {
        let d = Options::default();
        assert_eq!(
            (d.links, d.link_trace_id, d.backend),
            (LinkTarget::Span, true, None)
        );
        let o = Options::parse("links=local_root,link_trace_id=off").unwrap();
        assert_eq!((o.links, o.link_trace_id), (LinkTarget::LocalRoot, false));
        assert!(Options::parse("links=root").is_err());
    }

    #[test]
    fn the_pyroscope_preset_sets_defaults_that_given_options_override() {
        let o = Options::parse("backend=pyroscope").unwrap();
        assert_eq!(o.backend, Some(&backend::PYROSCOPE));
        assert_eq!((o.links, o.link_trace_id), (LinkTarget::LocalRoot, false));
        assert_eq!(o.period, Duration::from_secs(15));
        let o = Options::parse("period=30s,backend=pyroscope,links=span,link_trace_id=on").unwrap();
        assert_eq!(o.period, Duration::from_secs(30));
        assert_eq!((o.links, o.link_trace_id), (LinkTarget::Span, true));
        // What it cannot go with is refused, naming the option.
        let e = Options::parse("backend=pyroscope,period=60s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("period=60s") && e.contains("30s"), "{e}");
        let e = Options::parse("thread_id=on,backend=pyroscope")
            .unwrap_err()
            .to_string();
        assert!(e.contains("thread_id=on") && e.contains("series"), "{e}");
        assert!(Options::parse("period=60s,thread_id=on").is_ok());
    }

    #[test]
    fn otelprof_backend_names_the_preset_unless_the_options_do() {
        let o = Options::parse_with("cpu=10ms", Some("pyroscope")).unwrap();
        assert_eq!(o.backend, Some(&backend::PYROSCOPE));
        assert_eq!(o.period, Duration::from_secs(15));
        let o = Options::parse_with("backend=none", Some("pyroscope")).unwrap();
        assert_eq!((o.backend, o.period), (None, Duration::from_secs(60)));
        assert_eq!(Options::parse_with("", Some(" ")).unwrap().backend, None);
        let e = Options::parse_with("", Some("tempo"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("OTELPROF_BACKEND=\"tempo\""), "{e}");
        // The variable's preset refuses what the options give against it.
        assert!(Options::parse_with("period=2m", Some("pyroscope")).is_err());
    }

    #[test]
    fn types_and_options_in_force_are_told_back() {
        let o = Options::parse("cpu=5ms,wall=20ms,alloc=256k,lock=1ms,out=/tmp").unwrap();
        assert_eq!(o.types(), "cpu=5ms wall=20ms alloc=256 KiB lock=1ms");
        let o = Options::parse("cpu=off,live=1m").unwrap();
        assert_eq!(o.types(), "live=1 MiB");
        assert!(o.in_force().contains(",live=1 MiB,"), "{}", o.in_force());
        let o = Options::parse("cpu=off,wall=10ms,endpoint=http://u:secret@h:4317").unwrap();
        assert_eq!(o.types(), "wall=10ms");
        let all = o.in_force();
        assert!(all.starts_with("cpu=off,clock=auto,wall=10ms,"), "{all}");
        assert_eq!(Options::parse("clock=perf").unwrap().clock, Clock::Perf);
        assert_eq!(Options::parse("clock=cpu").unwrap().clock, Clock::ThreadCpu);
        assert_eq!(Options::default().clock, Clock::Auto);
        assert!(
            all.contains("period=60s") && all.contains("depth=2048"),
            "{all}"
        );
        assert!(!all.contains("secret"), "credentials shown: {all}");
        assert!(all.ends_with(",links=span,link_trace_id=on"), "{all}");
        let all = Options::parse("backend=pyroscope").unwrap().in_force();
        assert!(
            all.ends_with(",links=local_root,link_trace_id=off,backend=pyroscope"),
            "{all}"
        );
    }
}
