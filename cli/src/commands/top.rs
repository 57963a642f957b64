//! `otelprof top`: the hottest functions by self and total, or the total per endpoint,
//! version or thread (`--by`).

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::TopArgs;
use crate::table::{render_columns, render_header, share, value};
use otelprof_primitives::thread_role;
use otelprof_store::merge::{Merged, NO_GROUP};
use otelprof_store::query::requests;
use otelprof_store::query::states::{self, StateColumns};
use otelprof_store::query::top::{self, GroupRow, TopTable};
use otelprof_store::select::ProfileType;

/// What `top` answers, before it is printed (the UI's `/api/top` serialises the same).
pub struct TopAnswer {
    pub merged: Merged,
    pub ty: ProfileType,
    /// The grouping key (`--by`), and the rows per group, largest first.
    pub by: Option<String>,
    pub groups: Vec<GroupRow>,
    /// The function table, when not grouped.
    pub functions: Option<TopTable>,
    /// Each function's time per thread state, for the function table of a wall profile.
    pub states: Option<StateColumns>,
}

/// Computes `top`'s answer; fails, saying why, when the selection is empty.
pub fn answer(args: &TopArgs) -> anyhow::Result<TopAnswer> {
    let selector = args.select.selector()?;
    let by = if args.by_thread {
        Some("thread.name")
    } else {
        args.by.as_deref()
    };
    // The function table is merged by thread state: wall profiles get a column per state (the
    // other types carry none, and stay one group).
    let merge_by = by.or(Some(states::STATE_KEY));
    let (merged, ty) = super::merge_selection(&args.paths, &args.select, &selector, merge_by)?;
    let mut answer = TopAnswer {
        merged,
        ty,
        by: by.map(str::to_owned),
        groups: Vec::new(),
        functions: None,
        states: None,
    };
    match by {
        Some(key) => {
            let mut rows = top::by_group(&answer.merged);
            if key == "span_name" {
                let counts = requests::endpoint_requests(&args.paths, &selector, &selector);
                for r in &mut rows {
                    r.requests = counts.get(false, &r.name);
                }
            }
            answer.groups = rows;
        }
        None => {
            answer.functions = Some(top::top_functions(&answer.merged, None));
            answer.states = states::state_columns(&answer.merged);
        }
    }
    Ok(answer)
}

pub fn run(args: &TopArgs) -> anyhow::Result<ExitCode> {
    if let Some(pattern) = &args.trend {
        return super::trend::run(args, pattern);
    }
    let a = answer(args)?;
    let (total, count) = (a.merged.total(), a.merged.total_count());
    outln!("{}", render_header(&a.merged, total, count))?;
    match (&a.by, &a.functions) {
        (Some(key), _) => out!(
            "{}",
            render_groups(&a.groups, key, &a.merged.unit, total, args.limit)
        )?,
        (None, Some(table)) => out!(
            "{}",
            render_top(table, a.states.as_ref(), &a.merged, args.limit)
        )?,
        (None, None) => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// The function table, at most `limit` rows (0 = all), with a column per thread state after
/// the total when `states` is given (each function's total in that state; the columns add up
/// to the total, less any samples without a state).
pub fn render_top(
    table: &TopTable,
    states: Option<&StateColumns>,
    merged: &Merged,
    limit: usize,
) -> String {
    let unit = merged.unit.as_str();
    let shown = if limit == 0 {
        table.rows.len()
    } else {
        limit.min(table.rows.len())
    };
    let state_names: &[String] = states.map_or(&[], |s| &s.names);
    let frame_of = frame_index(merged, states.is_some());
    let cells: Vec<Vec<String>> = table.rows[..shown]
        .iter()
        .map(|r| {
            let mut row = vec![
                value(r.self_value, unit),
                share(r.self_value, table.total),
                value(r.total_value, unit),
                share(r.total_value, table.total),
            ];
            if let Some(states) = states {
                let by_state = frame_of
                    .get(r.name.as_str())
                    .map(|&frame| states.of_frame(frame))
                    .unwrap_or_default();
                row.extend(by_state.iter().map(|v| state_cell(*v, unit)));
            }
            row.push(r.label.clone());
            row
        })
        .collect();
    let mut header: Vec<&str> = vec!["self", "self%", "total", "total%"];
    header.extend(state_names.iter().map(String::as_str));
    header.push("function");
    let mut out = render_columns(&header, &cells);
    if shown < table.rows.len() {
        let _ = writeln!(
            out,
            "({} more functions; --limit 0 shows all)",
            table.rows.len() - shown
        );
    }
    if let Some(states) = states {
        let totals: Vec<String> = states
            .names
            .iter()
            .zip(&states.totals)
            .map(|(n, t)| format!("{n} {}", share(*t, table.total)))
            .collect();
        let _ = writeln!(
            out,
            "(thread states: each function's total time in each; all: {})",
            totals.join(", ")
        );
    }
    out
}

/// Each frame name's id in `merged` (none unless `wanted`).
pub fn frame_index(merged: &Merged, wanted: bool) -> std::collections::HashMap<&str, usize> {
    if !wanted {
        return std::collections::HashMap::new();
    }
    merged
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| (f.as_str(), i))
        .collect()
}

/// A state column's cell: `-` for none, so that the states a function is in stand out.
fn state_cell(v: f64, unit: &str) -> String {
    if v == 0.0 {
        "-".to_owned()
    } else {
        value(v, unit)
    }
}

/// A group's name and its hottest function; a role row (`[GC]`) is its own hottest frame.
fn name_and_hottest(r: &GroupRow) -> String {
    if r.name == r.hottest {
        r.name.clone()
    } else {
        format!("{}  (hottest: {})", r.name, r.hottest)
    }
}

/// The per-group table, at most `limit` rows (0 = all).
pub fn render_groups(rows: &[GroupRow], key: &str, unit: &str, total: f64, limit: usize) -> String {
    let shown = if limit == 0 {
        rows.len()
    } else {
        limit.min(rows.len())
    };
    let per_request = rows.iter().any(|r| r.requests.is_some());
    let mut out = String::new();
    if per_request {
        let cells: Vec<[String; 6]> = rows[..shown]
            .iter()
            .map(|r| {
                [
                    value(r.value, unit),
                    share(r.value, total),
                    r.requests.map_or("-".to_owned(), |n| format!("{n:.0}")),
                    match r.requests {
                        Some(n) if n > 0.0 => value(r.value / n, unit),
                        _ => "-".to_owned(),
                    },
                    format!("{:.0}", r.count),
                    name_and_hottest(r),
                ]
            })
            .collect();
        out.push_str(&render_columns(
            &["total", "total%", "requests", "per request", "samples", key],
            &cells,
        ));
    } else {
        let cells: Vec<[String; 4]> = rows[..shown]
            .iter()
            .map(|r| {
                [
                    value(r.value, unit),
                    share(r.value, total),
                    format!("{:.0}", r.count),
                    name_and_hottest(r),
                ]
            })
            .collect();
        out.push_str(&render_columns(
            &["total", "total%", "samples", key],
            &cells,
        ));
    }
    if shown < rows.len() {
        let _ = writeln!(out, "({} more; --limit 0 shows all)", rows.len() - shown);
    }
    let roles: Vec<&str> = rows[..shown]
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| thread_role::is_role_frame(n))
        .collect();
    if !roles.is_empty() {
        let _ = writeln!(
            out,
            "({}: threads that run no Java code, by role; {NO_GROUP}: other samples without {key})",
            roles.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use otelprof_store::query::top::FunctionRow;

    fn row(name: &str, self_value: f64, total_value: f64) -> FunctionRow {
        FunctionRow {
            name: name.to_owned(),
            label: format!("{name} (X.java)"),
            self_value,
            total_value,
        }
    }

    fn group(name: &str, value: f64, hottest: &str) -> GroupRow {
        GroupRow {
            name: name.to_owned(),
            value,
            count: 2.0,
            hottest: hottest.to_owned(),
            hottest_value: value,
            requests: None,
        }
    }

    #[test]
    fn groups_render_aligned() {
        // What `top::by_group` gives for its test profile (see its tests).
        let rows = [
            group("t1", 20.0, "app.A.a"),
            group("t2", 10.0, "app.C.c"),
            group("<none>", 2.0, "app.Main.main"),
        ];
        let text = render_groups(&rows, "thread.name", "nanoseconds", 32.0, 2);
        assert_eq!(
            text,
            "\
total  total%  samples  thread.name
 20ns  62.50%        2  t1  (hottest: app.A.a)
 10ns  31.25%        2  t2  (hottest: app.C.c)
(1 more; --limit 0 shows all)
"
        );
    }

    #[test]
    fn tables_render_aligned() {
        // What `top::top_functions` gives for its test profile (see its tests).
        let table = TopTable {
            rows: vec![
                row("app.A.a", 20.0, 20.0),
                row("app.C.c", 10.0, 10.0),
                row("app.Main.main", 2.0, 32.0),
                row("app.B.b", 0.0, 20.0),
            ],
            total: 32.0,
            count: 6.0,
        };
        let merged = Merged {
            unit: "nanoseconds".into(),
            ..Merged::default()
        };
        let text = render_top(&table, None, &merged, 3);
        let expected = "\
self   self%  total   total%  function
20ns  62.50%   20ns   62.50%  app.A.a (X.java)
10ns  31.25%   10ns   31.25%  app.C.c (X.java)
 2ns   6.25%   32ns  100.00%  app.Main.main (X.java)
(1 more functions; --limit 0 shows all)
";
        assert_eq!(text, expected);
    }

    #[test]
    fn wall_tables_have_a_column_per_thread_state() {
        use otelprof_store::merge::MergedStack;
        let stack = |group, frames: &[u32], value| MergedStack {
            group,
            frames: frames.to_vec(),
            value,
            count: 1.0,
        };
        let merged = Merged {
            unit: "nanoseconds".into(),
            frames: vec!["app.Run.run".into(), "app.Io.read".into()],
            groups: vec!["NATIVE".into(), "RUNNABLE".into()],
            group_key: Some(states::STATE_KEY.into()),
            stacks: vec![stack(1, &[0], 30.0), stack(0, &[0, 1], 10.0)],
            ..Merged::default()
        };
        let table = top::top_functions(&merged, None);
        let columns = states::state_columns(&merged);
        let text = render_top(&table, columns.as_ref(), &merged, 0);
        let expected = "\
self   self%  total   total%  RUNNABLE  NATIVE  function
30ns  75.00%   40ns  100.00%      30ns    10ns  app.Run.run
10ns  25.00%   10ns   25.00%         -    10ns  app.Io.read
(thread states: each function's total time in each; all: RUNNABLE 75.00%, NATIVE 25.00%)
";
        assert_eq!(text, expected);
    }
}
