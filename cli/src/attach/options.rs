//! `otelprof attach PID start OPTIONS`: the agent options checked here, before the JVM is
//! touched, with the agent's own rules (native/src/options.rs: the same keys, the same
//! grammar of durations and sizes, the same bounds), so a typo is one clear line and not a
//! library loaded for nothing. `tests/tests/attach_cli.rs` holds both sides to the same
//! verdicts on the same strings.
//!
//! Two things only the CLI can do: `reply=` and `file=` are the CLI's to set (refused here),
//! and `out=` is a path on the JVM's side. A relative `out=` is made absolute against our
//! working directory when the JVM sees the same files as we do; otherwise it is refused (our
//! working directory means nothing to the JVM) and an absolute one is checked inside the
//! JVM's root.

use std::time::Duration;

use otelprof_primitives::units::{parse_duration, parse_size, UnitError};

use crate::escape;

/// Keys the CLI adds itself.
const RESERVED: [&str; 2] = ["reply", "file"];

/// What a value must be.
#[derive(Clone, Copy)]
enum Kind {
    /// A duration of at least this, or `off`.
    DurationOrOff(Duration),
    /// `0`, `off`, or any duration.
    Threshold,
    /// A duration of at least this.
    Duration(Duration),
    /// A whole number in this range.
    Number(u64, u64),
    /// A size of at most this, or `off`.
    SizeOrOff(u64),
    /// A size of at least this.
    Size(u64),
    /// One of these words.
    Word(&'static [&'static str]),
    /// An `http://` or `https://` URL.
    Url,
    /// Any text.
    Text,
    /// A directory.
    Dir,
}

/// Every option the agent knows, with an example value for messages.
const OPTIONS: [(&str, Kind, &str); 17] = [
    (
        "cpu",
        Kind::DurationOrOff(Duration::from_micros(100)),
        "10ms",
    ),
    (
        "wall",
        Kind::DurationOrOff(Duration::from_millis(1)),
        "50ms",
    ),
    ("wall_threads", Kind::Number(1, 1024), "16"),
    ("alloc", Kind::SizeOrOff(i32::MAX as u64), "512k"),
    ("alloc_rate", Kind::Number(0, 1_000_000), "500"),
    ("lock", Kind::Threshold, "10ms"),
    ("clock", Kind::Word(&["cpu", "itimer"]), "cpu"),
    ("depth", Kind::Number(1, 8192), "2048"),
    ("out", Kind::Dir, "/var/tmp/profiles"),
    ("period", Kind::Duration(Duration::from_secs(1)), "60s"),
    (
        "log",
        Kind::Word(&["quiet", "warn", "info", "debug"]),
        "info",
    ),
    ("endpoint", Kind::Url, "http://localhost:4318"),
    ("protocol", Kind::Word(&["grpc", "http/protobuf"]), "grpc"),
    ("service", Kind::Text, "checkout"),
    ("timestamps", Kind::Word(&["on", "off"]), "on"),
    ("thread_id", Kind::Word(&["on", "off"]), "on"),
    ("queue", Kind::Size(64 << 10), "16m"),
];

fn unit_reason(e: &UnitError) -> &'static str {
    match e {
        UnitError::NoUnit(_) => "a duration needs a unit, e.g. 10ms",
        UnitError::NotDuration(_) => "not a duration (e.g. 10ms, 1.5s, 2m, 1h)",
        UnitError::Negative(_) => "negative",
        UnitError::OutOfRange(_) => "out of range",
        UnitError::NotSize(_) => "not a size (e.g. 512k, 16m, 1g, 65536)",
    }
}

fn check_value(kind: Kind, value: &str) -> Result<(), String> {
    let duration = |v: &str| parse_duration(v).map_err(|e| unit_reason(&e).to_owned());
    match kind {
        Kind::DurationOrOff(_) | Kind::SizeOrOff(_) if value == "off" => Ok(()),
        Kind::DurationOrOff(min) | Kind::Duration(min) => {
            if duration(value)? < min {
                Err(format!("the shortest is {}", show_duration(min)))
            } else {
                Ok(())
            }
        }
        Kind::Threshold => match value {
            "off" | "0" => Ok(()),
            _ => duration(value).map(|_| ()),
        },
        Kind::Number(min, max) => match value.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(()),
            _ => Err(format!("expected a whole number from {min} to {max}")),
        },
        Kind::SizeOrOff(max) => match parse_size(value) {
            Ok(n) if n <= max => Ok(()),
            Ok(_) => Err("the largest is 2047m".to_owned()),
            Err(e) => Err(unit_reason(&e).to_owned()),
        },
        Kind::Size(min) => match parse_size(value) {
            Ok(n) if n >= min => Ok(()),
            Ok(_) => Err(format!("the smallest is {}k", min >> 10)),
            Err(e) => Err(unit_reason(&e).to_owned()),
        },
        Kind::Word(words) => {
            if words.contains(&value) {
                Ok(())
            } else {
                Err(format!("expected {}", words.join(" or ")))
            }
        }
        Kind::Url => {
            let rest = value
                .strip_prefix("http://")
                .or_else(|| value.strip_prefix("https://"));
            if rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/')) {
                Ok(())
            } else {
                Err("expected an http:// or https:// URL".to_owned())
            }
        }
        Kind::Text | Kind::Dir => Ok(()),
    }
}

fn show_duration(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{}us", d.as_micros())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs())
    }
}

/// Checks `options` (`key=value,...`) and returns them as the agent is to get them: items
/// trimmed, empty ones dropped, `out=` resolved by `resolve_out` (which returns the path
/// the JVM is to use, or why it cannot).
pub fn check(
    options: &str,
    resolve_out: impl Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for item in options.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (item, ""),
        };
        let shown = escape::quote(key);
        if RESERVED.contains(&key) {
            return Err(format!(
                "option {shown} is set by otelprof attach itself (dump -o FILE writes a file)"
            ));
        }
        let Some(&(_, kind, example)) = OPTIONS.iter().find(|(k, _, _)| *k == key) else {
            let known: Vec<&str> = OPTIONS.iter().map(|(k, _, _)| *k).collect();
            return Err(format!(
                "unknown agent option {shown} (known: {})",
                known.join(", ")
            ));
        };
        if seen.contains(&key) {
            return Err(format!("agent option {shown} is given twice"));
        }
        seen.push(key);
        if value.is_empty() {
            return Err(format!(
                "agent option {shown} needs a value, as in {key}={example}"
            ));
        }
        check_value(kind, value).map_err(|reason| {
            format!(
                "agent option {}: {reason}",
                escape::quote(&format!("{key}={value}"))
            )
        })?;
        if matches!(kind, Kind::Dir) {
            let dir = resolve_out(value)
                .map_err(|reason| format!("agent option out={}: {reason}", escape::quote(value)))?;
            if dir.contains(',') {
                return Err(format!(
                    "agent option out={}: the directory's path holds a comma, which the \
                     agent's option syntax cannot carry",
                    escape::quote(&dir)
                ));
            }
            out.push(format!("out={dir}"));
        } else {
            out.push(format!("{key}={value}"));
        }
    }
    Ok(out.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_out(_: &str) -> Result<String, String> {
        Err("unexpected".into())
    }

    #[test]
    fn good_options_come_back_normalised() {
        assert_eq!(check("", no_out).unwrap(), "");
        assert_eq!(
            check(
                " cpu=1ms , wall=off,,alloc=512k,lock=0,clock=itimer,depth=64,period=10s,\
                   log=debug,endpoint=http://127.0.0.1:4317,protocol=grpc,service=shop,\
                   timestamps=on,thread_id=off,queue=64k,wall_threads=1024,alloc_rate=0",
                no_out
            )
            .unwrap(),
            "cpu=1ms,wall=off,alloc=512k,lock=0,clock=itimer,depth=64,period=10s,log=debug,\
             endpoint=http://127.0.0.1:4317,protocol=grpc,service=shop,timestamps=on,\
             thread_id=off,queue=64k,wall_threads=1024,alloc_rate=0"
        );
    }

    #[test]
    fn out_goes_through_the_resolver() {
        let abs = |v: &str| Ok(format!("/srv/app/{v}"));
        assert_eq!(
            check("out=p,cpu=5ms", abs).unwrap(),
            "out=/srv/app/p,cpu=5ms"
        );
        let refuse = |_: &str| Err("relative".to_owned());
        assert_eq!(
            check("out=p", refuse).unwrap_err(),
            "agent option out=\"p\": relative"
        );
        let comma = |_: &str| Ok("/a,b".to_owned());
        assert!(check("out=x", comma).unwrap_err().contains("comma"));
    }

    #[test]
    fn each_mistake_is_named() {
        for (options, message) in [
            ("cpu=1us", "agent option \"cpu=1us\": the shortest is 100us"),
            (
                "cpu=10",
                "agent option \"cpu=10\": a duration needs a unit, e.g. 10ms",
            ),
            (
                "wall=500us",
                "agent option \"wall=500us\": the shortest is 1ms",
            ),
            (
                "period=500ms",
                "agent option \"period=500ms\": the shortest is 1s",
            ),
            (
                "depth=0",
                "agent option \"depth=0\": expected a whole number from 1 to 8192",
            ),
            (
                "alloc=4g",
                "agent option \"alloc=4g\": the largest is 2047m",
            ),
            ("queue=1k", "agent option \"queue=1k\": the smallest is 64k"),
            (
                "clock=wall",
                "agent option \"clock=wall\": expected cpu or itimer",
            ),
            (
                "endpoint=localhost:4317",
                "agent option \"endpoint=localhost:4317\": expected an http:// or https:// URL",
            ),
            ("cpu", "agent option \"cpu\" needs a value, as in cpu=10ms"),
            ("cpu=1ms,cpu=2ms", "agent option \"cpu\" is given twice"),
            (
                "reply=/etc/passwd",
                "option \"reply\" is set by otelprof attach itself (dump -o FILE writes a file)",
            ),
            (
                "file=/x",
                "option \"file\" is set by otelprof attach itself (dump -o FILE writes a file)",
            ),
        ] {
            assert_eq!(check(options, no_out).unwrap_err(), message, "{options}");
        }
        let unknown = check("cpus=10ms", no_out).unwrap_err();
        assert!(
            unknown.starts_with("unknown agent option \"cpus\" (known: cpu, wall,"),
            "{unknown}"
        );
        // Control characters in what is quoted back are escaped.
        assert!(check("\x1b[2J=1", no_out).unwrap_err().contains("\\x1b[2J"));
    }
}
