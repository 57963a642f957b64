//! An outside engine reads the columnar store as it is: DuckDB (PyPI `duckdb`, in the test
//! venv that scripts/test.sh makes from tests/python/requirements.txt) computes the top
//! functions from the Parquet files alone (store/tests/python/duckdb_top.py) and gets what
//! `otelprof top` prints from the OTLP files: the same functions in the same order, with the
//! same self and total values.
// Test code (clippy.toml allows these in #[test]s; the helpers are outside them).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{build_store, scratch};
use otelprof_store::query::{self, top, Spec};
use otelprof_store::{ProfileType, Selector, Source};

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

/// (function, self, total) rows and the total, values in whole units.
type Top = (Vec<(String, i64, i64)>, i64);

fn duckdb_top(columnar: &std::path::Path, ty: &str) -> Top {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/duckdb_top.py");
    let out = Command::new(python())
        .arg(script)
        .arg(columnar)
        .arg(ty)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "duckdb_top.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // `total\tN`, then `name\tfile\tself\ttotal` a row.
    let mut lines = text.lines();
    let num = |s: &str| s.trim().parse::<f64>().unwrap() as i64;
    let total = num(lines.next().unwrap().strip_prefix("total\t").unwrap());
    let rows = lines
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 4, "{line}");
            (fields[0].to_owned(), num(fields[2]), num(fields[3]))
        })
        .collect();
    (rows, total)
}

fn engine_top(source: &Source, ty: ProfileType) -> Top {
    let (merged, _) = query::merge(source, Spec::new(Some(ty), &Selector::default())).unwrap();
    let table = top::top_functions(&merged, None);
    let rows = table
        .rows
        .iter()
        .map(|r| (r.name.clone(), r.self_value as i64, r.total_value as i64))
        .collect();
    (rows, table.total as i64)
}

#[test]
fn duckdb_reads_the_same_top_functions_as_otelprof_top() {
    let dir = scratch("duckdb");
    build_store(&dir);
    let files = Source::open(&[dir.join("profiles")], Box::new(|_, _| {})).unwrap();
    for (ty, name) in [(ProfileType::Cpu, "cpu"), (ProfileType::Alloc, "alloc")] {
        let want = engine_top(&files, ty);
        let got = duckdb_top(&dir.join("columnar"), name);
        assert!(want.1 > 0 && want.0.len() >= 2, "{name}: {want:?}");
        assert_eq!(got.1, want.1, "{name}: totals");
        assert_eq!(got.0, want.0, "{name}: rows");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
