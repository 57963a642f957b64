//! The one grammar of quantities that people type: agent options (`cpu=10ms,queue=16m`), CLI
//! flags (`--cpu 10ms`, `--max-request-size 32m`) and relative times (`--from now-15m`) all read
//! durations and sizes here, so a form that works in one place works in all.
//!
//! Durations are jiff's "friendly" format (`10ms`, `1.5s`, `2m`, `1h30m`, `2 hours`; ISO 8601
//! `PT15M` too), with days and weeks counted as 24 h and 7 days. Sizes are a whole number with
//! an optional binary suffix (`512k`, `16m`, `1g`). [`format_duration`] and [`format_size`]
//! write a value back in the same grammar, exactly.

use std::str::FromStr as _;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("{0:?}: give a unit, e.g. {0}ms")]
    NoUnit(String),
    #[error("{0:?} is not a duration (e.g. 10ms, 1.5s, 2m, 1h)")]
    NotDuration(String),
    #[error("{0:?} is negative")]
    Negative(String),
    #[error("{0:?} is out of range")]
    OutOfRange(String),
    #[error("{0:?} is not a size (e.g. 512k, 16m, 1g, 65536)")]
    NotSize(String),
}

/// A non-negative duration; a unit is required (a bare `10` is ambiguous: async-profiler
/// reads nanoseconds, most people mean milliseconds). Callers add their own bounds.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) {
        return Err(UnitError::NoUnit(t.to_owned()));
    }
    let span = jiff::Span::from_str(t).map_err(|_| UnitError::NotDuration(text.to_owned()))?;
    let signed = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|_| UnitError::OutOfRange(text.to_owned()))?;
    Duration::try_from(signed).map_err(|_| UnitError::Negative(text.to_owned()))
}

/// Bytes: `65536`, `512k`, `16m`, `1g` (binary units, either case), also written `512KiB`,
/// `16MiB`, `2GiB`, `1TiB`; `500KB`, `500MB`, `2GB`, `1TB` are decimal (SI), as disks and
/// object stores count.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    const UNITS: [(&str, u64); 12] = [
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("TiB", 1 << 40),
        ("KB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
        ("TB", 1_000_000_000_000),
        ("k", 1 << 10),
        ("m", 1 << 20),
        ("g", 1 << 30),
        ("t", 1 << 40),
    ];
    let (digits, unit) = UNITS
        .iter()
        .find_map(|(suffix, unit)| {
            let cut = t.len().checked_sub(suffix.len())?;
            let tail = t.get(cut..)?;
            let matches = if suffix.len() == 1 {
                tail.eq_ignore_ascii_case(suffix)
            } else {
                tail == *suffix
            };
            matches.then(|| (&t[..cut], *unit))
        })
        .unwrap_or((t, 1));
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(UnitError::NotSize(text.to_owned()));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| UnitError::OutOfRange(text.to_owned()))?;
    n.checked_mul(unit)
        .ok_or_else(|| UnitError::OutOfRange(text.to_owned()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_share_one_grammar() {
        let d = |t: &str| parse_duration(t).unwrap();
        assert_eq!(d("10ms"), Duration::from_millis(10));
        assert_eq!(d("250000ns"), Duration::from_micros(250));
        assert_eq!(d("100us"), Duration::from_micros(100));
        assert_eq!(d("1.5s"), Duration::from_millis(1500));
        assert_eq!(d("2m"), Duration::from_secs(120));
        assert_eq!(d("1h30m"), Duration::from_secs(5400));
        assert_eq!(d("1d"), Duration::from_secs(86_400));
        assert_eq!(d("PT15M"), Duration::from_secs(900));
        assert_eq!(d("0s"), Duration::ZERO);
        for bad in ["10", "ms", "", "1.2.3s", "-1s", "1e3s", "10 parsecs"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_duration("10").unwrap_err().to_string(),
            "\"10\": give a unit, e.g. 10ms"
        );
    }

    #[test]
    fn sizes_are_binary_but_for_si_units() {
        assert_eq!(parse_size("65536").unwrap(), 65536);
        assert_eq!(parse_size("512k").unwrap(), 512 << 10);
        assert_eq!(parse_size("16M").unwrap(), 16 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_size("500MB").unwrap(), 500_000_000);
        assert_eq!(parse_size("3GB").unwrap(), 3_000_000_000);
        for bad in [
            "2gib",
            "1.5GiB",
            "GB",
            "1iB",
            "",
            "m",
            "-1",
            "1x",
            "1.5m",
            "99999999999999999999g",
            "99999999999g",
            "99999999TiB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
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
