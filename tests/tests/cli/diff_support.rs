//! What the diff tests share: reading the tables `otelprof diff` prints (the receiver and the
//! runner are `otelprof_tests`').

#![allow(dead_code)]

/// A number a workload printed as `KEY <number>` on a line of its own (the first).
pub fn printed(stdout: &str, key: &str) -> i64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{key} <number>' line in:\n{stdout}"))
}

/// One row of the "Grew" or "Shrank" table of `otelprof diff`.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionRow {
    pub name: String,
    /// Percentage points.
    pub delta_self: f64,
    pub delta_total: f64,
    /// Whether the z cell is starred; `None` when not tested (`-`).
    pub self_starred: Option<bool>,
    pub total_starred: Option<bool>,
}

impl FunctionRow {
    pub fn starred(&self) -> bool {
        self.self_starred == Some(true) || self.total_starred == Some(true)
    }
}

/// The rows of the table titled `title` ("Grew" or "Shrank"), in order.
pub fn function_rows(stdout: &str, title: &str) -> Vec<FunctionRow> {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with(title)).skip(2);
    let mut rows = Vec::new();
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        rows.push(parse_row(line).unwrap_or_else(|| panic!("not a diff row: {line:?}")));
    }
    rows
}

/// `base self  head self  Δself  z [*]  base total  head total  Δtotal  z [*]  name`.
fn parse_row(line: &str) -> Option<FunctionRow> {
    let mut tokens = line.split_whitespace().peekable();
    let mut next = || tokens.next();
    let _base_self = next()?;
    let _head_self = next()?;
    let delta_self: f64 = next()?.parse().ok()?;
    let z_self = next()?;
    let mut rest: Vec<&str> = Vec::new();
    while let Some(t) = next() {
        rest.push(t);
    }
    let self_star = rest.first() == Some(&"*");
    let rest = if self_star { &rest[1..] } else { &rest[..] };
    let [_bt, _ht, dt, z_total, tail @ ..] = rest else {
        return None;
    };
    let total_star = tail.first() == Some(&"*");
    let name = if total_star { &tail[1..] } else { tail };
    let tested = |z: &str, star: bool| (z != "-").then_some(star);
    Some(FunctionRow {
        name: name.join(" "),
        delta_self,
        delta_total: dt.parse().ok()?,
        self_starred: tested(z_self, self_star),
        total_starred: tested(z_total, total_star),
    })
}

/// One row of the per-endpoint table with request counts.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointRow {
    pub name: String,
    pub base_per_request: String,
    pub head_per_request: String,
    /// Percent; `None` for `-`.
    pub change: Option<f64>,
    pub starred: bool,
}

/// The rows of the per-endpoint table (`... Δ/request  endpoint`), in order.
pub fn endpoint_rows(stdout: &str) -> Vec<EndpointRow> {
    let mut rows = Vec::new();
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.ends_with("Δ/request  endpoint"))
        .skip(1);
    for line in lines.by_ref() {
        if line.starts_with('(') || line.trim().is_empty() {
            break;
        }
        let t: Vec<&str> = line.split_whitespace().collect();
        // share, share, Δ pp, base/request, head/request, z, [*], change, name...
        let starred = t.get(6) == Some(&"*");
        let at = if starred { 7 } else { 6 };
        let change = t.get(at).and_then(|c| c.trim_end_matches('%').parse().ok());
        rows.push(EndpointRow {
            name: t.get(at + 1..).unwrap_or_default().join(" "),
            base_per_request: t.get(3).unwrap_or(&"").to_string(),
            head_per_request: t.get(4).unwrap_or(&"").to_string(),
            change,
            starred,
        });
    }
    rows
}

/// `1.5ms`, `250us`, `2s`, `800ns` → milliseconds.
pub fn parse_duration_ms(text: &str) -> f64 {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: f64 = n
        .parse()
        .unwrap_or_else(|_| panic!("not a duration: {text:?}"));
    n * match unit {
        "ns" => 1e-6,
        "us" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        "min" => 60e3,
        _ => panic!("unit of {text:?}"),
    }
}

#[test]
fn rows_parse_with_and_without_stars() {
    let out = "Grew (shares ...):\nbase self  head self  Δself pp   z self  base total  head total  Δtotal pp  z total  function\n   25.00%     50.00%    +25.00  +25.0 *      25.00%      50.00%     +25.00  +25.0 *  a.Text.escape\n    0.00%      0.00%     +0.00        -      25.00%      50.00%     +25.00   +2.0    a.Web.render Html\n\nShrank:\n";
    let rows = function_rows(out, "Grew");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].name, "a.Text.escape");
    assert_eq!(
        (rows[0].self_starred, rows[0].total_starred),
        (Some(true), Some(true))
    );
    assert_eq!(rows[1].name, "a.Web.render Html");
    assert_eq!(
        (rows[1].self_starred, rows[1].total_starred),
        (None, Some(false))
    );
    assert_eq!(rows[1].delta_total, 25.0);
    assert!(function_rows(out, "Shrank").is_empty());
    let ep = "base share  head share   Δ pp  base/request  head/request       z  Δ/request  endpoint\n     3.52%       8.32%  +4.80       80.28us      215.54us  +5.3 *    +168.5%  POST /checkout\n    68.89%      64.08%  -4.81             -             -  -2.4            -  <none>\n(z: ...)\n";
    let rows = endpoint_rows(ep);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].name, "POST /checkout");
    assert!(rows[0].starred);
    assert_eq!(rows[0].change, Some(168.5));
    assert_eq!(parse_duration_ms(&rows[0].head_per_request), 0.21554);
    assert_eq!(
        (rows[1].name.as_str(), rows[1].change, rows[1].starred),
        ("<none>", None, false)
    );
}
