//! A capture: extra profile types at chosen intervals for a bounded time ("wall 20ms and
//! alloc 256k for 60 s"), asked for by a server, with an id that every profile it produces
//! carries ([`ATTRIBUTE`]). Its text form is the agent options' grammar plus `id` and
//! `seconds`: `id=c-17,wall=20ms,alloc=256k,seconds=60`.
//!
//! The agent answers with a [`Status`], whose text form is `id=c-17,state=running,ends=<unix
//! seconds>`, `id=c-17,state=done` or `id=c-17,state=refused,reason=<text>` (`reason` last:
//! it runs to the end and may hold commas).

use std::time::Duration;

use super::engines::{items, refuse_key, shown, Engines, Refused};

/// The custom capability (OpAMP `CustomCapabilities`) of captures.
pub const CAPABILITY: &str = "io.opentelemetry.otelprof.capture";
/// Server → agent: start the capture in the data.
pub const START: &str = "start";
/// Agent → server: what became of a capture.
pub const STATUS: &str = "status";
/// Profile attribute carrying the capture's id on every profile the capture produced.
pub const ATTRIBUTE: &str = "otelprof.capture.id";

/// Longest capture: long enough for a slow endpoint's worth of requests, short enough that a
/// forgotten click costs ten minutes of extra profiling, not a day.
pub const MAX_SECONDS: u64 = 600;
/// Longest text of a capture or status accepted (a real one is under 100 bytes).
pub const MAX_TEXT: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// 1 to 64 characters of `[A-Za-z0-9._-]`, chosen by the server.
    pub id: String,
    pub engines: Engines,
    pub duration: Duration,
}

impl Capture {
    /// Reads and checks a capture: every engine within its bounds, at least one, a duration
    /// of 1 to [`MAX_SECONDS`] seconds, an id, and no other key.
    pub fn parse(text: &str) -> Result<Capture, Refused> {
        if text.len() > MAX_TEXT {
            return Err(Refused::new(format!(
                "the capture is {} bytes long; at most {MAX_TEXT} are read",
                text.len()
            )));
        }
        let mut id = None;
        let mut seconds = None;
        let mut engines = Engines::default();
        for (k, v) in items(text)? {
            match k {
                "id" => id = Some(check_id(v)?),
                "seconds" => {
                    let n: u64 = v.parse().map_err(|_| {
                        Refused::new(format!("seconds={}: expected a whole number", shown(v)))
                    })?;
                    if n == 0 || n > MAX_SECONDS {
                        return Err(Refused::new(format!(
                            "seconds={n}: a capture lasts 1 to {MAX_SECONDS} seconds"
                        )));
                    }
                    seconds = Some(n);
                }
                _ => {
                    if !engines.set(k, v)? {
                        return Err(refuse_key(k));
                    }
                }
            }
        }
        let id = id.ok_or_else(|| Refused::new("the capture has no id"))?;
        let seconds = seconds.ok_or_else(|| Refused::new("the capture has no seconds"))?;
        if engines.is_empty() {
            return Err(Refused::new(
                "the capture asks for no profile type (cpu, wall, alloc, live or lock)",
            ));
        }
        Ok(Capture {
            id,
            engines,
            duration: Duration::from_secs(seconds),
        })
    }

    pub fn text(&self) -> String {
        format!(
            "id={},{},seconds={}",
            self.id,
            self.engines.text(),
            self.duration.as_secs()
        )
    }
}

/// A capture id: 1 to 64 characters of letters, digits, `.`, `_` and `-`, so that it is
/// safe in a profile attribute, a file name, a URL and a log line as it is.
pub fn check_id(id: &str) -> Result<String, Refused> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(id.to_owned())
    } else {
        Err(Refused::new(format!(
            "capture id {}: expected 1 to 64 letters, digits, '.', '_' or '-'",
            shown(id)
        )))
    }
}

/// What became of a capture, as the agent reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Profiling until this Unix time (seconds).
    Running { ends: u64 },
    /// Over; its profiles are written or sent.
    Done,
    /// Not started, for this reason (a bound, a busy engine, an unavailable type).
    Refused { reason: String },
    /// Started and stopped early, for this reason.
    Failed { reason: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub id: String,
    pub state: State,
}

impl Status {
    pub fn text(&self) -> String {
        let cut = |r: &str| r.chars().take(400).collect::<String>();
        match &self.state {
            State::Running { ends } => format!("id={},state=running,ends={ends}", self.id),
            State::Done => format!("id={},state=done", self.id),
            State::Refused { reason } => {
                format!("id={},state=refused,reason={}", self.id, cut(reason))
            }
            State::Failed { reason } => {
                format!("id={},state=failed,reason={}", self.id, cut(reason))
            }
        }
    }

    pub fn parse(text: &str) -> Result<Status, Refused> {
        if text.len() > MAX_TEXT {
            return Err(Refused::new("the capture status is too long"));
        }
        // `reason` runs to the end.
        let (head, reason) = match text.find(",reason=") {
            Some(i) => (&text[..i], Some(&text[i + ",reason=".len()..])),
            None => (text, None),
        };
        let mut id = None;
        let mut state = None;
        let mut ends = None;
        for (k, v) in items(head)? {
            match k {
                "id" => id = Some(check_id(v)?),
                "state" => state = Some(v),
                "ends" => {
                    ends = Some(v.parse::<u64>().map_err(|_| {
                        Refused::new(format!("ends={}: expected Unix seconds", shown(v)))
                    })?)
                }
                _ => return Err(Refused::new(format!("unknown key {}", shown(k)))),
            }
        }
        let id = id.ok_or_else(|| Refused::new("the capture status has no id"))?;
        let reason = || reason.unwrap_or("").to_owned();
        let state = match (state, ends) {
            (Some("running"), Some(ends)) => State::Running { ends },
            (Some("done"), _) => State::Done,
            (Some("refused"), _) => State::Refused { reason: reason() },
            (Some("failed"), _) => State::Failed { reason: reason() },
            (Some(s), _) => {
                return Err(Refused::new(format!(
                    "state={}: expected running (with ends), done, refused or failed",
                    shown(s)
                )))
            }
            (None, _) => return Err(Refused::new("the capture status has no state")),
        };
        Ok(Status { id, state })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_reads_back_as_written() {
        let c = Capture::parse("id=c-17,wall=20ms,alloc=256k,live=512k,seconds=60").unwrap();
        assert_eq!(c.id, "c-17");
        assert_eq!(c.engines.wall, Some(Duration::from_millis(20)));
        assert_eq!(c.engines.alloc, Some(256 << 10));
        assert_eq!(c.engines.live, Some(512 << 10));
        assert_eq!(c.duration, Duration::from_secs(60));
        assert_eq!(
            c.text(),
            "id=c-17,wall=20ms,alloc=256k,live=512k,seconds=60"
        );
        assert_eq!(Capture::parse(&c.text()).unwrap(), c);
    }

    #[test]
    fn a_capture_is_bounded_and_holds_profiling_keys_only() {
        for (text, says) in [
            ("id=a,wall=20ms,seconds=601", "1 to 600"),
            ("id=a,wall=20ms,seconds=0", "1 to 600"),
            ("id=a,wall=20ms", "no seconds"),
            ("wall=20ms,seconds=5", "no id"),
            ("id=a,seconds=5", "no profile type"),
            ("id=a,wall=1ms,seconds=5", "5ms"),
            (
                "id=a,wall=20ms,seconds=5,out=/etc",
                "out is refused: out is a path",
            ),
            (
                "id=a,wall=20ms,seconds=5,endpoint=http://x",
                "where the agent sends data",
            ),
            ("id=a,wall=20ms,seconds=5,exec=/bin/sh", "unknown key exec"),
            ("id=../../x,wall=20ms,seconds=5", "capture id"),
            ("id=a,wall=20ms,seconds=-5", "whole number"),
        ] {
            let r = Capture::parse(text).unwrap_err().0;
            assert!(r.contains(says), "{text}: {r}");
        }
        let long = format!("id=a,wall=20ms,seconds=5,{}", "x=1,".repeat(400));
        assert!(Capture::parse(&long)
            .unwrap_err()
            .0
            .contains("at most 1024"));
    }

    #[test]
    fn statuses_read_back_as_written() {
        for s in [
            Status {
                id: "c-1".into(),
                state: State::Running {
                    ends: 1_700_000_000,
                },
            },
            Status {
                id: "c-1".into(),
                state: State::Done,
            },
            Status {
                id: "c-1".into(),
                state: State::Refused {
                    reason: "wall is busy, with a comma, and = signs".into(),
                },
            },
            Status {
                id: "c-1".into(),
                state: State::Failed {
                    reason: String::new(),
                },
            },
        ] {
            assert_eq!(Status::parse(&s.text()).unwrap(), s, "{}", s.text());
        }
        assert!(Status::parse("id=c,state=running").is_err());
        assert!(Status::parse("id=c,state=exploded").is_err());
        assert!(Status::parse("state=done").is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::settings::Settings;
    use proptest::prelude::*;

    /// Text a peer may send: the grammar's own characters, often, and anything else.
    fn peer_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z=,0-9.\\-_ ]{0,80}",
            "(id=[a-z0-9]{1,5},)?((cpu|wall|alloc|live|lock|seconds|out)=[0-9]{1,4}(ms|s|k|m|us)?,){0,5}",
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn readers_of_peer_text_never_panic_and_round_trip(text in peer_text()) {
            if let Ok(c) = Capture::parse(&text) {
                prop_assert!(c.duration.as_secs() >= 1 && c.duration.as_secs() <= MAX_SECONDS);
                prop_assert_eq!(Capture::parse(&c.text()).unwrap(), c);
            }
            if let Ok(s) = Settings::parse(&text) {
                prop_assert_eq!(Settings::parse(&s.text()).unwrap(), s);
            }
            if let Ok(s) = Status::parse(&text) {
                prop_assert_eq!(Status::parse(&s.text()).unwrap(), s);
            }
        }
    }
}
