//! The CI gate of docs/ci-gate.md, run as a team would run it: examples/ci-gate/gate.sh on two
//! builds of the example service (examples/ci-gate/service, JDK-only). One build carries a
//! regression (each product name escaped in four passes instead of one: `Pages.render` slower
//! through the shared `Html.escape`); the gate must fail with code 3. Two identical builds must
//! pass. A head that starts throwing an exception per product name must fail it with
//! GATE_FINDINGS set, while its CPU diff alone passes. The document must show the script as it
//! is.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use otelprof_tests::{
    cli_path, free_port, jdk17, pprof_top, repo_root, run_with_timeout, scratch_dir,
};

const REGRESSION: (&str, &str) = (
    "static final int ESCAPE_PASSES = 1;",
    "static final int ESCAPE_PASSES = 4;",
);

/// A change that parses each product name as a number, which throws for every one.
const EXCEPTIONS: (&str, &str) = (
    "            String escaped = name;",
    "            try {\n                Integer.parseInt(name);\n            } catch (NumberFormatException e) {\n                // not a number: as expected\n            }\n            String escaped = name;",
);

/// A checkout of the example service: its sources and scripts, copied, with `change` made to
/// Pages.java.
fn checkout(dir: &Path, change: Option<(&str, &str)>) -> PathBuf {
    let from = repo_root().join("examples/ci-gate/service");
    copy_tree(&from, dir);
    if let Some((old, new)) = change {
        let pages = dir.join("src/otelprof/example/Pages.java");
        let text = std::fs::read_to_string(&pages).unwrap();
        assert!(text.contains(old), "Pages.java changed: update the test");
        std::fs::write(&pages, text.replace(old, new)).unwrap();
    }
    dir.to_path_buf()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            if e.file_name() != "classes" {
                copy_tree(&src, &dst);
            }
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

struct Gate {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    out: PathBuf,
}

/// Runs the gate on `base` and `head` with the settings of the example, and `env`.
fn gate(base: &Path, head: &Path, env: &[(&str, &str)]) -> Gate {
    let out = scratch_dir("gate-out");
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("examples/ci-gate/gate.sh"))
        .arg(base)
        .arg(head)
        .env("OTELPROF", cli_path())
        .env("JAVA_HOME", jdk17().home)
        .env("SERVICE_PORT", free_port().to_string())
        .env("LOAD_SECONDS", "10")
        .env("GATE_WARMUP", "3")
        .env("GATE_FAIL_ABOVE", "5")
        .env("GATE_OUT", &out)
        .env_remove("JAVA_TOOL_OPTIONS")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (code, stdout, stderr, elapsed) = run_with_timeout(cmd, Duration::from_secs(240));
    println!("gate: exit {code:?} after {elapsed:?}\n{stdout}\n{stderr}");
    Gate {
        code,
        stdout,
        stderr,
        out,
    }
}

/// The cumulative share (%) of `function` in the pprof files the gate kept for `side`.
fn pprof_share(out: &Path, side: &str, function: &str) -> f64 {
    let mut files: Vec<PathBuf> = std::fs::read_dir(out.join(format!("{side}-pprof")))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .collect();
    files.sort();
    let top = pprof_top(&files, "cpu", &[]);
    top.cum(function) / top.total * 100.0
}

#[test]
fn a_regressed_build_fails_the_gate_with_code_3() {
    let dir = scratch_dir("gate-checkouts");
    let base = checkout(&dir.join("base"), None);
    let head = checkout(&dir.join("head"), Some(REGRESSION));
    let g = gate(&base, &head, &[]);
    assert_eq!(g.code, Some(3), "the regression must fail the gate");
    assert!(
        g.stderr.contains("otelprof: regression: otelprof.example."),
        "{}",
        g.stderr
    );
    assert!(
        g.stdout
            .contains("Largest significant increase: otelprof.example."),
        "{}",
        g.stdout
    );
    // The change is named where it lives: the shared escaper, carried by the page renderer.
    assert!(
        g.stdout.contains("Html.escape ← Pages.render"),
        "{}",
        g.stdout
    );
    assert!(g.out.join("diff.html").is_file());
    // go tool pprof on the agent's own pprof files sees the same growth.
    let grew = pprof_share(&g.out, "head", "otelprof.example.Html.escape")
        - pprof_share(&g.out, "base", "otelprof.example.Html.escape");
    assert!(grew > 10.0, "go tool pprof: Html.escape grew {grew:+.1} pp");
}

#[test]
fn identical_builds_pass_the_gate() {
    let dir = scratch_dir("gate-checkouts");
    let base = checkout(&dir.join("base"), None);
    let head = checkout(&dir.join("head"), None);
    // With the findings gate on: whatever the two share is old, so it passes too.
    let g = gate(&base, &head, &[("GATE_FINDINGS", "warning")]);
    assert_eq!(g.code, Some(0), "two identical builds must pass");
    assert!(g.stderr.contains("gate: pass: no function"), "{}", g.stderr);
    assert!(
        g.stderr.contains("gate: pass: no new finding"),
        "{}",
        g.stderr
    );
}

#[test]
fn a_new_finding_fails_the_gate_when_asked() {
    let dir = scratch_dir("gate-checkouts");
    let base = checkout(&dir.join("base"), None);
    let head = checkout(&dir.join("head"), Some(EXCEPTIONS));
    // No share may grow by 100 pp: only the findings can stop it.
    let g = gate(
        &base,
        &head,
        &[("GATE_FINDINGS", "warning"), ("GATE_FAIL_ABOVE", "100")],
    );
    assert_eq!(g.code, Some(3), "a new finding must fail the gate");
    assert!(
        g.stderr
            .contains(": new: Exceptions used for control flow in otelprof.example.Pages.render"),
        "{}",
        g.stderr
    );
    assert!(
        g.stderr.contains("gate: FAIL: a new finding"),
        "{}",
        g.stderr
    );
}

#[test]
fn the_document_shows_the_script_as_it_is() {
    let doc = std::fs::read_to_string(repo_root().join("docs/ci-gate.md")).unwrap();
    let script = std::fs::read_to_string(repo_root().join("examples/ci-gate/gate.sh")).unwrap();
    assert!(
        doc.contains(&script),
        "docs/ci-gate.md must quote examples/ci-gate/gate.sh in full, as it is"
    );
}
