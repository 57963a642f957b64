//! Lock profiling accuracy against a workload that measures its own waits (tests/java-otel
//! LockContention): two threads take turns on one lock, holding it alternately 3 ms and
//! 15 ms, so waits fall on both sides of the default 10 ms threshold, and each works inside a
//! span. The lock is a monitor (`synchronized`: JVMTI monitor events) or a `ReentrantLock`
//! (parks: the rebound `Unsafe.park`), the agent loaded by the Java shim or at startup. Read
//! back with `go tool pprof -traces` on the `lock-*` files, on every supported JDK, with
//! `lock=10ms` (long waits exact, short ones sampled) and with `lock=0` (every wait).

use std::collections::BTreeMap;

use otelprof_tests::{
    all_jdks, jar_path, jdk25, otel_classes, otel_sdk_jar, pprof_traces, Jdk, JvmRun,
};

const CLASS: &str = "otelprof.tests.otel.LockContention";

#[derive(Clone, Copy, PartialEq)]
enum Lock {
    Monitor,
    /// A `ReentrantLock`; `true`: the agent loaded by the Java shim (after the JVM started).
    Reentrant {
        shim: bool,
    },
}

fn check(jdk: Jdk, threshold: &str, lock: Lock) {
    let mut run = JvmRun::new(jdk.clone(), CLASS)
        .agent(&format!("lock={threshold}"))
        .classpath(&[otel_classes(), otel_sdk_jar()]);
    if lock == (Lock::Reentrant { shim: false }) {
        // The agent from -agentpath; the shim's classes only for the workload's span API.
        run = run.classpath(&[&jar_path()]);
    } else {
        run = run.javaagent();
    }
    let mode = if lock == Lock::Monitor {
        "monitor"
    } else {
        "reentrant"
    };
    let run = run.args(&["6", mode]).run();
    run.assert_clean_exit();
    // `waited <thread> <nanos> <entries>` and `span <thread> <trace> <span> <endpoint>`
    let waited: BTreeMap<&str, f64> = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("waited "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0], f[1].parse::<f64>().unwrap() / 1e6)
        })
        .collect();
    let spans: BTreeMap<&str, (&str, &str, String)> = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("span "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0], (f[1], f[2], f[3].replace('_', " ")))
        })
        .collect();
    assert_eq!((waited.len(), spans.len()), (2, 2), "{}", run.stdout);
    let counters = run.agent_counters();
    let samples = pprof_traces(&run.profiles_of("lock"), "delay");
    assert!(!samples.is_empty(), "no lock samples: {counters:?}");
    let mut delay: BTreeMap<String, f64> = BTreeMap::new();
    let (mut right_frames, mut right_span, mut all) = (0.0, 0.0, 0.0);
    for s in &samples {
        all += s.value;
        let thread = s.label("thread_name").unwrap_or("?");
        *delay.entry(thread.to_owned()).or_default() += s.value;
        let transfer = "otelprof.tests.otel.LockContention$Teller.transfer";
        let leaf = s.frames.first().map(String::as_str);
        let right = match lock {
            // The monitor's class, then the method that entered it.
            Lock::Monitor => {
                leaf == Some("otelprof.tests.otel.LockContention$Account")
                    && s.frames.get(1).map(String::as_str) == Some(transfer)
            }
            // The lock's class, then the park under ReentrantLock.lock, called by transfer.
            Lock::Reentrant { .. } => {
                leaf == Some("java.util.concurrent.locks.ReentrantLock$NonfairSync")
                    && s.frames.get(1).map(String::as_str) == Some("jdk.internal.misc.Unsafe.park")
                    && s.frames.iter().any(|f| f == transfer)
            }
        };
        if right {
            right_frames += s.value;
        }
        if let Some((trace, span, endpoint)) = spans.get(thread) {
            if s.label("trace_id") == Some(trace)
                && s.label("span_id") == Some(span)
                && s.label("span_name") == Some(endpoint.as_str())
            {
                right_span += s.value;
            }
        }
    }
    let true_total: f64 = waited.values().sum();
    println!(
        "{} {mode} lock={threshold}: reported {all:.0} ms of {true_total:.0} ms waited ({:.3}); per thread {delay:?} vs {waited:?}; {} samples, {} short waits not picked",
        jdk.name,
        all / true_total,
        counters["lock_samples"],
        counters["lock_short"],
    );
    assert!(
        (all / true_total - 1.0).abs() <= 0.15,
        "{} lock={threshold}: {all:.0} ms reported, {true_total:.0} ms waited",
        jdk.name
    );
    for (thread, truth) in &waited {
        let got = delay.get(*thread).copied().unwrap_or(0.0);
        assert!(
            (got / truth - 1.0).abs() <= 0.15,
            "{thread}: {got:.0} ms reported, {truth:.0} ms waited"
        );
    }
    assert!(
        right_frames >= 0.99 * all,
        "monitor class and entering method: {right_frames:.0} of {all:.0} ms"
    );
    assert!(
        right_span >= 0.99 * all,
        "the waiting thread's span: {right_span:.0} of {all:.0} ms"
    );
    if lock == (Lock::Reentrant { shim: false }) {
        // Bound when the JDK binds it (NativeMethodBind), not rebound over the JDK's binding.
        assert!(
            !run.stdout.contains("Re-registering") && !run.stderr.contains("Re-registering"),
            "{}\n{}",
            run.stdout,
            run.stderr
        );
    }
    if threshold == "0" {
        assert_eq!(counters["lock_short"], 0, "lock=0 records every wait");
    } else {
        assert!(counters["lock_short"] > 0, "short waits should be sampled");
    }
}

#[test]
fn lock_delay_frames_and_spans_match_truth_on_every_jdk() {
    for jdk in all_jdks() {
        check(jdk, "10ms", Lock::Monitor);
    }
}

#[test]
fn lock_zero_records_every_wait() {
    check(jdk25(), "0", Lock::Monitor);
}

#[test]
fn reentrant_lock_parks_match_truth_on_every_jdk() {
    for jdk in all_jdks() {
        check(jdk.clone(), "10ms", Lock::Reentrant { shim: true });
        check(jdk, "10ms", Lock::Reentrant { shim: false });
    }
}
