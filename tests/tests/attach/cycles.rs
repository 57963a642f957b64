//! 100 starts and stops of the agent in one running JVM: no crash, nothing left running after
//! each stop, and memory that does not grow with the cycles (RSS within 20 MB of where the
//! ninth cycle left it: each option set has run three times then). Prints the RSS curve.
//!
//! The heap is fixed and touched at start (`-Xms64m -Xmx64m -XX:+AlwaysPreTouch`): the
//! workload allocates, and a heap free to grow adds its own RSS curve (G1 grew this JVM by
//! 180 MB over the same 100 cycles), which would hide the agent's.

use std::time::Duration;

use otelprof_tests::{agent_path, all_jdks, attach_load, perf_events, scratch_dir, JvmRun};

const CYCLES: usize = 100;
const RSS_GROWTH_BOUND: i64 = 20 << 20;
/// Cycles after which the RSS is the baseline (three of each option set).
const SETTLED: usize = 9;

#[test]
fn a_hundred_starts_and_stops_leave_no_crash_and_no_growth() {
    for jdk in all_jdks() {
        let stop_file = scratch_dir("cycles-stop").join("stop");
        let jvm = JvmRun::new(jdk.clone(), "otelprof.tests.RunUntil")
            .args(&[stop_file.to_str().unwrap()])
            .no_agent()
            .flags(&["-Xms64m", "-Xmx64m", "-XX:+AlwaysPreTouch"])
            .spawn();
        jvm.wait_for_stdout("ready", Duration::from_secs(30));
        let out = scratch_dir("cycles-out");
        let mut rss = Vec::with_capacity(CYCLES);
        for cycle in 0..CYCLES {
            // Alternate the profile types, so every engine starts and stops many times.
            let options = match cycle % 3 {
                0 => format!("start,cpu=1ms,out={}", out.display()),
                1 => format!(
                    "start,cpu=2ms,wall=10ms,alloc=64k,lock=1ms,out={}",
                    out.display()
                ),
                _ => format!("start,cpu=off,wall=5ms,out={}", out.display()),
            };
            attach_load(&jvm, &agent_path(), &options).assert_ok();
            std::thread::sleep(Duration::from_millis(100));
            let stopped = attach_load(&jvm, &agent_path(), "stop");
            stopped.assert_ok();
            assert!(
                !stopped.all("file").is_empty(),
                "cycle {cycle}: no profile written: {}",
                stopped.text
            );
            rss.push(jvm.rss_bytes());
        }
        let timers = std::fs::read_to_string(format!("/proc/{}/timers", jvm.pid)).unwrap();
        assert!(
            !timers.contains("signal: 27/"),
            "SIGPROF timers left after the last stop:\n{timers}"
        );
        assert_eq!(
            perf_events(jvm.pid),
            0,
            "perf events left after the last stop"
        );
        let agent_threads: Vec<String> = jvm
            .thread_names()
            .into_iter()
            .filter(|n| n.starts_with("otelprof-"))
            .collect();
        assert!(agent_threads.is_empty(), "{agent_threads:?}");
        // The baseline: after three cycles of each option set, once what a process reads once
        // (the native and kernel symbol tables, the unwind tables of the libraries each
        // engine's frames fall in) is in; growth past it would grow with the cycles.
        let first = rss[SETTLED - 1] as i64;
        let curve: Vec<String> = rss
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 10 == 0 || *i == CYCLES - 1)
            .map(|(i, r)| format!("{}:{:.1}", i + 1, *r as f64 / 1048576.0))
            .collect();
        let worst = rss[SETTLED..]
            .iter()
            .map(|&r| r as i64 - first)
            .max()
            .unwrap_or(0);
        println!(
            "{}: RSS after cycle (MiB) {}; most above cycle {SETTLED}'s: {:.1} MiB (cycle 1 to \
             {SETTLED}: {:+.1} MiB)",
            jdk.name,
            curve.join(" "),
            worst as f64 / 1048576.0,
            (first - rss[0] as i64) as f64 / 1048576.0
        );
        assert!(
            worst <= RSS_GROWTH_BOUND,
            "{}: RSS grew {:.1} MiB over cycles {SETTLED} to {CYCLES}: {}",
            jdk.name,
            worst as f64 / 1048576.0,
            curve.join(" ")
        );
        std::fs::write(&stop_file, "").unwrap();
        let run = jvm.wait(Duration::from_secs(60));
        run.assert_clean_exit();
        assert!(run.stdout.contains("done"));
        let stops = run
            .agent_lines()
            .iter()
            .filter(|l| l.contains("stopped;"))
            .count();
        assert_eq!(stops, CYCLES, "one stop line per cycle");
    }
}
