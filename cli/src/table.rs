//! Tables for the terminal: right-aligned columns, and quantities (durations, bytes, shares) in
//! the units a person reads. Every cell and every name from a profile is escaped here
//! ([`otelprof_primitives::escape`]): a function named `\x1b[2J` is printed as those characters, not obeyed.

use std::fmt::Write as _;

use otelprof_store::merge::Merged;

use otelprof_primitives::escape::escape;

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

pub fn value(v: f64, unit: &str) -> String {
    format_value(v.round() as i64, unit)
}

pub fn share(part: f64, whole: f64) -> String {
    percent(part.round() as i64, whole.round() as i64)
}

/// The line above the tables.
pub fn render_header(m: &Merged, total: f64, count: f64) -> String {
    let mut h = format!(
        "Type: {} ({}); {} profile{}",
        escape(&m.sample_type),
        escape(&m.unit),
        m.profiles_used,
        if m.profiles_used == 1 { "" } else { "s" }
    );
    if m.instances.len() > 1 {
        let _ = write!(h, " from {} processes", m.instances.len());
    }
    if let Some((a, b)) = m.window {
        let _ = write!(
            h,
            ", {} to {}",
            otelprof_store::format_time(a),
            otelprof_store::format_time(b)
        );
    }
    let _ = write!(h, "; {:.0} samples, total {}", count, value(total, &m.unit));
    h
}

/// Right-aligned columns, then the last one (a name) left-aligned and unpadded. Cells are
/// escaped before they are measured, so a name cannot break the table or the terminal.
pub fn render_columns<R: AsRef<[String]>>(header: &[&str], rows: &[R]) -> String {
    let n = header.len();
    let header: Vec<std::borrow::Cow<'_, str>> = header.iter().map(|h| escape(h)).collect();
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> = rows
        .iter()
        .map(|row| row.as_ref().iter().map(|cell| escape(cell)).collect())
        .collect();
    let mut widths = vec![0usize; n];
    for (i, h) in header.iter().enumerate() {
        widths[i] = h.chars().count();
    }
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[std::borrow::Cow<'_, str>]| {
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == n {
                out.push_str(cell);
            } else {
                let width = widths.get(i).copied().unwrap_or(0);
                let _ = write!(out, "{:>width$}  ", cell);
            }
        }
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_says_what_was_merged() {
        let m = Merged {
            sample_type: "cpu".into(),
            unit: "nanoseconds".into(),
            profiles_used: 2,
            window: Some((0, 0)),
            ..Merged::default()
        };
        assert_eq!(
            render_header(&m, 32.0, 6.0),
            "Type: cpu (nanoseconds); 2 profiles, 1970-01-01T00:00:00.000Z to 1970-01-01T00:00:00.000Z; 6 samples, total 32ns"
        );
    }

    #[test]
    fn names_from_profiles_cannot_steer_the_terminal() {
        let rows = [[
            "1".to_owned(),
            "app.Evil.\x1b]0;pwned\x07\x1b[2J\u{202e}txt\rrow".to_owned(),
        ]];
        let text = render_columns(&["n", "function\x1b[8m"], &rows);
        assert_eq!(
            text,
            "n  function\\x1b[8m\n1  app.Evil.\\x1b]0;pwned\\x07\\x1b[2J\\u{202e}txt\\rrow\n"
        );
        let m = Merged {
            sample_type: "cpu\x1b[31m".into(),
            unit: "nanoseconds\u{9b}".into(),
            ..Merged::default()
        };
        let header = render_header(&m, 1.0, 1.0);
        assert!(
            header.starts_with("Type: cpu\\x1b[31m (nanoseconds\\u{9b})"),
            "{header}"
        );
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
