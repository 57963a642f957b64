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
        cpu_late: None,
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
    // Reflection while a class is initialised happens once: not counted.
    const IN_CLINIT: &[&str] = &[
        "java.lang.Class.forName",
        "app.Registry.<clinit>",
        "app.A.call",
    ];
    let mut stacks = samples(INVOKED, 90, "GET /a");
    stacks.extend(samples(LOOKUP, 10, "GET /a"));
    stacks.extend(samples(IN_CLINIT, 30, "GET /a"));
    let found = run(&cpu_inputs(&stacks), &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, "reflection-hot-path");
    assert!(
        (found[0].share - 10.0 / 130.0).abs() < 1e-9,
        "{}",
        found[0].share
    );
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
        lock,
        ..Inputs::default()
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
        wall: merged(ProfileType::Wall, &p),
        ..Inputs::default()
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

fn wall_inputs(stacks: &[(&[&str], i64, &str)]) -> Inputs {
    let p = profile(&[("wall", "nanoseconds")], stacks);
    Inputs {
        wall: merged(ProfileType::Wall, &p),
        ..Inputs::default()
    }
}

const FUTURE_WAIT: &[&str] = &[
    "jdk.internal.misc.Unsafe.park",
    "java.util.concurrent.FutureTask.awaitDone",
    "java.util.concurrent.FutureTask.get",
    "app.Orders.handle",
    "java.lang.Thread.run",
];
const TASK_RUN: &[&str] = &[
    "app.Quote.price",
    "java.util.concurrent.FutureTask.run",
    "java.util.concurrent.ThreadPoolExecutor.runWorker",
    "java.lang.Thread.run",
];
const WORKER_IDLE: &[&str] = &[
    "jdk.internal.misc.Unsafe.park",
    "java.util.concurrent.LinkedBlockingQueue.take",
    "java.util.concurrent.ThreadPoolExecutor.getTask",
    "java.util.concurrent.ThreadPoolExecutor.runWorker",
    "java.lang.Thread.run",
];
const OWN_WORK: &[&str] = &["app.Orders.handle", "java.lang.Thread.run"];

#[test]
fn requests_waiting_longer_than_the_pool_runs_their_tasks_are_a_starved_pool() {
    // Four requests wait on futures for 60 units while one worker runs tasks for 20: 40 of
    // the requests' 80 units (60 waiting + 20 own work) were queued.
    let mut stacks = samples(FUTURE_WAIT, 60, "GET /orders");
    stacks.extend(samples(OWN_WORK, 20, "GET /orders"));
    stacks.extend(samples(TASK_RUN, 20, "GET /orders"));
    stacks.extend(samples(WORKER_IDLE, 50, ""));
    let found = run(&wall_inputs(&stacks), &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f.rule, "starved-pool");
    assert_eq!(f.method.as_deref(), Some("app.Orders.handle"));
    assert!((f.share - 0.5).abs() < 1e-9, "{}", f.share);
    assert!(
        f.title
            .starts_with("Requests queue for a starved thread pool"),
        "{}",
        f.title
    );
    assert!(f.why.contains("0.40 s queued"), "{}", f.why);

    // Fanned out to a pool that keeps up: each wait is as long as its task runs.
    let mut stacks = samples(FUTURE_WAIT, 60, "GET /orders");
    stacks.extend(samples(OWN_WORK, 20, "GET /orders"));
    stacks.extend(samples(TASK_RUN, 60, "GET /orders"));
    let found = run(&wall_inputs(&stacks), &EndpointCounts::default());
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn waiting_for_a_pooled_connection_counts_in_requests_only() {
    const BORROW: &[&str] = &[
        "jdk.internal.misc.Unsafe.park",
        "java.util.concurrent.ArrayBlockingQueue.take",
        "app.Pool.borrow",
        "app.Orders.handle",
    ];
    let mut stacks = samples(BORROW, 30, "GET /orders");
    stacks.extend(samples(OWN_WORK, 70, "GET /orders"));
    // A consumer thread outside requests waiting on its queue is no finding.
    stacks.extend(samples(BORROW, 200, ""));
    let found = run(&wall_inputs(&stacks), &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f.rule, "starved-pool");
    assert_eq!(f.method.as_deref(), Some("app.Pool.borrow"));
    assert!((f.share - 0.3).abs() < 1e-9, "{}", f.share);
    assert_eq!(f.severity, Severity::Critical);
}

#[test]
fn the_jit_compiler_is_a_finding_when_its_share_stays_up() {
    const JIT: &[&str] = &["[JIT compiler]"];
    let whole = |jit_early: usize, jit_late: usize| {
        let mut early = samples(JIT, jit_early, "");
        early.extend(samples(COMPUTE, 100 - jit_early, ""));
        let mut late = samples(JIT, jit_late, "");
        late.extend(samples(COMPUTE, 100 - jit_late, ""));
        let late_p = profile(&[("samples", "count"), ("cpu", "nanoseconds")], &late);
        early.extend(late);
        let mut inputs = cpu_inputs(&early);
        inputs.cpu_late = Some(merged(ProfileType::Cpu, &late_p));
        run(&inputs, &EndpointCounts::default())
    };
    // Steady at 12 %: a warning.
    let found = whole(12, 12);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, "jit-busy");
    assert_eq!(found[0].severity, Severity::Warning);
    assert!((found[0].share - 0.12).abs() < 1e-9, "{}", found[0].share);
    // A warm-up fading from 40 % to 8 %: none.
    assert!(whole(40, 8).is_empty());
    // Steady under the least threshold: none.
    assert!(whole(3, 3).is_empty());
}

#[test]
fn a_lock_of_an_application_class_names_the_method_that_took_it() {
    const WAIT: &[&str] = &[
        "app.Cache$Segment",
        "app.Cache$Segment.get",
        "app.Orders.load",
    ];
    let p = profile(
        &[("contentions", "count"), ("delay", "nanoseconds")],
        &[(WAIT, 100_000_000, "GET /c"); 20],
    );
    let inputs = Inputs {
        lock: merged(ProfileType::Lock, &p),
        ..Inputs::default()
    };
    let found = run(&inputs, &EndpointCounts::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].method.as_deref(), Some("app.Cache$Segment.get"));
    assert_eq!(
        found[0].title,
        "Contended lock app.Cache$Segment in app.Cache$Segment.get"
    );
}
