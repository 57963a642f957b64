//! Continuous settings: which profile types the agent runs all the time and how often they
//! sample, as a server changes them. They travel as the remote config file [`FILE`], whose
//! text is the agent options' grammar: `wall=50ms,alloc=off`. A key named overrides the
//! agent's local option; `off` turns the type off; a key not named keeps the local option.

use std::time::Duration;

use otelprof_agent_options::Value;
use otelprof_primitives::units::{format_duration, format_size};

use super::engines::{items, refuse_key, remote_value, settable, Refused};

/// The name of the remote (and effective) config file that holds the settings.
pub const FILE: &str = "otelprof";
/// Its content type: text in the agent options' grammar.
pub const CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// Longest settings text accepted.
pub const MAX_TEXT: usize = 1024;

/// One setting as a server gives it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Change<T> {
    /// Not named: the local option stands.
    #[default]
    Keep,
    Off,
    To(T),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub cpu: Change<Duration>,
    pub wall: Change<Duration>,
    pub alloc: Change<u64>,
    pub live: Change<u64>,
    pub lock: Change<Duration>,
}

impl Settings {
    /// Reads and checks settings: only `cpu`, `wall`, `alloc`, `live` and `lock`, each `off` or
    /// within the agent options' remote bounds.
    pub fn parse(text: &str) -> Result<Settings, Refused> {
        if text.len() > MAX_TEXT {
            return Err(Refused::new(format!(
                "the settings are {} bytes long; at most {MAX_TEXT} are read",
                text.len()
            )));
        }
        let mut s = Settings::default();
        for (k, v) in items(text)? {
            let Some(option) = settable(k) else {
                return Err(refuse_key(k));
            };
            let value = match v {
                "off" => Value::Off,
                _ => remote_value(option, v)?,
            };
            match (k, value) {
                ("cpu", Value::Off) => s.cpu = Change::Off,
                ("cpu", Value::Duration(d)) => s.cpu = Change::To(d),
                ("wall", Value::Off) => s.wall = Change::Off,
                ("wall", Value::Duration(d)) => s.wall = Change::To(d),
                ("alloc", Value::Off) => s.alloc = Change::Off,
                ("alloc", Value::Size(n)) => s.alloc = Change::To(n),
                ("live", Value::Off) => s.live = Change::Off,
                ("live", Value::Size(n)) => s.live = Change::To(n),
                ("lock", Value::Off) => s.lock = Change::Off,
                ("lock", Value::Duration(d)) => s.lock = Change::To(d),
                _ => return Err(refuse_key(k)),
            }
        }
        Ok(s)
    }

    /// The keys that change something, in the order of [`super::engines::types`]; empty when every
    /// key is the local option's.
    pub fn text(&self) -> String {
        fn one<T>(key: &str, c: &Change<T>, show: impl Fn(&T) -> String) -> Option<String> {
            match c {
                Change::Keep => None,
                Change::Off => Some(format!("{key}=off")),
                Change::To(v) => Some(format!("{key}={}", show(v))),
            }
        }
        let d = |d: &Duration| format_duration(*d);
        [
            one("cpu", &self.cpu, d),
            one("wall", &self.wall, d),
            one("alloc", &self.alloc, |b| format_size(*b)),
            one("live", &self.live, |b| format_size(*b)),
            one("lock", &self.lock, d),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_back_as_written() {
        let s = Settings::parse("wall=50ms, alloc=off,lock=10ms,live=256k").unwrap();
        assert_eq!(s.cpu, Change::Keep);
        assert_eq!(s.wall, Change::To(Duration::from_millis(50)));
        assert_eq!(s.alloc, Change::Off);
        assert_eq!(s.live, Change::To(256 << 10));
        assert_eq!(s.text(), "wall=50ms,alloc=off,live=256k,lock=10ms");
        assert_eq!(Settings::parse(&s.text()).unwrap(), s);
        assert_eq!(Settings::parse("").unwrap(), Settings::default());
        assert_eq!(Settings::default().text(), "");
    }

    #[test]
    fn only_profiling_keys_within_bounds() {
        for (text, says) in [
            ("out=/tmp", "path"),
            ("endpoint=http://evil:4318", "where the agent sends data"),
            ("period=1s", "unknown key period"),
            ("cpu=10us", "1ms"),
            ("alloc=1", "16k"),
            ("wall=on", "not a duration"),
            ("cpu=10ms,cpu=off", "twice"),
        ] {
            let r = Settings::parse(text).unwrap_err().0;
            assert!(r.contains(says), "{text}: {r}");
        }
    }
}
