//! The rules on hand-built profiles: a pattern fires with its method, a pure computation
//! does not, reflection does not count the invoked method's work, and a contended
//! `Hashtable` is named as a synchronized collection.

use super::*;
use crate::merge::Merger;
use otel_bridge::{FrameKind, Profile, ProfileBuilder};

/// A profile of `types` (the last is the period type) with `stacks` (frame names, leaf first; value; endpoint).
fn profile(types: &[(&str, &str)], stacks: &[(&[&str], i64, &str)]) -> Profile {
    let mut b = ProfileBuilder::new(types, types[types.len() - 1], 1);
    for (frames, value, endpoint) in stacks {
        let locations: Vec<_> = frames
            .iter()
            .map(|name| {
                let f = b.function(name, "X.java", 1);
                b.location(f, 1, FrameKind::Jvm)
            })
            .collect();
        // "": a sample outside any request.
        let labels = if endpoint.is_empty() {
            Vec::new()
        } else {
            vec![b.str_label("span_name", endpoint)]
        };
        // Counting types (samples, contentions) count one per sample.
        let values: Vec<i64> = types
            .iter()
            .map(|(_, unit)| if *unit == "count" { 1 } else { *value })
            .collect();
        b.add_sample(&locations, &labels, &values);
    }
    b.build(0, 10_000_000_000)
}

fn merged(ty: ProfileType, p: &Profile) -> Merged {
    let mut m = Merger::new(ty, Selector::default(), Some("span_name"));
    m.add(&[], p);
    m.finish()
}

fn cpu_inputs(stacks: &[(&[&str], i64, &str)]) -> Inputs {
    let p = profile(&[("samples", "count"), ("cpu", "nanoseconds")], stacks);
    let mut by_lines = Merger::new(ProfileType::Cpu, Selector::default(), None).lines(true);
    by_lines.add(&[], &p);
    Inputs {
        cpu: merged(ProfileType::Cpu, &p),
        wall: Merged::default(),
        alloc: Merged::default(),
        lock: Merged::default(),
        lines: Lines {
            cpu: by_lines.finish(),
            ..Lines::default()
        },
    }
}

const COMPUTE: &[&str] = &["app.Math.compute", "app.Main.main"];
const THROW: &[&str] = &[
    "java.lang.Throwable.fillInStackTrace",
    "java.lang.Throwable.<init>",
    "java.lang.NumberFormatException.<init>",
    "java.lang.Integer.parseInt",
    "app.Order.parse",
    "app.Main.main",
];

fn samples(
    stack: &'static [&'static str],
    n: usize,
    ep: &'static str,
) -> Vec<(&'static [&'static str], i64, &'static str)> {
    vec![(stack, 10_000_000, ep); n]
}

#[test]
fn exceptions_as_control_flow_fire_with_their_method() {
    let mut stacks = samples(COMPUTE, 70, "GET /calc");
    stacks.extend(samples(THROW, 30, "POST /order"));
    let found = run(&cpu_inputs(&stacks), &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f.rule, "exceptions-control-flow");
    assert_eq!(f.method.as_deref(), Some("app.Order.parse"));
    // The line, from the merge by lines.
    assert_eq!(f.file.as_deref(), Some("X.java:1"));
    assert!((f.share - 0.30).abs() < 1e-9, "{}", f.share);
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.endpoints, [("POST /order".to_owned(), 300_000_000.0)]);
    assert!(
        f.why
            .starts_with("30.0 % of CPU (30 samples) ≥ 20.0 % (critical)"),
        "{}",
        f.why
    );
}

#[test]
fn a_pure_computation_is_no_finding() {
    let found = run(
        &cpu_inputs(&samples(COMPUTE, 100, "GET /calc")),
        &EndpointCounts::default(),
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn reflection_counts_the_call_not_the_invoked_method() {
    const INVOKED: &[&str] = &[
        "app.B.work",
        "jdk.internal.reflect.DirectMethodHandleAccessor.invoke",
        "java.lang.reflect.Method.invoke",
        "app.A.call",
    ];
    const LOOKUP: &[&str] = &["java.lang.Class.getMethod", "app.A.call"];
    let mut stacks = samples(INVOKED, 90, "GET /a");
    stacks.extend(samples(LOOKUP, 10, "GET /a"));
    let found = run(&cpu_inputs(&stacks), &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, "reflection-hot-path");
    assert!((found[0].share - 0.10).abs() < 1e-9, "{}", found[0].share);
    assert_eq!(found[0].method.as_deref(), Some("app.A.call"));
}

#[test]
fn a_contended_hashtable_is_named_a_synchronized_collection() {
    const WAIT: &[&str] = &[
        "java.util.Hashtable",
        "java.util.Hashtable.get",
        "app.Cache.lookup",
    ];
    // 20 contentions of 0.1 s each over the profile's 10 s: 0.2 threads waiting.
    let p = profile(
        &[("contentions", "count"), ("delay", "nanoseconds")],
        &[(WAIT, 100_000_000, "GET /c"); 20],
    );
    let lock = merged(ProfileType::Lock, &p);
    let inputs = Inputs {
        cpu: Merged::default(),
        wall: Merged::default(),
        alloc: Merged::default(),
        lock,
        lines: Lines::default(),
    };
    let found = run(&inputs, &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(
        f.title,
        "Contended synchronized collection java.util.Hashtable in app.Cache.lookup"
    );
    assert!((f.share - 0.2).abs() < 1e-9, "{}", f.share);
    assert_eq!(f.severity, Severity::Info);
}

#[test]
fn sleeping_counts_in_requests_only() {
    const SLEEP: &[&str] = &[
        "java.lang.Thread.sleep",
        "app.Poller.awaitReady",
        "app.Main.main",
    ];
    const WORK: &[&str] = &["app.Math.compute", "app.Main.main"];
    // An idle thread sleeping outside any request is no finding; the request's sleep is.
    let mut stacks = samples(SLEEP, 100, "");
    stacks.extend(samples(SLEEP, 20, "GET /ready"));
    stacks.extend(samples(WORK, 80, "GET /ready"));
    let p = profile(&[("wall", "nanoseconds")], &stacks);
    let inputs = Inputs {
        cpu: Merged::default(),
        wall: merged(ProfileType::Wall, &p),
        alloc: Merged::default(),
        lock: Merged::default(),
        lines: Lines::default(),
    };
    let found = run(&inputs, &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, "sleep-in-request");
    assert!((found[0].share - 0.20).abs() < 1e-9, "{}", found[0].share);
    assert_eq!(found[0].method.as_deref(), Some("app.Poller.awaitReady"));
}

#[test]
fn gc_threads_past_their_share_are_gc_pressure() {
    const GC: &[&str] = &["[GC]"];
    let mut stacks = samples(GC, 30, "");
    stacks.extend(samples(COMPUTE, 70, "GET /calc"));
    let found = run(&cpu_inputs(&stacks), &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, "gc-pressure");
    assert_eq!(found[0].severity, Severity::Critical);
    assert!((found[0].share - 0.30).abs() < 1e-9, "{}", found[0].share);
}
