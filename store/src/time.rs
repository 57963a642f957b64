//! Times as people type them (`--from now-15m`, `from=2025-01-31T12:00:00Z`) and as otelprof
//! prints them (RFC 3339, UTC, milliseconds), the store's day directories, all on `jiff`, and
//! the wall clock in the store's unit.

use std::str::FromStr as _;
use std::time::SystemTime;

use jiff::{civil, tz::Offset, Timestamp};

/// A time that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time {text:?}: {why}")]
pub struct TimeError {
    text: String,
    why: String,
}

/// Now, in Unix nanoseconds (the store's times): 0 for a clock set before 1970.
pub fn now_unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Reads a time: RFC 3339 (`2025-01-31T12:00:00Z`, `…T12:00:00.5+01:00`; without an offset it
/// is UTC; or a date `2025-01-31` meaning its midnight UTC), Unix seconds (`1738324800`,
/// fractions allowed), `now`, or `now-DURATION` / `-DURATION` (`now-15m`, `-2h`, `now-1d`: the
/// duration grammar of [`otelprof_primitives::units`]). Returns Unix nanoseconds.
pub fn parse_time(text: &str, now: i64) -> Result<i64, TimeError> {
    let t = text.trim();
    let bad = |why: &str| TimeError {
        text: text.to_owned(),
        why: why.to_owned(),
    };
    if t == "now" {
        return Ok(now);
    }
    if let Some(ago) = t.strip_prefix("now-").or_else(|| t.strip_prefix('-')) {
        let d = otelprof_primitives::units::parse_duration(ago)
            .map_err(|e| bad(&format!("{e} (a relative time is e.g. now-15m)")))?;
        let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        return Ok(now.saturating_sub(nanos));
    }
    if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        let secs: f64 = t.parse().map_err(|_| bad("not a number"))?;
        return Ok((secs * 1e9) as i64);
    }
    rfc3339(t).ok_or_else(|| {
        bad("expected RFC 3339 (2025-01-31T12:00:00Z), a date, Unix seconds, or now-15m")
    })
}

fn rfc3339(t: &str) -> Option<i64> {
    let ts = Timestamp::from_str(t)
        .ok()
        .or_else(|| {
            let dt = civil::DateTime::from_str(t).ok()?;
            Offset::UTC.to_timestamp(dt).ok()
        })
        .or_else(|| {
            let d = civil::Date::from_str(t).ok()?;
            Offset::UTC
                .to_timestamp(d.to_datetime(civil::Time::midnight()))
                .ok()
        })?;
    i64::try_from(ts.as_nanosecond()).ok()
}

fn timestamp(unix_nanos: i64) -> Timestamp {
    // Every i64 of nanoseconds (about ±292 years) is within jiff's range.
    Timestamp::from_nanosecond(i128::from(unix_nanos)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Unix nanoseconds as RFC 3339 UTC with milliseconds, e.g. `2025-01-31T12:00:00.250Z`.
pub fn format_time(unix_nanos: i64) -> String {
    timestamp(unix_nanos)
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// The UTC date of a time, `2025-01-31`: the store's day directories.
pub fn day(unix_nanos: i64) -> String {
    timestamp(unix_nanos).strftime("%Y-%m-%d").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_and_format() {
        assert_eq!(parse_time("1970-01-02", 0).unwrap(), 86_400_000_000_000);
        assert_eq!(
            parse_time("2025-01-31T12:00:00Z", 0).unwrap(),
            1_738_324_800_000_000_000
        );
        assert_eq!(
            parse_time("2025-01-31T12:00:00", 0).unwrap(),
            1_738_324_800_000_000_000
        );
        assert_eq!(
            parse_time("2025-01-31T13:00:00.5+01:00", 0).unwrap(),
            1_738_324_800_500_000_000
        );
        assert_eq!(
            parse_time("1738324800", 0).unwrap(),
            1_738_324_800_000_000_000
        );
        assert_eq!(
            parse_time("now-2m", 200_000_000_000).unwrap(),
            80_000_000_000
        );
        assert_eq!(parse_time("-1s", 5_000_000_000).unwrap(), 4_000_000_000);
        assert_eq!(
            parse_time("now-1d", 100_000_000_000_000).unwrap(),
            13_600_000_000_000
        );
        for bad in [
            "yesterday",
            "2025-13-01",
            "now-5",
            "now-5y",
            "2025-01-31T25:00Z",
        ] {
            assert!(parse_time(bad, 0).is_err(), "{bad}");
        }
        assert_eq!(
            format_time(1_738_324_800_250_000_000),
            "2025-01-31T12:00:00.250Z"
        );
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(day(1_738_324_800_000_000_000), "2025-01-31");
    }
}
