//! The SQL of docs/sql.md, run as written by DuckDB and by Spark (PyPI `duckdb`, `pyspark`
//! in local mode, in the test venv; one Spark session for all queries) on the
//! Parquet files of a store (store/tests/python/sql_doc.py), by Spark again through the
//! doc's Hive DDL in a metastore, and by ClickHouse's engine (PyPI `chdb`) from a bucket,
//! against what the query engine
//! behind `otelprof top` and `otelprof diff` answers from the OTLP files of the same store:
//! equal totals, the same top 20, the same figures per endpoint, version and hour.
// Test code (clippy.toml allows these in #[test]s; the helpers are outside them).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{build_store, scratch, T0};
use otelprof_store::columnar::compact;
use otelprof_store::query::{self, top, Spec};
use otelprof_store::select::Condition;
use otelprof_store::{ProfileType, Selector, Source};

const HOUR: i64 = 3_600_000_000_000;

/// The venv's Python (or `OTELPROF_PYTHON`), as the cross-component tests find it.
fn python() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let p = std::env::var_os("OTELPROF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.join("otlp-venv/bin/python"));
    assert!(
        p.is_file(),
        "{} is missing: run scripts/test.sh (it makes the venv with duckdb)",
        p.display()
    );
    p
}

/// The doc's queries, with their parameters, as sql_doc.py takes them.
const QUERIES: [&str; 4] = [
    "top_functions",
    "cpu_by_endpoint_and_version",
    "function_trend:function=app.Work.step1",
    "version_share_diff:base=1.0,head=2.0",
];

/// The rows of each of the doc's [`QUERIES`] run by `engine` (`duckdb`, `spark`) in one
/// session on the store at `store`, fields split.
fn run_doc(engine: &str, store: &Path) -> BTreeMap<String, Vec<Vec<String>>> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python())
        .arg(manifest.join("tests/python/sql_doc.py"))
        .arg(engine)
        .arg(manifest.join("../docs/sql.md"))
        .arg(store)
        .args(QUERIES)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sql_doc.py {engine}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    answers_of(&out.stdout)
}

/// The answers a runner printed: `== QUERY`, then its rows tab-separated.
fn answers_of(stdout: &[u8]) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut answers = BTreeMap::new();
    let mut current = None;
    for line in String::from_utf8(stdout.to_vec()).unwrap().lines() {
        if let Some(name) = line.strip_prefix("== ") {
            current = Some(name.to_owned());
            answers.insert(name.to_owned(), Vec::new());
        } else {
            let rows: &mut Vec<Vec<String>> = answers.get_mut(current.as_ref().unwrap()).unwrap();
            rows.push(line.split('\t').map(str::to_owned).collect());
        }
    }
    answers
}

fn num(s: &str) -> f64 {
    s.parse().unwrap()
}

fn selector(conditions: &[&str], from: Option<i64>, to: Option<i64>) -> Selector {
    Selector {
        conditions: conditions
            .iter()
            .map(|c| Condition::parse(c).unwrap())
            .collect(),
        from,
        to,
        ..Selector::default()
    }
}

/// The engine's top functions (name, self, total) and total for a selection, CPU.
fn engine_top(files: &Source, sel: &Selector) -> (Vec<(String, f64, f64)>, f64) {
    let (merged, _) = query::merge(files, Spec::new(Some(ProfileType::Cpu), sel)).unwrap();
    let table = top::top_functions(&merged, None);
    let rows = table
        .rows
        .iter()
        .map(|r| (r.name.clone(), r.self_value, r.total_value))
        .collect();
    (rows, table.total)
}

/// The engine's CPU total per group of `key` (`otelprof top --by KEY`).
fn engine_by(files: &Source, key: &str) -> BTreeMap<String, f64> {
    let spec = Spec::new(Some(ProfileType::Cpu), &Selector::default()).by(Some(key));
    let (merged, _) = query::merge(files, spec).unwrap();
    let mut out = BTreeMap::new();
    for s in &merged.stacks {
        *out.entry(merged.group(s.group).to_owned()).or_insert(0.0) += s.value;
    }
    out
}

#[test]
fn the_documented_sql_answers_as_otelprof() {
    let dir = scratch("sql-doc");
    build_store(&dir);
    let files = Source::open(&[dir.join("profiles")], Box::new(|_, _| {})).unwrap();
    // One engine after the other: Spark's JVM takes a core or two by itself.
    for engine in ["duckdb", "spark"] {
        check(engine, &run_doc(engine, &dir), &files);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The doc's Hive DDL, run by Spark with a Hive metastore, over a compacted store (whose
/// partitions hold rollups, spans and series beside the samples and stacks: the doc's views
/// keep them out), answers the doc's queries as otelprof does.
#[test]
fn a_hive_catalog_declares_the_tables_of_a_compacted_store() {
    let dir = scratch("sql-doc-hive");
    build_store(&dir);
    let compacted = compact(&dir, T0 + 10 * HOUR, 0).unwrap();
    assert_eq!(compacted.len(), 4, "two services, two hours: {compacted:?}");
    let names: Vec<String> = walk(&dir.join("columnar"));
    for kind in [
        "rollup-",
        "spans-",
        "samples-compacted-",
        "stacks-compacted-",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(kind)),
            "{kind} in {names:?}"
        );
    }
    let files = Source::open(&[dir.join("profiles")], Box::new(|_, _| {})).unwrap();
    check("spark-hive", &run_doc("spark-hive", &dir), &files);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The names of the files under `dir`.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

/// Checks an engine's answers to the doc's queries against the query engine's.
fn check(engine: &str, answers: &BTreeMap<String, Vec<Vec<String>>>, files: &Source) {
    let sql = |name: &str| -> &Vec<Vec<String>> { &answers[name] };

    // Top functions: the same 20 rows, self and total.
    let (want, total) = engine_top(files, &Selector::default());
    let got = sql("top_functions");
    eprintln!("{engine} top functions: {got:?}\notelprof: {want:?}, total {total}");
    assert_eq!(got.len(), want.len().min(20));
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            (g[0].as_str(), num(&g[1]), num(&g[2])),
            (w.0.as_str(), w.1, w.2)
        );
    }

    // CPU per endpoint and version: each sums to the total, and per version and per
    // endpoint to what `top --by` gives.
    let rows = sql("cpu_by_endpoint_and_version");
    eprintln!("{engine} CPU per version and endpoint: {rows:?}");
    let sql_total: f64 = rows.iter().map(|r| num(&r[2])).sum();
    assert_eq!(sql_total, total);
    for (key, col) in [("service.version", 0), ("span_name", 1)] {
        let mut by_sql: BTreeMap<String, f64> = BTreeMap::new();
        for r in rows {
            *by_sql.entry(r[col].clone()).or_insert(0.0) += num(&r[2]);
        }
        let by_engine = engine_by(files, key);
        eprintln!("otelprof top --by {key}: {by_engine:?}");
        assert!(by_sql.len() >= 2, "{key}: {by_sql:?}");
        // Samples without the key are one group in SQL (''); the engine labels them itself
        // (`<none>`, or a thread's role such as `[GC]` for samples outside spans).
        let unnamed = by_sql.remove("").unwrap_or(0.0);
        for (k, v) in &by_sql {
            assert_eq!(by_engine.get(k), Some(v), "{key}={k}: {by_engine:?}");
        }
        let others: f64 = by_engine
            .iter()
            .filter(|(k, _)| !by_sql.contains_key(*k))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(others, unnamed, "{key}: {by_engine:?}");
    }

    // One function's trend per hour: the function's total in each hour's selection.
    let function = "app.Work.step1";
    let rows = sql("function_trend");
    eprintln!("{engine} trend of {function}: {rows:?}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (i, r) in rows.iter().enumerate() {
        let from = T0 + i as i64 * HOUR;
        assert_eq!(r[0], otelprof_store::format_time(from)[..13]);
        let (top, _) = engine_top(files, &selector(&[], Some(from), Some(from + HOUR)));
        let (_, _, total) = top.iter().find(|t| t.0 == function).unwrap();
        eprintln!("otelprof, hour {}: {function} total {total}", r[0]);
        assert_eq!(num(&r[1]), *total, "{}", r[0]);
    }

    // The share diff of two versions: each version's self share, and the 20 largest changes.
    let rows = sql("version_share_diff");
    let share = |version: &str| -> BTreeMap<String, f64> {
        let cond = format!("service.version={version}");
        let (top, total) = engine_top(files, &selector(&[&cond], None, None));
        top.into_iter()
            .map(|(name, self_value, _)| (name, 100.0 * self_value / total))
            .collect()
    };
    let (base, head) = (share("1.0"), share("2.0"));
    let mut want: Vec<(String, f64)> = base
        .keys()
        .chain(head.keys())
        .map(|f| {
            let b = base.get(f).copied().unwrap_or(0.0);
            let h = head.get(f).copied().unwrap_or(0.0);
            (f.clone(), h - b)
        })
        .filter(|(f, _)| {
            base.get(f).is_some_and(|v| *v > 0.0) || head.get(f).is_some_and(|v| *v > 0.0)
        })
        .collect();
    want.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then(a.0.cmp(&b.0)));
    want.dedup_by(|a, b| a.0 == b.0);
    want.truncate(20);
    eprintln!("{engine} share diff 1.0 -> 2.0: {rows:?}\notelprof (change, pp): {want:?}");
    assert_eq!(rows.len(), want.len(), "{rows:?}");
    // The same functions, each with the same shares, in order of the change (changes equal
    // but for rounding may come in either order).
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    let mut last = f64::INFINITY;
    for r in rows {
        let f = &r[0];
        let (_, change) = want.iter().find(|(w, _)| w == f).unwrap();
        assert!(close(num(&r[3]), *change), "{f}: {r:?} against {change}");
        assert!(
            close(num(&r[1]), base.get(f).copied().unwrap_or(0.0)),
            "{f}"
        );
        assert!(
            close(num(&r[2]), head.get(f).copied().unwrap_or(0.0)),
            "{f}"
        );
        assert!(change.abs() <= last + 1e-9, "{f} out of order: {rows:?}");
        last = change.abs();
    }
}

/// The doc's queries, run by chDB over the ClickHouse views of the store's Parquet files in a
/// bucket (an S3 API server on loopback, moto's, started and ended by
/// store/tests/python/chdb_s3.py), in one session.
fn clickhouse(columnar: &Path) -> BTreeMap<String, Vec<Vec<String>>> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python())
        .arg(manifest.join("tests/python/chdb_s3.py"))
        .arg(manifest.join("../docs/sql.md"))
        .arg(columnar)
        .args(QUERIES)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chdb_s3.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    answers_of(&out.stdout)
}

#[test]
fn clickhouse_answers_the_documented_sql_from_a_bucket() {
    let dir = scratch("sql-doc-clickhouse");
    build_store(&dir);
    let files = Source::open(&[dir.join("profiles")], Box::new(|_, _| {})).unwrap();
    check("clickhouse", &clickhouse(&dir.join("columnar")), &files);
    let _ = std::fs::remove_dir_all(&dir);
}
