//! CPU accuracy against a workload whose true split is known (examples CpuSplit: 60/30/10 by
//! iteration counts of one loop), on every supported JDK and both CPU engines (`clock=perf`,
//! `clock=cpu`), with and without safepoint polls in the hot loop; and stack walks that
//! recover where HotSpot alone gives up. Read back with `go tool pprof -top` and `-raw`.

use otelprof_tests::{all_jdks, pprof_raw, pprof_top, Jdk, JvmRun, NO_LOOP_SAFEPOINTS};

const CLASS: &str = "otelprof.workloads.CpuSplit";
const TRUTH: [(&str, f64); 3] = [("sixty", 60.0), ("thirty", 30.0), ("ten", 10.0)];
/// Percentage points.
const TOLERANCE: f64 = 1.5;
/// The CPU engines, and the CPU seconds per worker thread each needs. The split is estimated
/// from about 16,000 signals, for a binomial error of a 30% share of 0.36 pp, a quarter of
/// the tolerance: with perf events a signal per millisecond of CPU, 2 x 8 s; with the CPU
/// timers about 250 signals per CPU second (the kernel checks them on its 4 ms tick; overruns
/// carry the rest), 2 x 32 s.
const CLOCKS: [(&str, &str); 2] = [("perf", "8"), ("cpu", "32")];

fn split(jdk: Jdk, clock: &str, cpu_seconds: &str, extra_flags: &[&str], what: &str) {
    let what = format!("clock={clock} {what}");
    let run = JvmRun::new(jdk.clone(), CLASS)
        .args(&["2", cpu_seconds])
        .agent(&format!("cpu=1ms,clock={clock},period=600s"))
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
        jdk.name, shares[0], shares[1], shares[2], counters["samples_all_types"], pooled
    );
    assert!(
        counters["samples_all_types"] >= 8_000,
        "too few samples for the tolerance: {counters:?}"
    );
    for ((method, truth), share) in TRUTH.iter().zip(&shares) {
        assert!(
            (share - truth).abs() <= TOLERANCE,
            "{} {what}: {method} has {share:.2}%, truth {truth}% (±{TOLERANCE} pp)",
            jdk.name
        );
    }

    // The sampled CPU time of the workers matches the CPU time the JVM says they used
    // (summed from `-raw`: `-top`'s total ignores a tag focus).
    let workers = pprof_raw(&profiles).total("cpu", |s| {
        s.labels
            .get("thread_name")
            .is_some_and(|t| t.starts_with("worker-"))
    }) as f64
        / 1e6;
    let reported: f64 = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("cpu_ms "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
        .sum();
    let ratio = workers / reported;
    println!(
        "{} {what}: sampled worker CPU {workers:.0} ms vs JVM-reported {reported:.0} ms ({ratio:.3})",
        jdk.name
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "sampled/used CPU = {ratio:.3}"
    );
}

#[test]
fn cpu_split_matches_truth_on_every_jdk() {
    for jdk in all_jdks() {
        for (clock, seconds) in CLOCKS {
            split(jdk.clone(), clock, seconds, &[], "default flags");
        }
    }
}

#[test]
fn cpu_split_matches_truth_in_loops_without_safepoint_polls() {
    for jdk in all_jdks() {
        for (clock, seconds) in CLOCKS {
            split(
                jdk.clone(),
                clock,
                seconds,
                NO_LOOP_SAFEPOINTS,
                "no safepoint polls in counted loops",
            );
        }
    }
}

/// With inlining (no dontinline), every sample in the shared loop must still name the caller
/// it was inlined into: this is what DebugNonSafepoints buys in compiled code.
#[test]
fn inlined_frames_keep_their_callers() {
    for (jdk, (clock, _)) in all_jdks()
        .into_iter()
        .flat_map(|jdk| CLOCKS.map(|c| (jdk.clone(), c)))
    {
        let run = JvmRun::new(jdk.clone(), CLASS)
            .args(&["2", "6"])
            .agent(&format!("cpu=1ms,clock={clock}"))
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
            "{} clock={clock}: spin {spin:.0} ms, under sixty/thirty/ten {callers:.0} ms",
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

/// The agent turns DebugNonSafepoints on by setting the flag, not by having HotSpot post
/// CompiledMethodLoad for every method it compiles; a value the user gave is kept, and said.
/// `-XX:+PrintFlagsFinal` prints the flags once the VM is up, after Agent_OnLoad.
#[test]
fn debug_info_at_every_pc_is_switched_on_by_the_flag() {
    let flag_value = |out: &str| -> Option<bool> {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some("DebugNonSafepoints"))
            .map(|l| l.contains("= true"))
    };
    for jdk in all_jdks() {
        // A short run with the final flags printed, the agent or not, and `user` flags.
        let run = |agent: bool, user: &[&str]| {
            let mut flags = vec!["-XX:+UnlockDiagnosticVMOptions"];
            flags.extend_from_slice(user);
            flags.push("-XX:+PrintFlagsFinal");
            let run = JvmRun::new(jdk.clone(), CLASS)
                .args(&["2", "1"])
                .flags(&flags);
            let out = if agent {
                run.agent("cpu=10ms")
            } else {
                run.no_agent()
            }
            .run();
            out.assert_clean_exit();
            out
        };
        let on = run(true, &[]);
        assert_eq!(
            flag_value(&on.stdout),
            Some(true),
            "{}: DebugNonSafepoints not on with the agent",
            jdk.name
        );
        let without = run(false, &[]);
        assert_eq!(
            flag_value(&without.stdout),
            Some(false),
            "{}: the default",
            jdk.name
        );
        let refused = run(true, &["-XX:-DebugNonSafepoints"]);
        assert_eq!(
            flag_value(&refused.stdout),
            Some(false),
            "{}: the user's -XX:-DebugNonSafepoints was overridden",
            jdk.name
        );
        assert!(
            refused.stderr.contains("-XX:-DebugNonSafepoints is set"),
            "{}: no line about the user's setting:\n{}",
            jdk.name,
            refused.stderr
        );
    }
}

/// Megamorphic interface calls, tiny methods, array copies and string building put most
/// signals where AsyncGetCallTrace alone cannot place the top frame (itable stubs, prologues,
/// copy stubs: without recovery 65-72% of this workload's samples were `[unknown_Java]` on
/// JDK 17 and 25). The sampler walks from the caller then, so nearly every sample has a stack.
#[test]
fn walks_recover_from_stubs_and_prologues() {
    const STUB_CLASS: &str = "otelprof.workloads.StubHeavy";
    for jdk in all_jdks() {
        let run = JvmRun::new(jdk.clone(), STUB_CLASS)
            .args(&["2", "3"])
            .agent("cpu=1ms,period=600s")
            .run();
        run.assert_clean_exit();
        let counters = run.agent_counters();
        let samples = counters["samples_all_types"] as f64;
        let failed = counters["failed_walks"] as f64;
        let recovered = counters["walks_recovered"] as f64;
        let top = pprof_top(&run.profiles(), "cpu", &[]);
        let unknown = top.flat("[unknown_Java]") + top.flat("[not_walkable_Java]");
        println!(
            "{}: {samples} samples, {recovered} walks recovered, {failed} failed; \
             unknown Java frames {:.2}% of the profile",
            jdk.name,
            100.0 * unknown / top.total
        );
        assert!(samples >= 1_000.0, "too few signals: {counters:?}");
        assert!(
            recovered >= 0.2 * samples,
            "this workload is mostly stubs; the recovery did not run: {counters:?}"
        );
        assert!(failed <= 0.03 * samples, "failed walks: {counters:?}");
        assert!(
            unknown <= 0.03 * top.total,
            "{unknown} of {} in unknown Java frames",
            top.total
        );
        let ours = top.cum(&format!("{STUB_CLASS}.dispatch"))
            + top.cum(&format!("{STUB_CLASS}.copy"))
            + top.cum(&format!("{STUB_CLASS}.strings"));
        assert!(
            ours >= 0.9 * top.total,
            "the workload's own methods hold {ours} of {}",
            top.total
        );
    }
}
