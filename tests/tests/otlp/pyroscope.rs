//! The real agent's OTLP against Grafana Pyroscope's ingest rules (tests/python/pyroscope_check.py,
//! each rule written from Pyroscope's source and citing it): what Pyroscope names each profile
//! type, and that nothing is refused, cut or multiplied into series; with `backend=pyroscope`,
//! also what the preset promises (stacks within 1,000 frames with their leaf kept, profiles
//! within 16,000 samples and the rate limiter's burst, no trace ids as series labels, only
//! sample attributes of few values). No Pyroscope runs here: docs/pyroscope.md says what was
//! and was not tried against one.

use otelprof_tests::{
    jdk17, jdk25, otel_classes, otel_sdk_jar, Jdk, JvmRun, OtlpProtocol, Receiver,
};
use serde_json::{json, Value};

/// Each profile type: the agent option that turns it on, and the Pyroscope type ids its OTLP
/// profiles get by Pyroscope's naming rule (`profile_type` in pyroscope_check.py:
/// pkg/ingester/otlp/convert.go newProfileBuilder 134-172 and profileType 183-197, the name is
/// the period type but for process_cpu; pkg/phlaredb/labels/labels.go CreateProfileLabels 29-56
/// for the id), beside those of Pyroscope's Java agent (grafana/jfr-parser pprof/pprof.go,
/// profileBuilderForSampleType): the names match; the ids of cpu, wall and lock too, memory's
/// cannot through OTLP (its name is its period type, Java's period type is `space`, and for
/// live objects `objects`, of which Java's agent sends a count only).
const KINDS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "cpu",
        "cpu=10ms",
        &["process_cpu:cpu:nanoseconds:cpu:nanoseconds"],
        &["process_cpu:cpu:nanoseconds:cpu:nanoseconds"],
    ),
    (
        "wall",
        "wall=10ms",
        &["wall:wall:nanoseconds:wall:nanoseconds"],
        &["wall:wall:nanoseconds:wall:nanoseconds"],
    ),
    (
        "alloc",
        "alloc=64k",
        &[
            "memory:alloc_objects:count:memory:bytes",
            "memory:alloc_space:bytes:memory:bytes",
        ],
        &[
            "memory:alloc_in_new_tlab_objects:count:space:bytes",
            "memory:alloc_in_new_tlab_bytes:bytes:space:bytes",
        ],
    ),
    (
        "lock",
        "lock=1ms",
        &[
            "mutex:contentions:count:mutex:count",
            "mutex:delay:nanoseconds:mutex:count",
        ],
        &[
            "mutex:contentions:count:mutex:count",
            "mutex:delay:nanoseconds:mutex:count",
        ],
    ),
    (
        "live",
        "live=64k",
        &[
            "memory:inuse_objects:count:memory:bytes",
            "memory:inuse_space:bytes:memory:bytes",
        ],
        &["memory:live:count:objects:count"],
    ),
];

fn name_of(type_id: &str) -> &str {
    type_id.split(':').next().unwrap()
}

fn assert_accepted(s: &Value, what: &str) {
    let v = s["violations"].as_array().unwrap();
    assert!(v.is_empty(), "{what}: Pyroscope would refuse: {v:#?}");
}

/// Every profile type on, with spans (otelprof's direct API) and threads in every state.
fn all_kinds(jdk: Jdk, extra: &str) -> (Receiver, otelprof_tests::RunOutput) {
    let receiver = Receiver::start(OtlpProtocol::Grpc);
    let options: Vec<&str> = KINDS.iter().map(|k| k.1).collect();
    let out = JvmRun::new(jdk, "otelprof.tests.otel.WallStates")
        .javaagent()
        .agent(&format!(
            "{},period=2s,{extra}{}",
            options.join(","),
            receiver.agent_options()
        ))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .args(&["2", "1", "5"])
        .run();
    out.assert_clean_exit();
    (receiver, out)
}

#[test]
fn every_type_gets_pyroscopes_java_names_and_is_accepted() {
    let (receiver, out) = all_kinds(jdk17(), "");
    let s = receiver.pyroscope_check(false);
    println!(
        "types {}; series {}; at most {} label names, {} samples, {} frames, {} bytes as pprof; warnings {}",
        s["types"], s["series"], s["max_label_names"], s["max_samples"], s["max_depth"],
        s["max_pprof_bytes"], s["warnings"]
    );
    assert_accepted(&s, "default options");
    let types = s["types"].as_object().unwrap();
    for (kind, _, ours, java) in KINDS {
        for id in ours.iter() {
            assert_eq!(
                types.get(*id),
                Some(&json!(name_of(id))),
                "{kind}: {types:?}"
            );
            // Java's name, whatever the id.
            assert_eq!(name_of(id), name_of(java[0]), "{kind}");
        }
    }
    assert_eq!(
        types.len(),
        KINDS.iter().map(|k| k.2.len()).sum::<usize>(),
        "{types:?}"
    );
    // Exact where the rules allow it: all but memory.
    for (kind, _, ours, java) in KINDS {
        assert_eq!(ours == java, !["alloc", "live"].contains(kind), "{kind}");
    }
    // What the defaults send beyond what the preset promises: thread attributes (series per
    // thread) and trace ids (a series per trace on Pyroscope 1.20 to 2.0).
    let warnings = s["warnings"].as_object().unwrap();
    assert!(
        warnings.keys().any(|w| w.contains("thread.name")),
        "{warnings:?}"
    );
    assert!(s["links_with_trace_id"].as_u64().unwrap() > 0, "{s}");
    // Label names: 4 fixed, the resource's, thread.name, thread.pool, span_name (and
    // thread.state on wall), within 30.
    let labels = s["max_label_names"].as_u64().unwrap();
    assert!((18..=30).contains(&labels), "{labels}");
    assert!(out.agent_counters()["lock_samples"] > 0);
}

#[test]
fn the_pyroscope_preset_keeps_every_type_within_what_it_promises() {
    for jdk in [jdk17(), jdk25()] {
        let (receiver, _) = all_kinds(jdk.clone(), "backend=pyroscope,");
        let s = receiver.pyroscope_check(true);
        println!(
            "{}: series {}; at most {} label names, {} samples, {} bytes as pprof",
            jdk.name, s["series"], s["max_label_names"], s["max_samples"], s["max_pprof_bytes"]
        );
        assert_accepted(&s, "backend=pyroscope");
        assert_eq!(s["links_with_trace_id"], 0);
        assert!(s["links"].as_u64().unwrap() > 0, "spans are still linked");
        // Series: one per endpoint (and none) per type, whatever the number of threads.
        for (id, n) in s["series"].as_object().unwrap() {
            assert!(n.as_u64().unwrap() <= 3, "{id}: {n} series");
        }
        // 4 fixed + 14 resource attributes (service.name, .version and .namespace unset
        // here) + span_name.
        assert!(s["max_label_names"].as_u64().unwrap() <= 19, "{s}");
        let ok = receiver.check();
        assert!(
            ok["violations"].as_array().unwrap().is_empty(),
            "{}",
            ok["violations"]
        );
        assert_eq!(ok["sample_attribute_keys"], json!(["span_name"]));
    }
}

/// A recursion of 1,500 frames with all its time in the leaf: without the preset the stacks
/// are deeper than Pyroscope keeps (it would cut the leaf end); with it they are cut at the
/// root end to 1,000 frames, the last one `[truncated]`, and the leaf keeps the time (the
/// innermost Java frame is checked: the leaf's native calls, its clock, may sit above it).
#[test]
fn a_deep_recursion_keeps_its_leaf() {
    for (options, bounded) in [("", false), ("backend=pyroscope,", true)] {
        let receiver = Receiver::start(OtlpProtocol::Http);
        let out = JvmRun::new(jdk17(), "otelprof.tests.DeepStack")
            .agent(&format!(
                "cpu=5ms,period=2s,{options}{}",
                receiver.agent_options()
            ))
            .args(&["1500", "3"])
            .run();
        out.assert_clean_exit();
        let s = receiver.pyroscope_check(bounded);
        println!(
            "{options:?}: deepest {}, warnings {}",
            s["deepest"], s["warnings"]
        );
        assert_accepted(&s, options);
        let (depth, ends) = (&s["deepest"][0][0], &s["deepest"][0][1]);
        assert_eq!(ends[0], "otelprof.tests.DeepStack.leaf");
        if bounded {
            assert_eq!(depth, 1000);
            assert_eq!(ends[1], "[truncated]");
        } else {
            assert!(depth.as_u64().unwrap() > 1500, "{depth}");
            assert!(s["warnings"]
                .as_object()
                .unwrap()
                .keys()
                .any(|w| w.contains("loses its leaf")));
        }
        // The leaf has the time, as the independent checker sees it.
        let c = receiver.check();
        let leaf = &c["functions"]["otelprof.tests.DeepStack.leaf"];
        let total = c["total"].as_f64().unwrap();
        assert!(
            leaf["self"].as_f64().unwrap() > 0.8 * total,
            "{leaf} of {total}"
        );
    }
}

/// Every allocation recorded (`alloc=0`, no rate bound) at distinct stacks on four threads:
/// a period's allocation profile has far more than 16,000 samples, which the preset sends as
/// several profiles within the limit, nothing lost; and `alloc=0` is sent with period 1, which
/// Pyroscope can name.
#[test]
fn a_profile_over_16000_samples_is_split_by_the_preset() {
    let receiver = Receiver::start(OtlpProtocol::Grpc);
    let out = JvmRun::new(jdk17(), "otelprof.tests.WideAllocs")
        .agent(&format!(
            "cpu=off,alloc=0,alloc_rate=0,backend=pyroscope,period=5s,{}",
            receiver.agent_options()
        ))
        .args(&["4", "4"])
        .run();
    out.assert_clean_exit();
    let s = receiver.pyroscope_check(true);
    println!(
        "split {}; at most {} samples per profile, {} in one profile over its parts; {} bytes",
        s["split"], s["max_samples"], s["max_samples_over_parts"], s["max_pprof_bytes"]
    );
    assert_accepted(&s, "alloc=0 with backend=pyroscope");
    assert!(
        s["max_samples_over_parts"].as_u64().unwrap() > 16_000,
        "{s}"
    );
    assert!(s["max_samples"].as_u64().unwrap() <= 16_000);
    assert!(!s["split"].as_object().unwrap().is_empty());
    assert_eq!(
        s["types"],
        json!({
            "memory:alloc_objects:count:memory:bytes": "memory",
            "memory:alloc_space:bytes:memory:bytes": "memory",
        })
    );
    let c = receiver.check();
    assert!(
        c["violations"].as_array().unwrap().is_empty(),
        "{}",
        c["violations"]
    );
    assert_eq!(
        c["types"],
        json!([
            "alloc_objects/count period memory/bytes 1",
            "alloc_space/bytes period memory/bytes 1",
        ])
    );
    // Split, not dropped: the objects sent add up to the allocation samples the agent took
    // (each sample of alloc=0 stands for one object).
    let objects = s["totals"]["memory:alloc_objects:count:memory:bytes"]
        .as_u64()
        .unwrap();
    let taken = out.agent_counters()["alloc_samples"];
    println!("objects sent {objects}, allocation samples {taken}");
    assert_eq!(objects, taken);
}
