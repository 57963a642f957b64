//! What a remote request may ask of the profiler: which engines run and how often they
//! sample, and the text form both ends read. The bounds a server cannot go past are the
//! agent options' remote bounds (`otelprof_agent_options`): stricter than what a local
//! option accepts (`cpu=100us` is a local choice; from a server it is not), since a
//! management server can reach a fleet at once, and a request must not be able to cost more
//! than a profiler that people leave on.

use std::time::Duration;

use otelprof_agent_options::{
    find, AgentOption, Duplicate, Remote, Value, OPTIONS, REFUSED_DESTINATION,
};
use otelprof_primitives::units::{format_duration, format_size};

/// The profile types a request can name, in the order they are shown: the options a server
/// may set, in the options' order (`cpu`, `wall`, `alloc`, `live`, `lock`).
pub fn types() -> impl Iterator<Item = &'static str> {
    OPTIONS
        .iter()
        .filter(|o| o.remote.settable())
        .map(|o| o.key)
}

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
    /// Mean bytes between the allocation samples tracked for the live heap.
    pub live: Option<u64>,
    /// Lock waits at least this long are all recorded.
    pub lock: Option<Duration>,
}

impl Engines {
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none()
            && self.wall.is_none()
            && self.alloc.is_none()
            && self.live.is_none()
            && self.lock.is_none()
    }

    /// The types asked for, in [`types`] order.
    pub fn types(&self) -> Vec<&'static str> {
        types()
            .filter(|t| match *t {
                "cpu" => self.cpu.is_some(),
                "wall" => self.wall.is_some(),
                "alloc" => self.alloc.is_some(),
                "live" => self.live.is_some(),
                "lock" => self.lock.is_some(),
                _ => false,
            })
            .collect()
    }

    /// `cpu=10ms,wall=20ms,alloc=256k,live=512k,lock=10ms`, the engines asked for only.
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
        if let Some(b) = self.live {
            parts.push(format!("live={}", format_size(b)));
        }
        if let Some(d) = self.lock {
            parts.push(format!("lock={}", format_duration(d)));
        }
        parts.join(",")
    }

    /// Sets one engine from `key=value`; `Ok(false)` when `key` is not an engine.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, Refused> {
        let Some(option) = settable(key) else {
            return Ok(false);
        };
        match (key, remote_value(option, value)?) {
            ("cpu", Value::Duration(d)) => self.cpu = Some(d),
            ("wall", Value::Duration(d)) => self.wall = Some(d),
            ("lock", Value::Duration(d)) => self.lock = Some(d),
            ("alloc", Value::Size(n)) => self.alloc = Some(n),
            ("live", Value::Size(n)) => self.live = Some(n),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The option `key` names when a server may set it.
pub fn settable(key: &str) -> Option<&'static AgentOption> {
    find(key).filter(|o| o.remote.settable())
}

/// A value a server sent for `option`, within the remote bounds.
pub fn remote_value(option: &AgentOption, value: &str) -> Result<Value<'static>, Refused> {
    option.check_remote(value).map_err(Refused)
}

/// The smallest value a server may ask of each type, in [`types`] order (`1ms`, `16k`).
pub fn minimums() -> Vec<(&'static str, String)> {
    OPTIONS
        .iter()
        .filter_map(|o| Some((o.key, o.remote.minimum()?)))
        .collect()
}

/// Why `key` is never taken from a server, when it is one of the agent's options that only
/// the JVM's start sets, or a name of what a server must never choose (the credentials of
/// `OTEL_EXPORTER_OTLP_HEADERS`, serve's token), which are no agent option.
pub fn forbidden(key: &str) -> Option<&'static str> {
    match find(key).map(|o| o.remote) {
        Some(Remote::Refused(why)) => Some(why),
        _ => match key {
            "headers" | "token" => Some(REFUSED_DESTINATION),
            _ => None,
        },
    }
}

/// The refusal of a key that is neither an engine nor a capture's own.
pub fn refuse_key(k: &str) -> Refused {
    match forbidden(k) {
        Some(why) => Refused::new(format!("{} is refused: {why}", shown(k))),
        None => Refused::new(format!(
            "unknown key {}: only profiling settings are accepted ({})",
            shown(k),
            types().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// `key=value` items of a comma-separated text (the agent options' split: trimmed, empty
/// items skipped); a key without a value or given twice is refused (which of the two would
/// win is a guess).
pub fn items(text: &str) -> Result<Vec<(&str, &str)>, Refused> {
    otelprof_agent_options::items(text)
        .map(|item| match item {
            Err(Duplicate(k)) => Err(Refused(format!("{} is given twice", shown(k)))),
            Ok((k, "")) => Err(Refused(format!("{} needs a value (key=value)", shown(k)))),
            Ok(kv) => Ok(kv),
        })
        .collect()
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
        for (k, v) in items("wall=20ms, alloc=256k,lock=10ms,cpu=1.5ms,live=1m").unwrap() {
            assert!(e.set(k, v).unwrap());
        }
        assert_eq!(e.wall, Some(Duration::from_millis(20)));
        assert_eq!(e.alloc, Some(256 << 10));
        assert_eq!(e.cpu, Some(Duration::from_micros(1500)));
        assert_eq!(e.live, Some(1 << 20));
        assert_eq!(
            e.text(),
            "cpu=1500us,wall=20ms,alloc=256k,live=1m,lock=10ms"
        );
        assert_eq!(e.types(), ["cpu", "wall", "alloc", "live", "lock"]);
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
            ("live", "1k", "16k"),
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
}
