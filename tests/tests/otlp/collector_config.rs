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
    let files = vec![
        dir.join("agent.yaml"),
        dir.join("gateway.yaml"),
        dir.join("pyroscope.yaml"),
    ];
    let (ok, text) = check(&files);
    println!("{text}");
    assert!(ok, "{text}");
    assert!(text.contains("3 collector configurations OK"), "{text}");
}

/// The Pyroscope pipeline: its agent line is options the agent takes, with the preset that
/// links samples to local roots, and it exports to Pyroscope's OTLP port as gRPC.
#[test]
fn the_pyroscope_pipeline_goes_with_the_preset() {
    let text =
        std::fs::read_to_string(repo_root().join("collector-config/pyroscope.yaml")).unwrap();
    let line = text
        .lines()
        .find_map(|l| {
            l.trim_start_matches('#')
                .trim()
                .strip_prefix("-javaagent:otelprof.jar=")
        })
        .expect("no agent line");
    let mut keys = Vec::new();
    for item in otelprof_agent_options::items(line) {
        let (key, value) = item.unwrap();
        otelprof_agent_options::check_item(key, value).unwrap_or_else(|e| panic!("{key}: {e:?}"));
        keys.push((key, value));
    }
    assert!(keys.contains(&("backend", "pyroscope")), "{keys:?}");
    assert!(keys.contains(&("protocol", "grpc")), "{keys:?}");
    // The preset's links name local roots, what Grafana queries.
    let preset = otelprof_agent_options::backend::find("pyroscope").unwrap();
    assert!(preset.defaults.contains(&("links", "local_root")));
    assert!(text.contains("otlp_grpc/pyroscope:") && text.contains("insecure: true"));
    assert!(text.contains("service.profilesSupport"));
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
