//! A failure that repeats every period is told once, then counted.
//!
//! The agent writes its pprof files every period, for each profile type. When the disk is
//! full or the directory is gone, every one of those writes fails the same way; one log line
//! per write buried the application's own log under identical lines (one per type per
//! period, all day). [`FailureLog`] decides which lines are worth printing:
//!
//! - the first failure is told at once, with its error;
//! - later ones are counted, and the count is told at most once per interval (with the latest
//!   error, which may have changed);
//! - the first success after a told failure is told at once ("works again after N
//!   failures"), so the reader of the log knows the gap has ended;
//! - failures that were not told yet (they came within the interval of the last line) are
//!   carried into the next line that is told.
//!
//! It holds no clock: callers pass the time, so the rules are tested without waiting.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// What to say about one operation's failures (see the module docs).
#[derive(Debug)]
pub struct FailureLog {
    /// The operation, e.g. `writing pprof files to /var/tmp/profiles`.
    subject: String,
    /// Least time between two lines about continued failure.
    interval: Duration,
    /// Failures not yet told.
    untold: u64,
    /// Failures since the last success.
    streak: u64,
    /// When the last line was returned.
    last_told: Option<Instant>,
    /// Whether the last line said the operation was failing.
    told_failing: bool,
}

impl FailureLog {
    pub fn new(subject: impl Into<String>, interval: Duration) -> FailureLog {
        FailureLog {
            subject: subject.into(),
            interval,
            untold: 0,
            streak: 0,
            last_told: None,
            told_failing: false,
        }
    }

    fn due(&self, now: Instant) -> bool {
        self.last_told
            .is_none_or(|t| now.saturating_duration_since(t) >= self.interval)
    }

    /// `count` failures at `now`, the last with `error`: the line to log, if one is due.
    pub fn failed(&mut self, now: Instant, error: &dyn Display, count: u64) -> Option<String> {
        self.untold += count;
        self.streak += count;
        if !self.due(now) {
            return None;
        }
        let every = interval_text(self.interval);
        let line = if self.told_failing {
            format!(
                "{} failed again: {error} ({} more failures since the last report, {} since it \
                 last worked)",
                self.subject, self.untold, self.streak
            )
        } else if self.untold == 1 {
            format!(
                "{} failed: {error} (further failures are counted and reported at most once \
                 every {every})",
                self.subject
            )
        } else {
            let since = if self.last_told.is_some() {
                " since the last report"
            } else {
                ""
            };
            format!(
                "{} failed: {error} ({} failures{since}; further failures are counted and \
                 reported at most once every {every})",
                self.subject, self.untold
            )
        };
        self.untold = 0;
        self.last_told = Some(now);
        self.told_failing = true;
        Some(line)
    }

    /// A success at `now`: the line to log when it ends failures that were told.
    pub fn succeeded(&mut self, now: Instant) -> Option<String> {
        let streak = std::mem::take(&mut self.streak);
        if !self.told_failing {
            // Untold failures stay counted for the next line that is told.
            return None;
        }
        self.told_failing = false;
        self.untold = 0;
        self.last_told = Some(now);
        Some(format!(
            "{} works again, after {streak} failure{}",
            self.subject,
            if streak == 1 { "" } else { "s" }
        ))
    }
}

/// `60s`, `1m30s` style, for the interval the lines promise.
fn interval_text(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn the_first_failure_is_told_then_counted_once_a_minute() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut log = FailureLog::new("writing pprof files to /p", MINUTE);
        let full = "No space left on device (os error 28)";
        let first = log.failed(at(0), &full, 1).unwrap();
        assert_eq!(
            first,
            "writing pprof files to /p failed: No space left on device (os error 28) (further \
             failures are counted and reported at most once every 1 min)"
        );
        // Two profile types, one flush a second: quiet for the rest of the minute.
        for s in 1..60 {
            assert_eq!(log.failed(at(s), &full, 2), None, "second {s}");
        }
        let again = log.failed(at(60), &"gone", 2).unwrap();
        assert_eq!(
            again,
            "writing pprof files to /p failed again: gone (120 more failures since the last \
             report, 121 since it last worked)"
        );
        assert_eq!(log.failed(at(61), &full, 2), None);
        let back = log.succeeded(at(62)).unwrap();
        assert_eq!(
            back,
            "writing pprof files to /p works again, after 123 failures"
        );
        assert_eq!(log.succeeded(at(63)), None, "one line per recovery");
    }

    #[test]
    fn flapping_costs_at_most_a_few_lines_a_minute() {
        let t0 = Instant::now();
        let mut log = FailureLog::new("w", MINUTE);
        let mut lines = Vec::new();
        // Fails every other second for ten minutes.
        for s in 0..600u64 {
            let now = t0 + Duration::from_secs(s);
            let line = if s % 2 == 0 {
                log.failed(now, &"full", 1)
            } else {
                log.succeeded(now)
            };
            lines.extend(line);
        }
        assert!(lines.len() <= 2 * 10 + 2, "{}: {lines:#?}", lines.len());
        // Failures that fell between lines are not lost: the next failure line counts them.
        assert!(
            lines
                .iter()
                .any(|l| l.contains("31 failures since the last report")),
            "{lines:#?}"
        );
    }

    #[test]
    fn failures_told_together_are_counted_together() {
        let mut log = FailureLog::new("w", MINUTE);
        let line = log.failed(Instant::now(), &"full", 4).unwrap();
        assert!(
            line.starts_with("w failed: full (4 failures; further"),
            "{line}"
        );
    }

    #[test]
    fn successes_alone_say_nothing() {
        let mut log = FailureLog::new("w", MINUTE);
        assert_eq!(log.succeeded(Instant::now()), None);
    }
}
