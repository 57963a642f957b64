//! All four profile types together (cpu, wall, alloc, lock): one pprof file per type and
//! period, named after the type and typed as docs/output-format.md says (read with `go tool pprof
//! -raw`); one OTLP profile per sample type, checked by the independent receiver
//! (tests/python); strict options; and safety under thread churn with every type on.

use otelprof_tests::Tied as _;
use std::path::Path;
use std::process::Command;

use otelprof_tests::{
    all_jdks, jdk17, otel_classes, otel_sdk_jar, which, JvmRun, OtlpProtocol, Receiver,
};

const WALL_STATES: &str = "otelprof.tests.otel.WallStates";
const ALL_TYPES: &str = "cpu=10ms,wall=10ms,alloc=64k,lock=1ms";

/// `(sample types, period type)` as `go tool pprof -raw` reports them, e.g.
/// `(["contentions/count", "delay/nanoseconds"], "mutex count")`.
fn pprof_types(file: &Path) -> (Vec<String>, String) {
    let out = Command::new(which("go").unwrap())
        .args(["tool", "pprof", "-raw"])
        .arg(file)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let period = text
        .lines()
        .find_map(|l| l.strip_prefix("PeriodType: "))
        .unwrap_or("")
        .to_owned();
    let mut lines = text.lines().skip_while(|l| *l != "Samples:");
    lines.next();
    let types = lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(|t| t.trim_end_matches("[dflt]").to_owned())
        .collect();
    (types, period)
}

#[test]
fn every_type_gets_its_own_pprof_files_and_otlp_profiles() {
    let receiver = Receiver::start(OtlpProtocol::Http);
    let run = JvmRun::new(jdk17(), WALL_STATES)
        .javaagent()
        .agent(&format!(
            "{ALL_TYPES},period=2s,{}",
            receiver.agent_options()
        ))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .args(&["2", "1", "5"])
        .run();
    run.assert_clean_exit();
    let c = run.agent_counters();
    println!("agent {c:?}");
    for key in ["wall_samples", "alloc_samples", "lock_samples", "cpu_ticks"] {
        assert!(c[key] > 0, "{key}: {c:?}");
    }

    // Files: per type, one per period, typed as docs/output-format.md says.
    let expected = [
        (
            "cpu",
            vec!["samples/count", "cpu/nanoseconds"],
            "cpu nanoseconds",
        ),
        ("wall", vec!["wall/nanoseconds"], "wall nanoseconds"),
        (
            "alloc",
            vec!["alloc_objects/count", "alloc_space/bytes"],
            "memory bytes",
        ),
        (
            "lock",
            vec!["contentions/count", "delay/nanoseconds"],
            "mutex count",
        ),
    ];
    let all = run.profiles();
    let mut per_type = Vec::new();
    for (kind, types, period) in &expected {
        let files = run.profiles_of(kind);
        assert!(files.len() >= 3, "{kind}: {files:?} (5 s at period=2s)");
        per_type.push(files.len());
        for f in &files {
            let (t, p) = pprof_types(f);
            assert_eq!(&t, types, "{}", f.display());
            assert_eq!(&p, period, "{}", f.display());
        }
    }
    assert!(per_type.iter().all(|n| *n == per_type[0]), "{per_type:?}");
    assert_eq!(all.len(), per_type.iter().sum::<usize>(), "{all:?}");

    // OTLP: one request per type and period, one OTLP profile per sample type (the CPU's
    // nanoseconds are derived from its count), every rule of docs/output-format.md.
    let s = receiver.check();
    let v = s["violations"].as_array().unwrap();
    assert!(v.is_empty(), "docs/output-format.md violations: {v:#?}");
    println!(
        "OTLP: {} requests, {} profiles, types {}",
        s["requests"], s["profiles"], s["types"]
    );
    assert_eq!(
        s["types"],
        serde_json::json!([
            "alloc_objects/count period memory/bytes 65536",
            "alloc_space/bytes period memory/bytes 65536",
            "contentions/count period mutex/count 1",
            "delay/nanoseconds period mutex/count 1",
            "samples/count period cpu/nanoseconds 10000000",
            "wall/nanoseconds period wall/nanoseconds 10000000",
        ])
    );
    let requests = s["requests"].as_u64().unwrap();
    assert_eq!(requests, 4 * per_type[0] as u64);
    assert_eq!(s["profiles"].as_u64().unwrap(), 6 * per_type[0] as u64);
    assert_eq!(s["unique_profile_ids"], s["profiles"]);
    assert_eq!(c["otlp_sent"], requests);
    let keys = s["sample_attribute_keys"].as_array().unwrap();
    for key in ["thread.name", "thread.state", "span_name"] {
        assert!(keys.iter().any(|k| k == key), "{key} not in {keys:?}");
    }
    assert!(
        !keys.iter().any(|k| k == "thread_state"),
        "labels travel under their attribute names: {keys:?}"
    );
}

#[test]
fn cpu_off_with_other_types_writes_only_those() {
    let run = JvmRun::new(jdk17(), WALL_STATES)
        .javaagent()
        .agent("cpu=off,wall=20ms,lock=10ms")
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .args(&["2", "0", "2"])
        .run();
    run.assert_clean_exit();
    let c = run.agent_counters();
    assert_eq!(c["timers_created"], 0, "no CPU timers with cpu=off");
    assert!(c["wall_samples"] > 0 && c["lock_samples"] > 0, "{c:?}");
    assert!(run.profiles_of("cpu").is_empty());
    assert!(run.profiles_of("alloc").is_empty());
    assert_eq!(run.profiles_of("wall").len(), 1);
    assert_eq!(run.profiles_of("lock").len(), 1);
}

#[test]
fn bad_type_options_turn_profiling_off_with_one_line() {
    for (options, mention) in [
        ("wall=5", "wall=5"),
        ("wall=500us", "wall=500us"),
        ("wall_threads=0", "wall_threads=0"),
        ("alloc=lots", "alloc=lots"),
        ("alloc=4g", "alloc=4g"),
        ("lock=soon", "lock=soon"),
        ("lock", "needs a value"),
        ("locks=10ms", "'locks'"),
    ] {
        let mut run = JvmRun::new(jdk17(), "otelprof.workloads.CpuSplit")
            .args(&["1", "0.3"])
            .agent(options);
        run.add_out_dir = false;
        let out = run.run();
        out.assert_clean_exit();
        let lines = out.agent_lines();
        assert_eq!(lines.len(), 1, "{options}: {lines:?}");
        assert!(lines[0].contains(mention), "{options}: {lines:?}");
        assert!(
            lines[0].contains("profiling is off"),
            "{options}: {lines:?}"
        );
        assert!(out.profiles().is_empty());
    }
}

/// 10,000 short threads while every type samples as fast as it can: wall signals race thread
/// exits, allocation and monitor callbacks run on threads about to end. No crash, no hang,
/// every type written, and the final counters make sense.
#[test]
fn thread_churn_with_every_type_on_is_safe() {
    for jdk in all_jdks() {
        let run = JvmRun::new(jdk.clone(), "otelprof.tests.ManyThreads")
            .args(&["10000", "32"])
            .agent("cpu=1ms,wall=1ms,wall_threads=64,alloc=16k,lock=0")
            .run();
        run.assert_clean_exit();
        let c = run.agent_counters();
        println!("{}: {}", jdk.name, run.stdout.trim());
        println!("{}: {c:?}", jdk.name);
        assert!(c["threads_started"] >= 10_000, "{c:?}");
        assert!(c["wall_samples"] > 100, "{c:?}");
        assert!(c["alloc_samples"] > 0, "{c:?}");
        assert_eq!(c["table_full"], 0);
        assert_eq!(c["timers_created"], c["timers_deleted"], "{c:?}");
        for kind in ["cpu", "wall", "alloc", "lock"] {
            assert_eq!(run.profiles_of(kind).len(), 1, "{kind}");
        }
    }
}
