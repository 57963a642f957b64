//! `go tool pprof`, the independent reader of the agent's pprof files: `-top` and `-traces`,
//! parsed.

use crate::process::Tied as _;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::environment::which;

/// One row of `go tool pprof -top`.
#[derive(Clone, Debug, PartialEq)]
pub struct TopRow {
    pub flat: f64,
    pub cum: f64,
    pub name: String,
}

/// What `go tool pprof -top` printed.
#[derive(Clone, Debug, Default)]
pub struct Top {
    /// The profile total (`... of <total> total`), after any focus filter.
    pub total: f64,
    /// Rows keyed by function name.
    pub rows: BTreeMap<String, TopRow>,
}

impl Top {
    /// Cumulative value of `function` (0 when absent).
    pub fn cum(&self, function: &str) -> f64 {
        self.rows.get(function).map_or(0.0, |r| r.cum)
    }

    pub fn flat(&self, function: &str) -> f64 {
        self.rows.get(function).map_or(0.0, |r| r.flat)
    }
}

/// The `-unit` that makes `go tool pprof` print `sample_index` values as plain numbers in one
/// unit: milliseconds for time (`cpu`, `wall`, `delay`), bytes for `alloc_space` and
/// `inuse_space`.
fn unit_flag(sample_index: &str) -> Option<&'static str> {
    match sample_index {
        "cpu" | "wall" | "delay" => Some("-unit=ms"),
        "alloc_space" | "inuse_space" => Some("-unit=B"),
        _ => None,
    }
}

/// `go tool pprof -top` over `files` for `sample_index` (values in ms for `cpu`, `wall` and
/// `delay`, bytes for `alloc_space` and `inuse_space`, plain counts otherwise). Every node is kept (no node or
/// edge pruning). `extra` is passed through, e.g. `-tagfocus=thread_name=worker-.*`.
pub fn pprof_top(files: &[PathBuf], sample_index: &str, extra: &[&str]) -> Top {
    assert!(!files.is_empty(), "no profiles to read");
    let go = which("go").unwrap_or_else(|| {
        panic!("`go` not found: install Debian golang-go (scripts/test.sh does)")
    });
    let mut cmd = Command::new(go);
    cmd.args([
        "tool",
        "pprof",
        "-top",
        "-nodecount=1000000",
        "-nodefraction=0",
        "-edgefraction=0",
        &format!("-sample_index={sample_index}"),
    ]);
    cmd.args(unit_flag(sample_index));
    cmd.args(extra).args(files);
    let out = cmd.output_tied().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_pprof_top(&text)
}

/// Parses the output of `go tool pprof -top`: the total from the `Showing nodes accounting
/// for ...` line and the table (`flat flat% sum% cum cum% name`).
pub fn parse_pprof_top(text: &str) -> Top {
    let mut rows = BTreeMap::new();
    let mut total = 0.0;
    let mut in_table = false;
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("Showing nodes accounting for") {
            if let Some(t) = rest.split(" of ").nth(1) {
                total = parse_quantity(t.split_whitespace().next().unwrap_or("0"));
            }
        }
        if line.trim_start().starts_with("flat") && line.contains("cum%") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(flat), Some(_), Some(_), Some(cum), Some(_)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            continue;
        };
        let name = parts.collect::<Vec<_>>().join(" ");
        rows.insert(
            name.clone(),
            TopRow {
                flat: parse_quantity(flat),
                cum: parse_quantity(cum),
                name,
            },
        );
    }
    Top { total, rows }
}

/// `1234ms`, `0`, `12.5ms`, `3` -> number (the unit is fixed by `-unit`).
fn parse_quantity(s: &str) -> f64 {
    let digits: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("not a pprof quantity: {s:?}"))
}

/// One sample as `go tool pprof -traces` prints it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceSample {
    pub labels: BTreeMap<String, String>,
    /// In the unit [`pprof_traces`] asks for (ms for time, bytes for `alloc_space`).
    pub value: f64,
    /// Leaf first.
    pub frames: Vec<String>,
}

impl TraceSample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// Whether some frame is `function` or ends with `.function`.
    pub fn has_frame(&self, function: &str) -> bool {
        self.frames
            .iter()
            .any(|f| f == function || f.ends_with(&format!(".{function}")))
    }
}

/// Every sample of `files` via `go tool pprof -traces`, with labels and leaf-first stacks.
pub fn pprof_traces(files: &[PathBuf], sample_index: &str) -> Vec<TraceSample> {
    assert!(!files.is_empty(), "no profiles to read");
    let go = which("go").unwrap_or_else(|| panic!("`go` not found: install Debian golang-go"));
    let mut cmd = Command::new(go);
    cmd.args([
        "tool",
        "pprof",
        "-traces",
        &format!("-sample_index={sample_index}"),
    ]);
    cmd.args(unit_flag(sample_index));
    let out = cmd.args(files).output_tied().unwrap();
    assert!(
        out.status.success(),
        "go tool pprof -traces failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_pprof_traces(&String::from_utf8_lossy(&out.stdout))
}

/// Parses `go tool pprof -traces`: blocks separated by `-----------+---...` lines, each with
/// `key:  value` label lines, then `<value>   <leaf frame>` and one caller frame per line.
pub fn parse_pprof_traces(text: &str) -> Vec<TraceSample> {
    let mut samples = Vec::new();
    for block in text.split("-----------+").skip(1) {
        let mut s = TraceSample::default();
        for line in block.lines().skip(1) {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if s.frames.is_empty() {
                if let Some((key, value)) = trimmed.split_once(":  ") {
                    if !key.contains(' ') {
                        s.labels.insert(key.to_owned(), value.trim().to_owned());
                        continue;
                    }
                }
                let mut parts = trimmed.splitn(2, char::is_whitespace);
                let value = parts.next().unwrap_or("0");
                s.value = parse_quantity(value);
                s.frames.push(parts.next().unwrap_or("").trim().to_owned());
            } else {
                s.frames.push(trimmed.to_owned());
            }
        }
        if !s.frames.is_empty() {
            samples.push(s);
        }
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pprof_traces() {
        let text = "Type: cpu\n-----------+-------------------------------------------------------\n   span_id:  3606ba2694007a29\n span_name:  GET /a\nthread_name:  worker-1\n       2ms   a.B.burn\n             a.B.work\n-----------+-------------------------------------------------------\n      10ms   a.B.main\n";
        let s = parse_pprof_traces(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label("span_id"), Some("3606ba2694007a29"));
        assert_eq!(s[0].label("span_name"), Some("GET /a"));
        assert_eq!(s[0].value, 2.0);
        assert_eq!(s[0].frames, vec!["a.B.burn", "a.B.work"]);
        assert!(s[0].has_frame("work"));
        assert!(!s[0].has_frame("or"));
        assert_eq!(s[1].value, 10.0);
        assert!(s[1].labels.is_empty());
    }

    #[test]
    fn parses_pprof_top() {
        let text = "Type: cpu\nShowing nodes accounting for 11713ms, 99.61% of 11759ms total\n      flat  flat%   sum%        cum   cum%\n   11684ms 99.36% 99.36%    11684ms 99.36%  a.B.spin\n         0     0% 99.61%    7088.5ms 60.28%  a.B$$Lambda.run\n";
        let top = parse_pprof_top(text);
        assert_eq!(top.total, 11759.0);
        assert_eq!(top.flat("a.B.spin"), 11684.0);
        assert_eq!(top.cum("a.B$$Lambda.run"), 7088.5);
        assert_eq!(top.rows.len(), 2);
    }
}
