//! CPU accuracy against a workload whose true split is known (examples CpuSplit: 60/30/10 by
//! iteration counts of one loop), on every supported JDK, with and without safepoint polls in
//! the hot loop. Read back with `go tool pprof -top`.
#![allow(clippy::unwrap_used, clippy::panic)]

use otelprof_tests::{all_jdks, pprof_top, Jdk, JvmRun, NO_LOOP_SAFEPOINTS};

const CLASS: &str = "otelprof.workloads.CpuSplit";
const TRUTH: [(&str, f64); 3] = [("sixty", 60.0), ("thirty", 30.0), ("ten", 10.0)];
/// Percentage points.
const TOLERANCE: f64 = 1.5;
/// CPU seconds per worker thread. The split is estimated from about 250 signals per CPU
/// second (the kernel checks CPU timers on its 4 ms tick; overruns carry the rest), so 2 x 32 s
/// gives ~16,000 signals: the binomial error of a 30% share is then 0.36 pp, a quarter of the
/// tolerance.
const CPU_SECONDS: &str = "32";

fn split(jdk: Jdk, extra_flags: &[&str], what: &str) {
    let run = JvmRun::new(jdk.clone(), CLASS)
        .args(&["2", CPU_SECONDS])
        .agent("cpu=1ms,period=600s")
        // One compiled copy of the shared loop, so that the three callers' per-iteration cost
        // is identical by construction and the 60/30/10 truth is exact.
        .flags(&[
            "-XX:CompileCommand=quiet",
            &format!("-XX:CompileCommand=dontinline,{CLASS}::spin"),
        ])
        .flags(extra_flags)
        .run();
    run.assert_clean_exit();
    let profiles = run.profiles();
    let top = pprof_top(&profiles, "cpu", &[]);
    let measured: Vec<f64> = TRUTH
        .iter()
        .map(|(m, _)| top.cum(&format!("{CLASS}.{m}")))
        .collect();
    let pooled: f64 = measured.iter().sum();
    let shares: Vec<f64> = measured.iter().map(|v| 100.0 * v / pooled).collect();
    let counters = run.agent_counters();
    println!(
        "{} {what}: sixty {:.2}% thirty {:.2}% ten {:.2}% ({} signals, {:.0} ms sampled)",
        jdk.name, shares[0], shares[1], shares[2], counters["samples"], pooled
    );
    assert!(
        counters["samples"] >= 8_000,
        "too few samples for the tolerance: {counters:?}"
    );
    for ((method, truth), share) in TRUTH.iter().zip(&shares) {
        assert!(
            (share - truth).abs() <= TOLERANCE,
            "{} {what}: {method} has {share:.2}%, truth {truth}% (±{TOLERANCE} pp)",
            jdk.name
        );
    }

    // The sampled CPU time of the workers matches the CPU time the JVM says they used.
    let workers = pprof_top(&profiles, "cpu", &["-tagfocus=thread_name=^worker-"]);
    let reported: f64 = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("cpu_ms "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
        .sum();
    let ratio = workers.total / reported;
    println!(
        "{} {what}: sampled worker CPU {:.0} ms vs JVM-reported {reported:.0} ms ({ratio:.3})",
        jdk.name, workers.total
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "sampled/used CPU = {ratio:.3}"
    );
}

#[test]
fn cpu_split_matches_truth_on_every_jdk() {
    for jdk in all_jdks() {
        split(jdk, &[], "default flags");
    }
}

#[test]
fn cpu_split_matches_truth_in_loops_without_safepoint_polls() {
    for jdk in all_jdks() {
        split(
            jdk,
            NO_LOOP_SAFEPOINTS,
            "no safepoint polls in counted loops",
        );
    }
}

/// With inlining (no dontinline), every sample in the shared loop must still name the caller
/// it was inlined into: this is what DebugNonSafepoints buys in compiled code.
#[test]
fn inlined_frames_keep_their_callers() {
    for jdk in all_jdks() {
        let run = JvmRun::new(jdk.clone(), CLASS)
            .args(&["2", "6"])
            .agent("cpu=1ms")
            .flags(NO_LOOP_SAFEPOINTS)
            .run();
        run.assert_clean_exit();
        let top = pprof_top(&run.profiles(), "cpu", &[]);
        let spin = top.cum(&format!("{CLASS}.spin"));
        let callers: f64 = TRUTH
            .iter()
            .map(|(m, _)| top.cum(&format!("{CLASS}.{m}")))
            .sum();
        println!(
            "{}: spin {spin:.0} ms, under sixty/thirty/ten {callers:.0} ms",
            jdk.name
        );
        assert!(
            spin > 0.9 * top.total,
            "spin should dominate: {spin} of {}",
            top.total
        );
        assert!(
            callers >= 0.995 * spin,
            "{}: {:.0} ms of spin without its inlining caller",
            jdk.name,
            spin - callers
        );
    }
}
