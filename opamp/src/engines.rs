//! What a remote request may ask of the profiler: which engines run and how often they
//! sample, with the bounds a server cannot go past, and the text form both ends read.
//!
//! The bounds are stricter than what a local option accepts (`cpu=100us` is a local choice;
//! from a server it is not): a management server can reach a fleet at once, so a request
//! must not be able to cost more than a profiler that people leave on.

use std::time::Duration;

use otelprof_primitives::units::{parse_duration, parse_size};

/// The profile types a request can name, in the order they are shown.
pub const TYPES: [&str; 4] = ["cpu", "wall", "alloc", "lock"];

/// Shortest CPU interval a server may ask for: 1,000 samples per second of CPU.
pub const MIN_CPU: Duration = Duration::from_millis(1);
/// Shortest wall-clock interval a server may ask for: the wall thread signals up to
/// `wall_threads` threads per interval.
pub const MIN_WALL: Duration = Duration::from_millis(5);
/// Smallest mean allocation interval a server may ask for (the agent's `alloc_rate` bound
/// still applies on top).
pub const MIN_ALLOC: u64 = 16 << 10;
/// Shortest lock threshold a server may ask for (`lock=0`, every wait, is a local choice).
pub const MIN_LOCK: Duration = Duration::from_millis(1);

/// Why a request was refused: one sentence for the person who sent it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl Refused {
    pub fn new(reason: impl Into<String>) -> Refused {
        Refused(reason.into())
    }
}

/// The engines a request turns on, each with its interval (`None`: not asked for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Engines {
    pub cpu: Option<Duration>,
    pub wall: Option<Duration>,
    /// Mean bytes between allocation samples.
    pub alloc: Option<u64>,
    /// Lock waits at least this long are all recorded.
    pub lock: Option<Duration>,
}

impl Engines {
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none() && self.wall.is_none() && self.alloc.is_none() && self.lock.is_none()
    }

    /// The types asked for, in [`TYPES`] order.
    pub fn types(&self) -> Vec<&'static str> {
        let on = [
            self.cpu.is_some(),
            self.wall.is_some(),
            self.alloc.is_some(),
            self.lock.is_some(),
        ];
        TYPES
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(t, _)| *t)
            .collect()
    }

    /// `cpu=10ms,wall=20ms,alloc=256k,lock=10ms`, the engines asked for only.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(d) = self.cpu {
            parts.push(format!("cpu={}", format_duration(d)));
        }
        if let Some(d) = self.wall {
            parts.push(format!("wall={}", format_duration(d)));
        }
        if let Some(b) = self.alloc {
            parts.push(format!("alloc={}", format_size(b)));
        }
        if let Some(d) = self.lock {
            parts.push(format!("lock={}", format_duration(d)));
        }
        parts.join(",")
    }

    /// Sets one engine from `key=value`; `Ok(false)` when `key` is not an engine.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, Refused> {
        match key {
            "cpu" => self.cpu = Some(interval(key, value, MIN_CPU)?),
            "wall" => self.wall = Some(interval(key, value, MIN_WALL)?),
            "alloc" => self.alloc = Some(alloc(value)?),
            "lock" => self.lock = Some(interval(key, value, MIN_LOCK)?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A sampling interval of engine `key`, at least `min`.
pub fn interval(key: &str, value: &str, min: Duration) -> Result<Duration, Refused> {
    let d = parse_duration(value).map_err(|e| Refused(format!("{key}: {e}")))?;
    if d < min {
        return Err(Refused(format!(
            "{key}={value} is below the shortest interval a server may ask for, {}",
            format_duration(min)
        )));
    }
    // An interval beyond an hour samples nothing within any capture or period.
    if d > Duration::from_secs(3600) {
        return Err(Refused(format!("{key}={value} is longer than 1h")));
    }
    Ok(d)
}

/// A mean allocation interval, at least [`MIN_ALLOC`] and within JVMTI's `jint`.
pub fn alloc(value: &str) -> Result<u64, Refused> {
    let n = parse_size(value).map_err(|e| Refused(format!("alloc: {e}")))?;
    if n < MIN_ALLOC {
        return Err(Refused(format!(
            "alloc={value} is below the smallest interval a server may ask for, {}",
            format_size(MIN_ALLOC)
        )));
    }
    if n > i32::MAX as u64 {
        return Err(Refused(format!(
            "alloc={value}: the largest interval is 2047m"
        )));
    }
    Ok(n)
}

/// Keys that are never taken from a server, with the reason given.
pub fn forbidden(key: &str) -> Option<&'static str> {
    Some(match key {
        "out" => "out is a path: a server may not choose where the agent writes files",
        "endpoint" | "protocol" | "opamp" | "headers" | "token" => {
            "a server may not choose where the agent sends data or whom it trusts"
        }
        "log" | "depth" | "clock" | "queue" | "service" | "timestamps" | "thread_id" => {
            "this option is set where the JVM starts, not remotely"
        }
        _ => return None,
    })
}

/// The refusal of a key that is neither an engine nor a capture's own.
pub fn refuse_key(k: &str) -> Refused {
    match forbidden(k) {
        Some(why) => Refused::new(format!("{} is refused: {why}", shown(k))),
        None => Refused::new(format!(
            "unknown key {}: only profiling settings are accepted (cpu, wall, alloc, lock)",
            shown(k)
        )),
    }
}

/// `20ms`, `1s`, `250us`: the shortest exact form in the duration grammar.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0s".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// `256k`, `1m`, `1000`: the shortest exact form in the size grammar.
pub fn format_size(b: u64) -> String {
    if b != 0 && b.is_multiple_of(1 << 30) {
        format!("{}g", b >> 30)
    } else if b != 0 && b.is_multiple_of(1 << 20) {
        format!("{}m", b >> 20)
    } else if b != 0 && b.is_multiple_of(1 << 10) {
        format!("{}k", b >> 10)
    } else {
        b.to_string()
    }
}

/// `key=value` items of a comma-separated text, trimmed, empty items skipped; a key given
/// twice is refused (which of the two would win is a guess).
pub fn items(text: &str) -> Result<Vec<(&str, &str)>, Refused> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(Refused(format!(
                "{} needs a value (key=value)",
                shown(item)
            )));
        };
        let (k, v) = (k.trim(), v.trim());
        if out.iter().any(|(seen, _)| *seen == k) {
            return Err(Refused(format!("{} is given twice", shown(k))));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// Text from a peer as it may appear in a reason: at most 64 characters, control characters
/// escaped (reasons end up in logs and on screens).
pub fn shown(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == 64 {
            out.push('…');
            break;
        }
        if c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
        {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_read_and_write_one_text() {
        let mut e = Engines::default();
        for (k, v) in items("wall=20ms, alloc=256k,lock=10ms,cpu=1.5ms").unwrap() {
            assert!(e.set(k, v).unwrap());
        }
        assert_eq!(e.wall, Some(Duration::from_millis(20)));
        assert_eq!(e.alloc, Some(256 << 10));
        assert_eq!(e.cpu, Some(Duration::from_micros(1500)));
        assert_eq!(e.text(), "cpu=1500us,wall=20ms,alloc=256k,lock=10ms");
        assert_eq!(e.types(), ["cpu", "wall", "alloc", "lock"]);
        let mut again = Engines::default();
        for (k, v) in items(&e.text()).unwrap() {
            again.set(k, v).unwrap();
        }
        assert_eq!(again, e);
        assert!(!Engines::default().set("seconds", "60").unwrap());
    }

    #[test]
    fn bounds_are_stated_in_the_refusal() {
        let mut e = Engines::default();
        for (k, v, says) in [
            ("cpu", "100us", "1ms"),
            ("wall", "1ms", "5ms"),
            ("alloc", "1k", "16k"),
            ("alloc", "3g", "2047m"),
            ("lock", "0", "unit"),
            ("lock", "0ms", "1ms"),
            ("cpu", "2h", "1h"),
            ("wall", "fast", "not a duration"),
        ] {
            let r = e.set(k, v).unwrap_err().0;
            assert!(r.contains(says), "{k}={v}: {r}");
        }
        assert_eq!(e, Engines::default(), "nothing of a refused value is kept");
    }

    #[test]
    fn paths_and_destinations_are_never_engines() {
        for k in ["out", "endpoint", "opamp", "log", "depth"] {
            assert!(forbidden(k).is_some(), "{k}");
        }
        assert!(forbidden("out").unwrap().contains("path"));
        assert!(forbidden("wall").is_none());
    }

    #[test]
    fn items_refuse_duplicates_and_bare_words() {
        assert!(items("wall=1s,wall=2s").unwrap_err().0.contains("twice"));
        assert!(items("wall").unwrap_err().0.contains("needs a value"));
        assert_eq!(items(" , ,").unwrap(), []);
    }

    #[test]
    fn shown_text_is_cut_and_inert() {
        assert_eq!(shown("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(shown(&"x".repeat(100)).chars().count(), 65);
        assert_eq!(shown("\u{202e}"), "\\u{202e}");
    }

    #[test]
    fn formats_are_exact() {
        assert_eq!(format_duration(Duration::from_secs(60)), "60s");
        assert_eq!(format_duration(Duration::from_nanos(1500)), "1500ns");
        assert_eq!(format_size(256 << 10), "256k");
        assert_eq!(format_size(1 << 30), "1g");
        assert_eq!(format_size(1000), "1000");
    }
}
