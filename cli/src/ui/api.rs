//! The UI's JSON answers. Each is the answer of a CLI command ([`crate::commands`]'s
//! `answer` functions, over the store's query engine) serialised, never a computation of its
//! own: `/api/top` is `otelprof top`, `/api/trace` is `otelprof drilldown`, `/api/diff` is
//! `otelprof diff`, `/api/leaks` is `otelprof leaks`, `/api/trend` is `otelprof top --trend`,
//! `/api/findings` is `otelprof findings --format json`, with the same flags
//! ([`super::params`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Value};

use otelprof_store::merge::Merged;
use otelprof_store::query::diff::{FunctionChange, Measure, Test};
use otelprof_store::query::{self, tree::Tree};
use otelprof_store::select::{self, ProfileType};
use otelprof_store::Profiles as _;

use super::params::{self, Params};
use crate::cli::Cmd;
use crate::commands::{self, diff, drilldown, findings, leaks, top};
use crate::flame::html;
use crate::table::render_header;

/// Rows of a table sent at most (the page shows fewer; the CLI's `--limit 0` prints all).
const MAX_ROWS: usize = 2000;
/// Traces listed at most, the ones with the most samples.
const MAX_TRACES: usize = 1000;
/// Values of a key offered in a picker at most.
const MAX_VALUES: usize = 500;
/// Time buckets of the timeline, unless `buckets` asks for others (2 to 500).
const BUCKETS: usize = 60;

/// A JSON object with a flame graph's data (already JSON, from [`html::data`]) spliced in
/// under `flame`.
pub fn with_flame(object: Value, tree: &Tree) -> String {
    let text = object.to_string();
    let Some(open) = text.strip_suffix('}') else {
        return text;
    };
    let comma = if open.len() > 1 { "," } else { "" };
    format!("{open}{comma}\"flame\":{}}}", html::data(tree))
}

fn window(m: &Merged) -> Value {
    m.window.map_or(Value::Null, |(a, b)| json!([a, b]))
}

/// What a merge covered, as the CLI's header line says it and as numbers.
pub fn header(m: &Merged) -> Value {
    json!({
        "text": render_header(m, m.total(), m.total_count()),
        "sample_type": m.sample_type,
        "unit": m.unit,
        "total": m.total(),
        "count": m.total_count(),
        "profiles": m.profiles_used,
        "instances": m.instances.len(),
        "window": window(m),
    })
}

/// `otelprof top` (and `flame`): the function table, or the table per `by` group, and the
/// flame graph of the same merge.
pub fn top(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Top(mut args) = params::command("top", p, store)? else {
        return Err("not a top query".into());
    };
    args.limit = 0;
    let a = top::answer(&args).map_err(|e| format!("{e:#}"))?;
    let frame_of = top::frame_index(&a.merged, a.states.is_some());
    let rows: Vec<Value> = a
        .functions
        .iter()
        .flat_map(|t| t.rows.iter().take(MAX_ROWS))
        .map(|r| {
            let mut row = json!({"name": r.name, "label": r.label, "self": r.self_value, "total": r.total_value});
            // A wall profile's rows: the function's total in each of `states`.
            if let (Some(states), Some(&frame)) = (&a.states, frame_of.get(r.name.as_str())) {
                row["by_state"] = json!(states.of_frame(frame));
            }
            row
        })
        .collect();
    let groups: Vec<Value> = a
        .groups
        .iter()
        .take(MAX_ROWS)
        .map(|g| {
            json!({"name": g.name, "value": g.value, "count": g.count, "hottest": g.hottest,
                   "requests": g.requests})
        })
        .collect();
    let object = json!({
        "type": a.ty.name(),
        "header": header(&a.merged),
        "by": a.by,
        "functions": rows,
        "functions_total": a.functions.as_ref().map_or(0, |t| t.rows.len()),
        "groups": groups,
        "states": a.states.as_ref().map(|s| json!({"names": s.names, "totals": s.totals})),
    });
    let title = format!(
        "otelprof: {}",
        commands::describe(&args.select.selector().map_err(|e| format!("{e:#}"))?, a.ty)
    );
    Ok(with_flame(object, &Tree::of(&a.merged, &title)))
}

fn span_json(link: &otel_bridge::model::Link, s: &otelprof_store::merge::SpanStats) -> Value {
    json!({
        "trace_id": link.trace_id_hex(),
        "span_id": link.span_id_hex(),
        "value": s.value,
        "count": s.count,
        "endpoints": s.endpoints,
        "first": s.first,
        "last": s.last,
        "window": s.window.map(|(a, b)| [a, b]),
    })
}

/// `otelprof drilldown --trace-id T [--span-id S]`: the summary, the spans, the top table and
/// the flame graph of what was shown (the endpoint's profile when the span had no samples).
pub fn trace(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Drilldown(mut args) = params::command("drilldown", p, store)? else {
        return Err("not a drilldown query".into());
    };
    args.limit = 0;
    let a = drilldown::answer(&args).map_err(|e| format!("{e:#}"))?;
    let d = &a.drilldown;
    let Some(shown) = a.shown() else {
        return Err(format!(
            "nothing to show for {}",
            commands::describe(&a.selector, a.ty)
        ));
    };
    let table = otelprof_store::query::top::top_functions(shown, None);
    let object = json!({
        "type": a.ty.name(),
        "summary": drilldown::render_summary(d, a.selector.trace_id),
        "notes": d.notes,
        "spans": d.spans.iter().map(|(l, s)| span_json(l, s)).collect::<Vec<_>>(),
        "fallback": d.fallback.as_ref().filter(|_| d.merged.stacks.is_empty()).map(|(e, _)| e),
        "header": header(shown),
        "functions": table.rows.iter().take(MAX_ROWS)
            .map(|r| json!({"name": r.name, "label": r.label, "self": r.self_value, "total": r.total_value}))
            .collect::<Vec<_>>(),
    });
    let title = format!(
        "otelprof drilldown: {}",
        commands::describe(&a.selector, a.ty)
    );
    Ok(with_flame(object, &Tree::of(shown, &title)))
}

fn test_json(t: Option<&Test>) -> Value {
    t.map_or(Value::Null, |t| {
        json!({"z": if t.z.is_finite() { t.z } else { t.z.signum() * 1e9 }, "significant": t.significant})
    })
}

fn change_json(c: &FunctionChange) -> Value {
    json!({
        "name": c.name,
        "base_self": c.base_self, "head_self": c.head_self,
        "base_total": c.base_total, "head_total": c.head_total,
        "delta_self": c.delta_self(), "delta_total": c.delta_total(),
        "z_self": test_json(c.test(Measure::SelfShare)),
        "z_total": test_json(c.test(Measure::TotalShare)),
        "increase": c.increase().map(|(m, d)| json!({"measure": m.name(), "delta": d})),
        "path": c.carrier.as_ref().map(|p| diff::render_path(&p.path)),
    })
}

/// `otelprof diff --base … --head …`: both headers, the per-group table, the ranked function
/// changes with their tests, the closing line, and the differential flame graph.
pub fn compare(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Diff(args) = params::command("diff", p, store)? else {
        return Err("not a diff query".into());
    };
    let a = diff::answer(&args).map_err(|e| format!("{e:#}"))?;
    let groups: Vec<Value> = a
        .groups
        .rows
        .iter()
        .take(MAX_ROWS)
        .map(|g| {
            json!({
                "name": g.name, "base_share": g.base_share, "head_share": g.head_share,
                "base_per_request": g.base_per_request(), "head_per_request": g.head_per_request(),
                "per_request_change": g.per_request_change(),
                "test": test_json(g.test.as_ref()),
            })
        })
        .collect();
    let object = json!({
        "type": a.ty.name(),
        "base": header(&a.base),
        "head": header(&a.head),
        "by": args.by,
        "groups": groups,
        "per_request": a.groups.per_request,
        "group_headline": a.groups.headline().map(|g| diff::render_group_change(g, &a.base.sample_type, &a.base.unit)),
        "grew": a.functions.grew.iter().take(MAX_ROWS).map(change_json).collect::<Vec<_>>(),
        "shrank": a.functions.shrank.iter().take(MAX_ROWS).map(change_json).collect::<Vec<_>>(),
        "headline": diff::render_headline(&a.functions),
        "noise": diff::render_dispersion(&a.dispersion).map(|s| s.trim().to_owned()),
    });
    let title = format!("otelprof diff: {}", diff::title(&args));
    Ok(with_flame(object, &Tree::diff(&a.base, &a.head, &title)))
}

/// Traces and spans that have samples, with endpoint, window and samples, most time first:
/// the merge of the selection with its spans collected (as `drilldown` does).
pub fn traces(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Traces(mut args) = params::command("traces", p, store)? else {
        return Err("not a traces query".into());
    };
    args.limit = u32::try_from(MAX_TRACES).unwrap_or(u32::MAX);
    let t = commands::traces::answer(&args).map_err(|e| format!("{e:#}"))?;
    let list: Vec<Value> = t
        .rows
        .iter()
        .map(|r| {
            json!({"trace_id": r.trace_id_hex(), "value": r.value, "count": r.count,
                   "spans": r.spans, "endpoints": r.endpoints,
                   "from": r.first.or(r.profiles.map(|p| p.0)),
                   "to": r.last.or(r.profiles.map(|p| p.1)),
                   "profiles": r.profiles.map(|(a, b)| [a, b])})
        })
        .collect();
    Ok(json!({
        "type": t.ty.name(),
        "header": header(&t.merged),
        "traces": list,
        "total_traces": t.total,
    })
    .to_string())
}

/// `otelprof findings --format json`: the same engine call and the same serialiser, so the
/// panel and the command cannot disagree.
pub fn findings(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Findings(args) = params::command("findings", p, store)? else {
        return Err("not a findings query".into());
    };
    let (found, inputs, new) = findings::marked(&args).map_err(|e| format!("{e:#}"))?;
    Ok(findings::to_json(&found, &inputs, new.as_deref()).to_string())
}

/// Sites tested but not candidates, listed at most (the fastest growing).
const MAX_OTHER_SITES: usize = 50;

/// `otelprof leaks`: the candidates, fastest first, and the other sites by slope.
pub fn leaks(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Leaks(args) = params::command("leaks", p, store)? else {
        return Err("not a leaks query".into());
    };
    let r = leaks::answer(&args).map_err(|e| format!("{e:#}"))?;
    let site = |l: &otelprof_store::query::leaks::Leak| {
        json!({"site": l.site, "slope_per_hour": l.slope_per_hour, "growth": l.growth,
               "t": l.t, "p": l.p, "noise_bound": l.noise_bound, "first": l.first,
               "latest": l.latest, "share": l.share})
    };
    Ok(json!({
        "snapshots": r.snapshots,
        "instances": r.instances,
        "window": r.window.map_or(Value::Null, |(a, b)| json!([a, b])),
        "latest_total": r.latest_total,
        "fdr": otelprof_store::query::leaks::FDR,
        "candidates": r.candidates().map(site).collect::<Vec<_>>(),
        "others": r.sites.iter().filter(|l| !l.significant).take(MAX_OTHER_SITES).map(site)
            .collect::<Vec<_>>(),
    })
    .to_string())
}

/// The selection's value over time, stacked by `by` (default `span_name`): the store's
/// [`timeline`](otelprof_store::query::timeline) in `buckets` buckets.
pub fn timeline(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Top(args) = params::command("top", p, store)? else {
        return Err("not a selection".into());
    };
    let by = args.by.clone().unwrap_or_else(|| "span_name".to_owned());
    let buckets = p
        .get("buckets")
        .and_then(|b| b.parse::<usize>().ok())
        .unwrap_or(BUCKETS)
        .clamp(2, 500);
    let selector = args.select.selector().map_err(|e| format!("{e:#}"))?;
    let spec = args.select.spec(&selector).map_err(|e| format!("{e:#}"))?;
    let narrowed = std::slice::from_ref(&selector);
    let open = || commands::open_source_for(&args.paths, narrowed);
    let t = query::timeline::timeline(open, spec, &by, buckets).map_err(|e| format!("{e:#}"))?;
    // The JVM's heap after collection and its pauses in the same buckets, from the agent's
    // metrics in the store (absent when it has none).
    let windows: Vec<(i64, i64)> = t.times.windows(2).map(|w| (w[0], w[1])).collect();
    // Of a bucket's store, its local copy (the metrics are among the files every reader
    // fetches).
    let local =
        commands::stores::local_paths(&args.paths, Some(narrowed)).map_err(|e| format!("{e:#}"))?;
    let memory = query::memory::memory_in(&local, &selector, &windows);
    let memory = (!memory.is_empty()).then(
        || json!({"heap_after_gc": memory.heap_after_gc, "gc_pause_seconds": memory.gc_pause}),
    );
    Ok(json!({
        "type": t.ty.name(),
        "unit": t.unit,
        "by": by,
        "times": t.times,
        "series": t.series.iter().map(|(n, v)| json!({"name": n, "values": v})).collect::<Vec<_>>(),
        "memory": memory,
    })
    .to_string())
}

/// `otelprof top --trend GLOB`: the trend of the functions matching `trend` over the
/// selection, in the buckets of the timeline of the same selection and `buckets`.
pub fn trend(store: &Path, p: &Params) -> Result<String, String> {
    let Cmd::Top(args) = params::command("top", p, store)? else {
        return Err("not a selection".into());
    };
    let Some(pattern) = args.trend.as_deref() else {
        return Err("give the functions' pattern: trend=GLOB".into());
    };
    let buckets = p
        .get("buckets")
        .and_then(|b| b.parse::<usize>().ok())
        .unwrap_or(BUCKETS)
        .clamp(2, 500);
    let t = commands::trend::answer(&args, pattern, buckets).map_err(|e| format!("{e:#}"))?;
    let points: Vec<Value> = t
        .points
        .iter()
        .map(|x| {
            json!({"total": x.total, "self": x.self_value, "selection": x.selection,
                   "share": x.share(), "self_share": x.self_share(), "requests": x.requests,
                   "per_request": x.per_request()})
        })
        .collect();
    Ok(json!({
        "type": t.ty.name(),
        "unit": t.unit,
        "pattern": t.pattern,
        "times": t.times,
        "points": points,
        "functions": t.functions.iter().take(MAX_ROWS)
            .map(|(n, v)| json!({"name": n, "total": v})).collect::<Vec<_>>(),
        "requests": t.has_requests(),
    })
    .to_string())
}

/// Resource attributes an instance is described by.
const INSTANCE_KEYS: [&str; 7] = [
    "service.name",
    "service.version",
    "deployment.environment.name",
    "host.name",
    "process.pid",
    "process.runtime.name",
    "process.runtime.version",
];

/// The JVMs that sent data: one row per `service.instance.id` (or host and pid), with the
/// profile types they sent and when they were last heard of.
pub fn instances(store: &Path) -> Result<String, String> {
    let source = commands::open_source(&[store.to_path_buf()])
        .map_err(|e| format!("{e:#}"))?
        .use_series(None);
    #[derive(Default)]
    struct Row {
        attrs: BTreeMap<&'static str, String>,
        types: BTreeSet<&'static str>,
        profiles: usize,
        first: i64,
        last: i64,
    }
    let states = source
        .scan(BTreeMap::<String, Row>::new, |rows, d| {
            let value = |k: &str| select::resource_value(&d.resource, k);
            let id = value("service.instance.id").unwrap_or_else(|| {
                format!(
                    "{}/{}",
                    value("host.name").unwrap_or_default(),
                    value("process.pid").unwrap_or_default()
                )
            });
            let row = rows.entry(id).or_insert_with(|| Row {
                first: i64::MAX,
                last: i64::MIN,
                ..Row::default()
            });
            for k in INSTANCE_KEYS {
                if let Some(v) = value(k) {
                    row.attrs.insert(k, v);
                }
            }
            if let Some(t) = ProfileType::of(&d.profile) {
                row.types.insert(t.name());
            }
            row.profiles += 1;
            let p = &d.profile;
            row.first = row.first.min(p.time_nanos);
            row.last = row
                .last
                .max(p.time_nanos.saturating_add(p.duration_nanos.max(0)));
        })
        .map_err(|e| format!("{e:#}"))?;
    let mut all: BTreeMap<String, Row> = BTreeMap::new();
    for state in states {
        for (id, r) in state {
            let row = all.entry(id).or_insert_with(|| Row {
                first: i64::MAX,
                last: i64::MIN,
                ..Row::default()
            });
            row.attrs.extend(r.attrs);
            row.types.extend(r.types);
            row.profiles += r.profiles;
            row.first = row.first.min(r.first);
            row.last = row.last.max(r.last);
        }
    }
    let list: Vec<Value> = all
        .iter()
        .map(|(id, r)| {
            json!({"instance": id, "attributes": r.attrs, "types": r.types,
                   "profiles": r.profiles, "first": r.first, "last": r.last})
        })
        .collect();
    Ok(json!({ "instances": list }).to_string())
}

/// Keys offered as pickers on the Explore view.
pub const PICKER_KEYS: [&str; 6] = [
    "service.name",
    "service.version",
    "deployment.environment.name",
    "span_name",
    "thread.pool",
    "thread.state",
];

/// The values of the picker keys present in the store, and its profile types.
pub fn values(store: &Path) -> Result<String, String> {
    let source = commands::open_source(&[store.to_path_buf()])
        .map_err(|e| format!("{e:#}"))?
        .use_series(None);
    let keys: Vec<String> = PICKER_KEYS.iter().map(|k| (*k).to_owned()).collect();
    let (values, types) = query::present(&source, &keys, MAX_VALUES);
    let map: BTreeMap<&str, Vec<String>> = PICKER_KEYS.iter().copied().zip(values).collect();
    Ok(json!({"keys": map, "types": types}).to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_flame_data_is_spliced_into_the_object() {
        let tree = Tree::default();
        let text = with_flame(json!({"a": 1}), &tree);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["a"], 1);
        assert!(v["flame"]["names"].is_array());
        let v: Value = serde_json::from_str(&with_flame(json!({}), &tree)).unwrap();
        assert!(v["flame"].is_object());
    }
}
