//! Reading and printing quantities: durations on the command line, sample values in tables.

use std::time::Duration;

const NANOS_PER_UNIT: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses `10ms`, `1.5s`, `2m`, `500us`. A unit is required: a bare `10` is ambiguous.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let units = "ns, us, ms, s, m or h";
    if number.is_empty() {
        return Err(format!("{text:?} is not a duration (e.g. 10ms, 1s)"));
    }
    if unit.is_empty() {
        return Err(format!("{text:?} has no unit: add one of {units}"));
    }
    let Some(&(_, scale)) = NANOS_PER_UNIT.iter().find(|(u, _)| *u == unit) else {
        return Err(format!(
            "unknown unit {unit:?} in {text:?}: use one of {units}"
        ));
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{number:?} is not a number"))?;
    let nanos = (value * scale as f64).round();
    if !(nanos >= 1.0 && nanos < u64::MAX as f64) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// `d` in the largest of `s`, `ms`, `us`, `ns` that represents it exactly, the form the
/// agent's option parser is given (`1m` → `60s`, `1.5s` → `1500ms`).
pub fn agent_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if (nanos / scale) * scale == nanos {
            return format!("{}{unit}", nanos / scale);
        }
    }
    format!("{nanos}ns")
}

/// `value` in `unit` (a pprof sample-type unit) for a human: durations as `1.23s`, bytes as
/// `1.5MiB`, anything else as a plain integer.
pub fn format_value(value: i64, unit: &str) -> String {
    let nanos_per = match unit {
        "nanoseconds" => Some(1.0),
        "microseconds" => Some(1e3),
        "milliseconds" => Some(1e6),
        "seconds" => Some(1e9),
        _ => None,
    };
    if value == 0 {
        return "0".to_owned();
    }
    let sign = if value < 0 { "-" } else { "" };
    let magnitude = value.unsigned_abs() as f64;
    let body = if let Some(scale) = nanos_per {
        format_nanos(magnitude * scale)
    } else if unit == "bytes" {
        format_bytes(magnitude)
    } else {
        return value.to_string();
    };
    format!("{sign}{body}")
}

fn format_nanos(ns: f64) -> String {
    const STEPS: [(f64, f64, &str); 5] = [
        (1e6, 1e3, "us"),
        (1e9, 1e6, "ms"),
        (60e9, 1e9, "s"),
        (3600e9, 60e9, "min"),
        (f64::INFINITY, 3600e9, "h"),
    ];
    if ns < 1e3 {
        return format!("{ns:.0}ns");
    }
    let (_, scale, unit) = STEPS
        .iter()
        .copied()
        .find(|(below, _, _)| ns < *below)
        .unwrap_or((f64::INFINITY, 3600e9, "h"));
    format!("{}{unit}", two_decimals(ns / scale))
}

fn format_bytes(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes:.0}B");
    }
    format!("{}{}", two_decimals(value), units[unit])
}

/// `1.50` → `1.5`, `10.00` → `10`.
fn two_decimals(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `part` as a percentage of `whole`, `0.00%` when `whole` is 0.
pub fn percent(part: i64, whole: i64) -> String {
    if whole == 0 {
        return "0.00%".to_owned();
    }
    format!("{:.2}%", part as f64 * 100.0 / whole as f64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["10", "ms", "", "0s", "1.2.3s", "10 ms", "-1s", "5d", "1e3s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn agent_durations_are_exact() {
        assert_eq!(agent_duration(Duration::from_secs(60)), "60s");
        assert_eq!(agent_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(agent_duration(Duration::from_micros(250)), "250us");
        assert_eq!(agent_duration(Duration::from_nanos(1001)), "1001ns");
    }

    #[test]
    fn values_print_for_humans() {
        assert_eq!(format_value(1_230_000_000, "nanoseconds"), "1.23s");
        assert_eq!(format_value(10_000_000, "nanoseconds"), "10ms");
        assert_eq!(format_value(1_500, "nanoseconds"), "1.5us");
        assert_eq!(format_value(999, "nanoseconds"), "999ns");
        assert_eq!(format_value(90_000_000_000, "nanoseconds"), "1.5min");
        assert_eq!(format_value(7_200, "seconds"), "2h");
        assert_eq!(format_value(-20, "milliseconds"), "-20ms");
        assert_eq!(format_value(0, "nanoseconds"), "0");
        assert_eq!(format_value(512, "bytes"), "512B");
        assert_eq!(format_value(1536, "bytes"), "1.5KiB");
        assert_eq!(format_value(3 << 30, "bytes"), "3GiB");
        assert_eq!(format_value(12345, "count"), "12345");
        assert_eq!(percent(1, 3), "33.33%");
        assert_eq!(percent(1, 0), "0.00%");
    }
}
