//! The agent's options, written once: every key the agent takes (`-agentpath:…=key=value,…`,
//! `OTELPROF_OPTIONS`, `otelprof attach PID start`), what its value must be where the JVM
//! starts, what a management server may set of it over OpAMP and within which bounds, and an
//! example for messages. The agent's parser (`native/src/options.rs`), `otelprof attach`'s
//! check before it touches a JVM, and the OpAMP bounds (the opamp crate's `engines`) all read
//! [`OPTIONS`] through [`items`] and [`check_item`], so they cannot disagree.
//!
//! Two sets of bounds: the local ones are what the agent can do at all (`cpu=100us` is a
//! choice one may make for one JVM); the remote ones are stricter, since a management server
//! reaches a fleet at once and what it asks must not cost more than a profiler that people
//! leave on. Durations and sizes are read with the workspace's one grammar
//! (`otelprof_primitives::units`).
//!
//! What is checked here needs nothing but the text: whether an `out=` directory exists, and
//! where, is for the side that knows the JVM's files.
#![forbid(unsafe_code)]

use std::time::Duration;

use otelprof_primitives::units::{
    format_duration, format_size, parse_duration, parse_size, UnitError,
};

/// What a value must be where the agent starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A duration of at least this, or `off`.
    DurationOrOff(Duration),
    /// `0`, `off`, or any duration.
    Threshold,
    /// A duration from the first bound to the second.
    Duration(Duration, Duration),
    /// A whole number from the first bound to the second.
    Number(u64, u64),
    /// A size from the first bound to the second, or `off`.
    SizeOrOff(u64, u64),
    /// A size of at least this.
    Size(u64),
    /// One of these words.
    Word(&'static [&'static str]),
    /// An `http://` or `https://` URL.
    Url,
    /// Any text.
    Text,
    /// A directory, checked by the side that knows the JVM's files.
    Dir,
}

/// What a management server may do with an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remote {
    /// Set an interval within these bounds.
    Interval { min: Duration, max: Duration },
    /// Set a size within these bounds.
    Size { min: u64, max: u64 },
    /// Never, for this reason (told to the server).
    Refused(&'static str),
    /// Nothing: not a profiling setting, so not offered (a server naming it gets "unknown").
    NotOffered,
}

/// One option: its key, its local and remote rules, and an example value for messages
/// (`option 'cpu' needs a value, as in cpu=10ms`).
#[derive(Clone, Copy, Debug)]
pub struct AgentOption {
    pub key: &'static str,
    pub kind: Kind,
    pub remote: Remote,
    pub example: &'static str,
}

/// A value as checked, for the side to store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Off,
    Duration(Duration),
    Number(u64),
    Size(u64),
    /// A word, a URL, a text or a directory, as given (trimmed).
    Text(&'a str),
}

/// Why one item was refused (the side words the message, quoting the item its own way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// No such option.
    Unknown,
    /// `key` or `key=` alone.
    MissingValue { example: &'static str },
    /// The value breaks the option's rule: the reason, without the value.
    BadValue(String),
}

/// A key given a second time: which of the two would win is a guess, so it is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplicate<'a>(pub &'a str);

/// The largest allocation interval: JVMTI's `SetHeapSamplingInterval` takes a `jint`.
pub const MAX_ALLOC: u64 = i32::MAX as u64;
/// The bounds of `opamp_interval` (also those of `OTELPROF_OPAMP_INTERVAL`).
pub const MIN_OPAMP_INTERVAL: Duration = Duration::from_millis(100);
pub const MAX_OPAMP_INTERVAL: Duration = Duration::from_secs(3600);

/// An interval from a server beyond an hour samples nothing within any capture or period.
const REMOTE_MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// Why a server may not set `out`.
pub const REFUSED_PATH: &str =
    "out is a path: a server may not choose where the agent writes files";
/// Why a server may not set where data goes or what is trusted.
pub const REFUSED_DESTINATION: &str =
    "a server may not choose where the agent sends data or whom it trusts";
/// Why a server may not set what only the JVM's start sets.
pub const REFUSED_AT_START: &str = "this option is set where the JVM starts, not remotely";
const ON_OFF: &[&str] = &["on", "off"];

/// Every option the agent knows, in the order messages list them.
pub const OPTIONS: [AgentOption; 23] = [
    AgentOption {
        key: "cpu",
        // Below 100us the signal handler's own cost dominates.
        kind: Kind::DurationOrOff(Duration::from_micros(100)),
        // From a server: at most 1,000 samples per second of CPU.
        remote: Remote::Interval {
            min: Duration::from_millis(1),
            max: REMOTE_MAX_INTERVAL,
        },
        example: "10ms",
    },
    AgentOption {
        key: "wall",
        // Every interval the wall thread wakes, reads thread states and sends up to
        // `wall_threads` signals.
        kind: Kind::DurationOrOff(Duration::from_millis(1)),
        remote: Remote::Interval {
            min: Duration::from_millis(5),
            max: REMOTE_MAX_INTERVAL,
        },
        example: "50ms",
    },
    AgentOption {
        key: "wall_threads",
        kind: Kind::Number(1, 1024),
        remote: Remote::NotOffered,
        example: "16",
    },
    AgentOption {
        key: "alloc",
        kind: Kind::SizeOrOff(0, MAX_ALLOC),
        // The agent's `alloc_rate` bound still applies on top.
        remote: Remote::Size {
            min: 16 << 10,
            max: MAX_ALLOC,
        },
        example: "512k",
    },
    AgentOption {
        key: "live",
        // The live heap: objects sampled at this mean interval are tracked until they die.
        // Shares the allocation sampler (and `alloc_rate`) with `alloc`. Not 0: tracking
        // every object would only fill the table, whose bound then raises the interval.
        kind: Kind::SizeOrOff(1 << 10, MAX_ALLOC),
        remote: Remote::Size {
            min: 16 << 10,
            max: MAX_ALLOC,
        },
        example: "512k",
    },
    AgentOption {
        key: "alloc_rate",
        kind: Kind::Number(0, 1_000_000),
        remote: Remote::NotOffered,
        example: "500",
    },
    AgentOption {
        key: "lock",
        kind: Kind::Threshold,
        // `lock=0`, every wait, is a local choice.
        remote: Remote::Interval {
            min: Duration::from_millis(1),
            max: REMOTE_MAX_INTERVAL,
        },
        example: "10ms",
    },
    AgentOption {
        key: "clock",
        // auto: perf events when the kernel allows them with kernel time, else cpu;
        // perf: perf events (user time only where the kernel allows no more); cpu: a POSIX
        // timer on each thread's CPU clock; itimer: one setitimer(ITIMER_PROF).
        kind: Kind::Word(&["auto", "perf", "cpu", "itimer"]),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "auto",
    },
    AgentOption {
        key: "depth",
        kind: Kind::Number(1, 8192),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "2048",
    },
    AgentOption {
        key: "out",
        kind: Kind::Dir,
        remote: Remote::Refused(REFUSED_PATH),
        example: "/var/tmp/profiles",
    },
    AgentOption {
        key: "period",
        kind: Kind::Duration(Duration::from_secs(1), Duration::MAX),
        remote: Remote::NotOffered,
        example: "60s",
    },
    AgentOption {
        key: "log",
        kind: Kind::Word(&["quiet", "warn", "info", "debug"]),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "info",
    },
    AgentOption {
        key: "endpoint",
        kind: Kind::Url,
        remote: Remote::Refused(REFUSED_DESTINATION),
        example: "http://localhost:4318",
    },
    AgentOption {
        key: "protocol",
        kind: Kind::Word(&["grpc", "http/protobuf"]),
        remote: Remote::Refused(REFUSED_DESTINATION),
        example: "grpc",
    },
    AgentOption {
        key: "service",
        kind: Kind::Text,
        remote: Remote::Refused(REFUSED_AT_START),
        example: "checkout",
    },
    AgentOption {
        key: "timestamps",
        kind: Kind::Word(ON_OFF),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "on",
    },
    AgentOption {
        key: "thread_id",
        kind: Kind::Word(ON_OFF),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "on",
    },
    AgentOption {
        key: "links",
        // What each sample's OTLP link names: the span the thread works for, or that span's
        // local root (the first span of its trace in this process), which is what Grafana's
        // traces-to-profiles asks Pyroscope for.
        kind: Kind::Word(&["span", "local_root"]),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "local_root",
    },
    AgentOption {
        key: "link_trace_id",
        // `off` sends links without their trace id: Pyroscope 1.20 to 2.0 make it a series
        // label, a series per trace.
        kind: Kind::Word(ON_OFF),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "off",
    },
    AgentOption {
        key: "backend",
        // A preset of the other options for one backend ([`backend`]); `none` undoes
        // OTELPROF_BACKEND.
        kind: Kind::Word(&["pyroscope", "none"]),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "pyroscope",
    },
    AgentOption {
        key: "queue",
        // One typical profile must fit.
        kind: Kind::Size(64 << 10),
        remote: Remote::Refused(REFUSED_AT_START),
        example: "16m",
    },
    AgentOption {
        key: "opamp",
        kind: Kind::Url,
        remote: Remote::Refused(REFUSED_DESTINATION),
        example: "http://127.0.0.1:4040/v1/opamp",
    },
    AgentOption {
        key: "opamp_interval",
        kind: Kind::Duration(MIN_OPAMP_INTERVAL, MAX_OPAMP_INTERVAL),
        remote: Remote::NotOffered,
        example: "5s",
    },
];

/// The option named `key`.
pub fn find(key: &str) -> Option<&'static AgentOption> {
    OPTIONS.iter().find(|o| o.key == key)
}

/// `cpu, wall, …`: every key, for the message about an unknown one.
pub fn known_keys() -> String {
    OPTIONS.iter().map(|o| o.key).collect::<Vec<_>>().join(", ")
}

/// The `key=value` items of an options text, in order: split at commas, trimmed, empty items
/// skipped, a bare `key` given an empty value; a key seen before is a [`Duplicate`].
pub fn items(options: &str) -> impl Iterator<Item = Result<(&str, &str), Duplicate<'_>>> {
    let mut seen: Vec<&str> = Vec::new();
    options
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(move |item| {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => (item, ""),
            };
            if seen.contains(&key) {
                return Err(Duplicate(key));
            }
            seen.push(key);
            Ok((key, value))
        })
}

/// Checks one item against the local rules: the option and its value, or the problem.
pub fn check_item<'a>(
    key: &str,
    value: &'a str,
) -> Result<(&'static AgentOption, Value<'a>), Problem> {
    let option = find(key).ok_or(Problem::Unknown)?;
    if value.is_empty() {
        return Err(Problem::MissingValue {
            example: option.example,
        });
    }
    let checked = option.check(value).map_err(Problem::BadValue)?;
    Ok((option, checked))
}

impl AgentOption {
    /// `value` (not empty) against the local rules, or the reason it is refused.
    pub fn check<'a>(&self, value: &'a str) -> Result<Value<'a>, String> {
        match self.kind {
            Kind::DurationOrOff(_) | Kind::SizeOrOff(..) | Kind::Threshold if value == "off" => {
                Ok(Value::Off)
            }
            // Zero needs no unit: every contended wait.
            Kind::Threshold if value == "0" => Ok(Value::Duration(Duration::ZERO)),
            Kind::Threshold => duration(value).map(Value::Duration),
            Kind::DurationOrOff(min) => within(duration(value)?, min, Duration::MAX),
            Kind::Duration(min, max) => within(duration(value)?, min, max),
            Kind::Number(min, max) => match value.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(Value::Number(n)),
                _ => Err(format!("expected a whole number from {min} to {max}")),
            },
            Kind::SizeOrOff(min, max) => match size(value)? {
                n if n < min => Err(format!("the smallest is {}", size_bound(min))),
                n if n <= max => Ok(Value::Size(n)),
                _ => Err(format!("the largest is {}", size_bound(max))),
            },
            Kind::Size(min) => match size(value)? {
                n if n >= min => Ok(Value::Size(n)),
                _ => Err(format!("the smallest is {}", size_bound(min))),
            },
            Kind::Word(words) if words.contains(&value) => Ok(Value::Text(value)),
            Kind::Word(words) => Err(format!("expected {}", words.join(" or "))),
            Kind::Url if is_url(value) => Ok(Value::Text(value)),
            Kind::Url => Err("expected an http:// or https:// URL".to_owned()),
            Kind::Text | Kind::Dir => Ok(Value::Text(value)),
        }
    }

    /// `value` as a management server sent it, against the remote bounds: an interval or a
    /// size, or the reason it is refused. Only for options a server may set
    /// ([`Remote::Interval`], [`Remote::Size`]).
    pub fn check_remote(&self, value: &str) -> Result<Value<'static>, String> {
        let key = self.key;
        match self.remote {
            Remote::Interval { min, max } => {
                let d = parse_duration(value).map_err(|e| format!("{key}: {e}"))?;
                if d < min {
                    return Err(format!(
                        "{key}={value} is below the shortest interval a server may ask for, {}",
                        format_duration(min)
                    ));
                }
                if d > max {
                    return Err(format!(
                        "{key}={value} is longer than {}",
                        duration_bound(max)
                    ));
                }
                Ok(Value::Duration(d))
            }
            Remote::Size { min, max } => {
                let n = parse_size(value).map_err(|e| format!("{key}: {e}"))?;
                if n < min {
                    return Err(format!(
                        "{key}={value} is below the smallest interval a server may ask for, {}",
                        format_size(min)
                    ));
                }
                if n > max {
                    return Err(format!(
                        "{key}={value}: the largest interval is {}",
                        size_bound(max)
                    ));
                }
                Ok(Value::Size(n))
            }
            Remote::Refused(why) => Err(why.to_owned()),
            Remote::NotOffered => Err(format!("{key} is not set remotely")),
        }
    }
}

impl Remote {
    /// Whether a server may set the option.
    pub fn settable(&self) -> bool {
        matches!(self, Remote::Interval { .. } | Remote::Size { .. })
    }

    /// The smallest value a server may ask for, in the options' grammar (`1ms`, `16k`).
    pub fn minimum(&self) -> Option<String> {
        match self {
            Remote::Interval { min, .. } => Some(format_duration(*min)),
            Remote::Size { min, .. } => Some(format_size(*min)),
            _ => None,
        }
    }
}

fn duration(value: &str) -> Result<Duration, String> {
    parse_duration(value).map_err(|e| unit_reason(&e).to_owned())
}

fn size(value: &str) -> Result<u64, String> {
    parse_size(value).map_err(|e| unit_reason(&e).to_owned())
}

fn within(d: Duration, min: Duration, max: Duration) -> Result<Value<'static>, String> {
    if d < min {
        Err(format!("the shortest is {}", duration_bound(min)))
    } else if d > max {
        Err(format!("the longest is {}", duration_bound(max)))
    } else {
        Ok(Value::Duration(d))
    }
}

fn is_url(value: &str) -> bool {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/'))
}

/// Why a duration or size was refused, without the value (the message quotes it once, cut).
pub fn unit_reason(e: &UnitError) -> &'static str {
    match e {
        UnitError::NoUnit(_) => "a duration needs a unit, e.g. 10ms",
        UnitError::NotDuration(_) => "not a duration (e.g. 10ms, 1.5s, 2m, 1h)",
        UnitError::Negative(_) => "negative",
        UnitError::OutOfRange(_) => "out of range",
        UnitError::NotSize(_) => "not a size (e.g. 512k, 16m, 1g, 65536)",
    }
}

/// A duration bound as people read it: in its largest whole unit (`1h`, `100ms`, `100us`).
fn duration_bound(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, per) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns >= per && ns.is_multiple_of(per) {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

/// A size bound in the grammar (`64k`); one that is not a whole number of KiB (the `jint`
/// bound) as the whole MiB below it (`2047m`), the form people type.
fn size_bound(n: u64) -> String {
    if n.is_multiple_of(1 << 10) {
        format_size(n)
    } else {
        format!("{}m", n >> 20)
    }
}

pub mod backend;
#[cfg(test)]
mod tests;
