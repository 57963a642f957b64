//! collector-config/*.yaml: valid YAML whose pipelines reference only defined components, with
//! a profiles pipeline the Collector accepts (memory_limiter first, no batch processor).
//! Checked by tests/python/check_collector_config.py (PyYAML).

use otelprof_tests::Tied as _;
use std::path::PathBuf;
use std::process::Command;

use otelprof_tests::{python, repo_root, scratch_dir};

fn check(files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(python())
        .arg(repo_root().join("tests/python/check_collector_config.py"))
        .args(files)
        .output_tied()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn shipped_configurations_are_valid() {
    let dir = repo_root().join("collector-config");
    let files = vec![dir.join("agent.yaml"), dir.join("gateway.yaml")];
    let (ok, text) = check(&files);
    println!("{text}");
    assert!(ok, "{text}");
    assert!(text.contains("2 collector configurations OK"), "{text}");
}

/// The checker must catch what the Collector would refuse.
#[test]
fn broken_configurations_are_caught() {
    let dir = scratch_dir("collector-config");
    let broken = dir.join("broken.yaml");
    std::fs::write(
        &broken,
        "receivers:\n  otlp:\n    protocols:\n      grpc: {}\nprocessors:\n  batch: {}\n  memory_limiter: {}\nexporters:\n  otlp_grpc/unused: {}\nservice:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n      processors: [batch]\n      exporters: [otlp_grpc/missing]\n",
    )
    .unwrap();
    let (ok, text) = check(std::slice::from_ref(&broken));
    assert!(!ok, "{text}");
    for problem in [
        "undefined exporter 'otlp_grpc/missing'",
        "must start with memory_limiter",
        "batch processor does not support profiles",
        "exporter 'otlp_grpc/unused' is defined but never used",
        "processor 'memory_limiter' is defined but never used",
    ] {
        assert!(text.contains(problem), "missing {problem:?} in:\n{text}");
    }
    std::fs::write(&broken, "receivers: [unclosed").unwrap();
    let (ok, text) = check(&[broken]);
    assert!(!ok && text.contains("yaml"), "{text}");
}
