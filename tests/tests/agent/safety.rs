//! The agent inside a real JVM must never crash it, hang it or leak: thread churn, class
//! unloading, exit in the middle of sampling, and bad options.

use std::time::Duration;

use otelprof_tests::{all_jdks, pprof_top, JvmRun};

fn field(stdout: &str, key: &str) -> u64 {
    stdout
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {stdout}"))
        .parse()
        .unwrap()
}

#[test]
fn ten_thousand_short_lived_threads_leak_no_timers_or_slots() {
    for jdk in all_jdks() {
        let run = JvmRun::new(jdk.clone(), "otelprof.tests.ManyThreads")
            .args(&["10000", "32"])
            .agent("cpu=1ms")
            .run();
        run.assert_clean_exit();
        let c = run.agent_counters();
        println!("{}: {} | {:?}", jdk.name, run.stdout.trim(), c);
        assert_eq!(field(&run.stdout, "started"), 10_000);
        assert!(c["threads_started"] >= 10_000, "{c:?}");
        assert!(c["threads_ended"] >= 10_000, "{c:?}");
        assert_eq!(c["timer_errors"], 0);
        assert_eq!(c["table_full"], 0);
        // Every timer made was deleted: at its thread's end or at shutdown.
        assert_eq!(c["timers_created"], c["timers_deleted"], "{c:?}");
        // Slots: what is still registered at exit is what is still alive, not the churn.
        assert!(c["threads_registered_at_exit"] <= 40, "{c:?}");
        // While running: no more timers than live threads (not one per thread ever started).
        let live = field(&run.stdout, "live_threads");
        let timers_after = field(&run.stdout, "timers_after");
        assert!(
            timers_after <= live,
            "{timers_after} timers for {live} threads"
        );
        assert!(field(&run.stdout, "peak_timers") <= 32 + live);
        // And the short threads were profiled.
        let top = pprof_top(&run.profiles(), "cpu", &["-tagfocus=thread_name=^short-"]);
        assert!(
            top.cum("otelprof.tests.ManyThreads.burn") > 0.0,
            "no samples from short threads"
        );
    }
}

#[test]
fn classes_unloaded_while_sampled_cause_no_crash() {
    for jdk in all_jdks() {
        let run = JvmRun::new(jdk.clone(), "otelprof.tests.ClassChurn")
            .args(&["6"])
            .agent("cpu=1ms,period=2s")
            .flags(&["-Xmx256m"])
            .run();
        run.assert_clean_exit();
        println!("{}: {}", jdk.name, run.stdout.trim());
        assert!(
            field(&run.stdout, "unloaded") > 0,
            "no class was unloaded: the test proves nothing"
        );
        let profiles = run.profiles();
        assert!(profiles.len() >= 3, "{profiles:?}");
        let top = pprof_top(&profiles, "cpu", &[]);
        assert!(
            top.cum("otelprof.tests.Churned.burn") > 0.2 * top.total,
            "the churned class's method should be hot: {:?}",
            top.rows.keys().take(20).collect::<Vec<_>>()
        );
    }
}

#[test]
fn jvm_exiting_mid_sample_exits_cleanly_with_a_final_profile() {
    for jdk in all_jdks() {
        for delay in ["150", "400", "777", "1200", "2000"] {
            let run = JvmRun::new(jdk.clone(), "otelprof.tests.ExitMidSample")
                .args(&["3", delay])
                .agent("cpu=1ms")
                .run();
            run.assert_clean_exit();
            assert!(run.stdout.contains("exiting"));
            assert!(
                run.elapsed < Duration::from_secs(15),
                "exit took {:?}",
                run.elapsed
            );
            let c = run.agent_counters();
            assert_eq!(c["profiles_written"], 1, "{c:?}");
            let top = pprof_top(&run.profiles(), "samples", &[]);
            assert!(top.total > 0.0, "the final profile is empty");
            assert!(
                top.cum("otelprof.tests.ExitMidSample.lambda$main$0") > 0.0,
                "{:?}",
                top.rows.keys().collect::<Vec<_>>()
            );
        }
    }
}

fn bad_option(options: &str, must_mention: &str) {
    for jdk in all_jdks() {
        let mut run = JvmRun::new(jdk.clone(), "otelprof.workloads.CpuSplit")
            .args(&["1", "0.3"])
            .agent(options);
        run.add_out_dir = false;
        let out = run.run();
        out.assert_clean_exit();
        assert!(
            out.stdout.contains("done"),
            "the application must run normally"
        );
        let lines = out.agent_lines();
        assert_eq!(
            lines.len(),
            1,
            "exactly one line from the agent, got {lines:?}"
        );
        assert!(
            lines[0].contains(must_mention),
            "{:?} should name {must_mention}",
            lines[0]
        );
        assert!(lines[0].contains("profiling is off"), "{:?}", lines[0]);
        assert!(out.profiles().is_empty(), "nothing may be profiled");
    }
}

#[test]
fn malformed_options_give_one_line_and_a_running_jvm() {
    bad_option("cpu=banana", "cpu=banana");
    bad_option("nosuchkey=1", "nosuchkey");
    bad_option("out=/nonexistent/dir", "out=/nonexistent/dir");
    bad_option("cpu=10ms,depth=-3", "depth=-3");
}

#[test]
fn itimer_engine_profiles_too() {
    for jdk in all_jdks() {
        let run = JvmRun::new(jdk.clone(), "otelprof.workloads.CpuSplit")
            .args(&["2", "3"])
            .agent("cpu=5ms,clock=itimer")
            .run();
        run.assert_clean_exit();
        let top = pprof_top(&run.profiles(), "cpu", &[]);
        let spin = top.cum("otelprof.workloads.CpuSplit.spin");
        println!(
            "{}: itimer spin {spin:.0} ms of {:.0} ms",
            jdk.name, top.total
        );
        // 6 s of worker CPU; ITIMER_PROF also samples JVM threads, so allow slack.
        assert!(spin > 4_000.0, "{spin}");
        assert_eq!(run.agent_counters()["timers_created"], 0);
    }
}
