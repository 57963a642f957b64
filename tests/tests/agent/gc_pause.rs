//! Garbage collection pauses in wall profiles (tests/java-otel GcPauses): a worker thread in
//! a span computes and sleeps by turns while the main thread runs full collections of a
//! 256 MiB heap of small objects, timing each. The worker sits through every pause; its wall
//! profile must show that time as its own samples, state `GC_PAUSE` under a `[GC pause]`
//! leaf frame, with the worker's span, and as much of it as the collections took.

use otelprof_tests::{all_jdks, otel_classes, otel_sdk_jar, pprof_traces, Jdk, JvmRun};

const CLASS: &str = "otelprof.tests.otel.GcPauses";

fn check(jdk: Jdk) {
    let out = JvmRun::new(jdk.clone(), CLASS)
        .javaagent()
        .agent("cpu=off,wall=10ms,period=5s")
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .flags(&["-Xmx1g", "-XX:+UseG1GC"])
        .args(&["256", "5"])
        .run();
    out.assert_clean_exit();
    let value = |key: &str| out.stdout_number(key);
    let gc_ms = value("gc_total") / 1e6;
    let span = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("span "))
        .unwrap();
    let (trace_id, span_id) = span.split_once(' ').unwrap();
    let c = out.agent_counters();
    let samples = pprof_traces(&out.profiles_of("wall"), "wall");
    let worker: Vec<_> = samples
        .iter()
        .filter(|s| s.label("thread_name") == Some("worker"))
        .collect();
    let paused: Vec<_> = worker
        .iter()
        .filter(|s| s.label("thread_state") == Some("GC_PAUSE"))
        .collect();
    // The collections the workload timed all came while the worker was in its span (a pause
    // before it set the span, while it was starting, is the worker's too, without a span).
    let in_span: Vec<_> = paused
        .iter()
        .filter(|s| s.label("span_name") == Some("pause /work"))
        .collect();
    let paused_ms: f64 = in_span.iter().map(|s| s.value).sum();
    let worker_ms: f64 = worker.iter().map(|s| s.value).sum();
    println!(
        "{}: the collections took {gc_ms:.0} ms; the worker's wall profile shows {paused_ms:.0} ms \
         of GC_PAUSE in its span in {} samples ({:.0} ms of GC_PAUSE in all), of {worker_ms:.0} ms \
         (gc_pauses={} gc_pause_ns={} wall_gc_pauses={})",
        jdk.name,
        in_span.len(),
        paused.iter().map(|s| s.value).sum::<f64>(),
        c["gc_pauses"],
        c["gc_pause_ns"],
        c["wall_gc_pauses"],
    );
    assert!(
        gc_ms > 50.0,
        "the collections were too short to test: {gc_ms:.0} ms"
    );
    let ratio = paused_ms / gc_ms;
    assert!(
        (0.75..=1.15).contains(&ratio),
        "{}: GC_PAUSE {paused_ms:.0} ms vs collections {gc_ms:.0} ms",
        jdk.name
    );
    for s in &paused {
        assert_eq!(s.frames[0], "[GC pause]", "{s:?}");
    }
    for s in &in_span {
        assert!(
            s.has_frame("work") || s.has_frame("compute"),
            "the worker's own stack below the pause: {s:?}"
        );
        assert_eq!(s.label("trace_id"), Some(trace_id), "{s:?}");
        assert_eq!(s.label("span_id"), Some(span_id), "{s:?}");
    }
    // No pause is left in the other states' samples: the frame belongs to GC_PAUSE only.
    assert!(worker
        .iter()
        .filter(|s| s.label("thread_state") != Some("GC_PAUSE"))
        .all(|s| s.frames[0] != "[GC pause]"));
}

#[test]
fn wall_profiles_show_the_collections_a_span_sat_through_on_every_jdk() {
    for jdk in all_jdks() {
        check(jdk);
    }
}

/// The heap after collection counts what young collections left in the old generation: G1
/// updates its old pool's collection usage only at full and mixed collections, so a heap
/// that grew under young collections alone is read from the last collection's `GcInfo`.
#[test]
fn heap_after_gc_counts_the_old_generation_between_full_collections() {
    let jdk = otelprof_tests::jdk17();
    let out = JvmRun::new(jdk.clone(), "otelprof.tests.HeapAfterYoung")
        .agent("cpu=off,live=512k")
        .flags(&["-Xmx1g", "-XX:+UseG1GC", "-XX:G1HeapRegionSize=1m"])
        .args(&["96"])
        .run();
    out.assert_clean_exit();
    let value = |key: &str| out.stdout_number(key);
    let (held, after, usage) = (value("held"), value("after_gc"), value("collection_usage"));
    let agent = out.agent_counters()["heap_after_gc"] as f64;
    println!(
        "{}: held {:.1} MB; after the last collection {:.1} MB (GcInfo), collection usage \
         {:.1} MB; the agent's heap after GC {:.1} MB",
        jdk.name,
        held / 1e6,
        after / 1e6,
        usage / 1e6,
        agent / 1e6
    );
    // The case the collection usage gets wrong: no full collection, the held arrays unseen.
    assert_eq!(value("full_collections"), 0.0);
    assert!(usage < 0.5 * held, "collection usage {usage} of {held}");
    assert!(after >= held, "GcInfo {after} < held {held}");
    assert!((agent / after - 1.0).abs() <= 0.05, "{agent} vs {after}");
}
