//! The JVM's memory figures among the agent's OTLP metrics, and live-heap snapshots over
//! OTLP, from a real JVM (tests/java-otel GcPauses: full collections of a 256 MiB heap of
//! small objects, each timed) into the independent receiver (tests/python, the official
//! generated classes). The figures are checked against what the workload measures itself:
//! the heap pools' usage after the last collection, the collections, their time, and the
//! bytes its threads allocated.

use otelprof_tests::{
    jdk17, jdk25, otel_classes, otel_sdk_jar, Jdk, JvmRun, OtlpProtocol, Receiver,
};
use serde_json::Value;

const CLASS: &str = "otelprof.tests.otel.GcPauses";

fn num(v: &Value, what: &str) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {v}"))
}

fn check(jdk: Jdk) {
    let receiver = Receiver::start(OtlpProtocol::Grpc);
    let out = JvmRun::new(jdk.clone(), CLASS)
        .javaagent()
        .agent(&format!(
            "cpu=off,live=512k,period=2s,{}",
            receiver.agent_options()
        ))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .flags(&["-Xmx1g", "-XX:+UseG1GC"])
        // The last export, at exit, comes 2.2 s after the last collection: within the
        // interval that the longest recent pause looks back over.
        .env("OTEL_METRIC_EXPORT_INTERVAL", "3000")
        .args(&["256", "5"])
        .run();
    out.assert_clean_exit();
    let value = |key: &str| out.stdout_number(key);
    let s = receiver.check();
    let v = s["violations"].as_array().unwrap();
    assert!(v.is_empty(), "docs/output-format.md violations: {v:#?}");
    let m = &s["metrics"];
    println!("{}: metrics {m}", jdk.name);
    let metric = |name: &str| num(&m[name], name);

    // Heap after collection: the same pools the workload sums, read after the last one.
    let heap = metric("otelprof.jvm.heap.used_after_gc");
    let truth = value("heap_after_gc");
    println!(
        "{}: heap used after the last collection {:.1} MB, the workload reads {:.1} MB",
        jdk.name,
        heap / 1e6,
        truth / 1e6
    );
    assert!((heap / truth - 1.0).abs() <= 0.02, "{heap} vs {truth}");
    assert!(heap > 256e6, "the 256 MiB held: {heap}");

    // Collections and pauses: at least the workload's five full collections, and their time.
    let collections = metric("otelprof.jvm.gc.collections");
    assert!(
        (5.0..=value("collections")).contains(&collections),
        "{collections} vs the beans' {}",
        value("collections")
    );
    let pauses = metric("otelprof.jvm.gc.pauses");
    assert!(pauses >= 5.0, "{pauses}");
    let pause_s = metric("otelprof.jvm.gc.pause.time");
    let gc_s = value("gc_total") / 1e9;
    println!(
        "{}: {pauses} pauses of {pause_s:.3} s in all; the five System.gc() calls took {gc_s:.3} s",
        jdk.name
    );
    assert!(
        pause_s >= 0.8 * gc_s && pause_s <= gc_s + 2.0,
        "{pause_s} s vs {gc_s} s"
    );
    // The longest pause of the last interval: the last collection's, which the workload
    // timed from outside (a little longer: the safepoint before it).
    let last_gc_s = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("gc "))
        .unwrap()
        .parse::<f64>()
        .unwrap()
        / 1e9;
    let max_s = metric("otelprof.jvm.gc.pause.max");
    println!(
        "{}: longest recent pause {max_s:.3} s, the last System.gc() {last_gc_s:.3} s",
        jdk.name
    );
    assert!(
        max_s >= 0.7 * last_gc_s && max_s <= last_gc_s * 1.05 + 0.01,
        "{max_s} s vs {last_gc_s} s"
    );

    // Allocation: the estimate of every sample against the threads' own counters.
    let allocated = metric("otelprof.jvm.memory.allocated");
    let true_allocated = value("allocated");
    let ratio = allocated / true_allocated;
    println!(
        "{}: allocated {:.0} MB estimated, {:.0} MB by the threads' counters ({ratio:.3})",
        jdk.name,
        allocated / 1e6,
        true_allocated / 1e6
    );
    assert!((0.9..=1.2).contains(&ratio), "{ratio}");

    // The live heap's own state, and its snapshots over OTLP.
    assert!(metric("otelprof.live.entries") > 100.0, "{m}");
    assert_eq!(metric("otelprof.live.interval"), 524_288.0);
    let types: Vec<&str> = s["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in ["inuse_objects/count", "inuse_space/bytes"] {
        assert!(
            types.contains(&format!("{t} period memory/bytes 524288").as_str()),
            "{types:?}"
        );
    }
    let node = &s["functions"]["otelprof.tests.otel.GcPauses$Node"];
    assert!(
        !node.is_null(),
        "the held Node objects are in the snapshots"
    );
}

#[test]
fn memory_figures_and_live_snapshots_reach_the_receiver() {
    for jdk in [jdk17(), jdk25()] {
        check(jdk);
    }
}
