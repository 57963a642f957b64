//! Loading the agent into a running JVM and driving it there: the verbs and their
//! replies, a stop that leaves nothing running, start again with other options, an agent
//! started by `-agentpath` taking the same verbs, a second copy of the library refused, and a
//! late start as accurate as an early one. Every request goes through
//! [`otelprof_tests::attach_load`] (the `JVMTI.agent_load` diagnostic command, sent by
//! `otelprof attach PID jcmd`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use otelprof_tests::{
    agent_path, all_jdks, attach_load, perf_events, pprof_top, scratch_dir, AttachReply, JvmRun,
    RunningJvm,
};

const CPU_SPLIT: &str = "otelprof.workloads.CpuSplit";

fn attach(jvm: &RunningJvm, args: &str) -> AttachReply {
    attach_load(jvm, &agent_path(), args)
}

/// POSIX timers of the JVM that send SIGPROF (27), from `/proc/PID/timers`.
fn sigprof_timers(jvm: &RunningJvm) -> usize {
    std::fs::read_to_string(format!("/proc/{}/timers", jvm.pid))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("signal: 27/"))
        .count()
}

/// The agent's own threads alive in the JVM (`otelprof-aggregator`, `-wall`, `-threads`).
fn agent_threads(jvm: &RunningJvm) -> Vec<String> {
    jvm.thread_names()
        .into_iter()
        .filter(|n| n.starts_with("otelprof-"))
        .collect()
}

fn counters(reply: &AttachReply) -> std::collections::BTreeMap<String, u64> {
    reply
        .get("counters")
        .unwrap_or_else(|| panic!("no counters in {}", reply.text))
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect()
}

fn files_of(reply: &AttachReply, prefix: &str) -> Vec<PathBuf> {
    reply
        .all("file")
        .into_iter()
        .map(PathBuf::from)
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect()
}

/// A stop leaves no timer, no perf event, no thread of the agent's, and nothing sampled
/// afterwards.
fn assert_nothing_runs(jvm: &RunningJvm, what: &str) {
    assert_eq!(sigprof_timers(jvm), 0, "{what}: SIGPROF timers left");
    assert_eq!(perf_events(jvm.pid), 0, "{what}: perf events left");
    // The threads were joined before the reply; their tasks are gone a moment later at most.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while !agent_threads(jvm).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        agent_threads(jvm).is_empty(),
        "{what}: agent threads left: {:?}",
        agent_threads(jvm)
    );
}

#[test]
fn verbs_drive_an_agent_loaded_into_a_running_jvm() {
    for jdk in all_jdks() {
        let jvm = JvmRun::new(jdk.clone(), CPU_SPLIT)
            .args(&["2", "10"])
            .no_agent()
            .spawn();
        std::thread::sleep(Duration::from_secs(1));
        let out = scratch_dir("attach-out");

        let status = attach(&jvm, "status");
        status.assert_ok();
        assert_eq!(status.get("state"), Some("not started"), "{}", status.text);
        assert_eq!(
            status.get("library").map(Path::new),
            Some(agent_path().as_path())
        );

        let started = attach(&jvm, &format!("start,cpu=1ms,out={}", out.display()));
        started.assert_ok();
        assert_eq!(started.get("state"), Some("running"), "{}", started.text);
        assert_eq!(started.get("types"), Some("cpu=1ms"));
        assert!(started.get("started").is_some_and(|t| t.ends_with('Z')));
        // One sampler per thread: perf events (clock=auto where allowed) or CPU timers.
        assert!(
            sigprof_timers(&jvm) + perf_events(jvm.pid) >= 2,
            "the workers run without samplers"
        );

        let again = attach(&jvm, "start,cpu=5ms");
        assert!(
            again
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("already running (cpu=1ms")),
            "{}",
            again.text
        );

        std::thread::sleep(Duration::from_millis(1500));
        let dump_file = scratch_dir("attach-dump").join("now.pb.gz");
        let dump = attach(&jvm, &format!("dump,file={}", dump_file.display()));
        dump.assert_ok();
        let dumped: Vec<&str> = dump.all("file");
        assert!(
            dumped.contains(&dump_file.to_str().unwrap()) && dumped.len() == 2,
            "the dump goes to file= and out=: {}",
            dump.text
        );
        let top = pprof_top(std::slice::from_ref(&dump_file), "cpu", &[]);
        assert!(
            top.cum(&format!("{CPU_SPLIT}.spin")) > 0.5 * top.total,
            "the dump holds the workers' CPU: {:?}",
            top.rows.keys().take(10).collect::<Vec<_>>()
        );
        let status = attach(&jvm, "status");
        assert_eq!(status.get("state"), Some("running"), "{}", status.text);
        assert!(counters(&status)["samples_all_types"] > 0);

        let stopped = attach(&jvm, "stop");
        stopped.assert_ok();
        assert_eq!(stopped.get("state"), Some("stopped"));
        assert_eq!(files_of(&stopped, "cpu-").len(), 1, "{}", stopped.text);
        assert_nothing_runs(&jvm, "after stop");
        for verb in ["stop", "dump"] {
            let r = attach(&jvm, verb);
            assert_eq!(
                r.error.as_deref(),
                Some("not running"),
                "{verb}: {}",
                r.text
            );
        }
        let status = attach(&jvm, "status");
        assert_eq!(status.get("state"), Some("stopped"), "{}", status.text);
        let c = counters(&status);
        // Every per-thread sampler made was undone: CPU timers or perf events.
        let made = c["timers_created"] + c["perf_events_opened"];
        assert!(
            made >= 2 && made == c["timers_deleted"] + c["perf_events_closed"],
            "{c:?}"
        );
        let samples_at_stop = c["samples_all_types"];
        std::thread::sleep(Duration::from_millis(500));
        let later = counters(&attach(&jvm, "status"));
        assert_eq!(
            later["samples_all_types"], samples_at_stop,
            "sampled after stop"
        );

        // Again, with other profile types.
        let out2 = scratch_dir("attach-out2");
        let restarted = attach(
            &jvm,
            &format!("start,cpu=5ms,wall=20ms,alloc=256k,out={}", out2.display()),
        );
        restarted.assert_ok();
        assert_eq!(
            restarted.get("types"),
            Some("cpu=5ms wall=20ms alloc=256 KiB"),
            "{}",
            restarted.text
        );
        std::thread::sleep(Duration::from_millis(1500));
        let stopped = attach(&jvm, "stop");
        stopped.assert_ok();
        for kind in ["cpu-", "wall-", "alloc-"] {
            assert_eq!(
                files_of(&stopped, kind).len(),
                1,
                "{kind}: {}",
                stopped.text
            );
        }
        let wall = pprof_top(&files_of(&stopped, "wall-"), "wall", &[]);
        assert!(wall.total > 0.0, "an empty wall profile");
        assert_nothing_runs(&jvm, "after the second stop");

        let run = jvm.wait(Duration::from_secs(180));
        run.assert_clean_exit();
        println!(
            "{}: verbs ok; agent lines:\n{}",
            jdk.name,
            run.agent_lines().join("\n")
        );
        assert!(
            !run.stderr.contains("stopped;") || run.agent_lines().len() >= 4,
            "{}",
            run.stderr
        );
    }
}

#[test]
fn an_agentpath_agent_takes_the_verbs_and_a_second_copy_is_refused() {
    for jdk in all_jdks() {
        let jvm = JvmRun::new(jdk.clone(), CPU_SPLIT)
            .args(&["2", "8"])
            .agent("cpu=2ms,period=600s")
            .spawn();
        std::thread::sleep(Duration::from_secs(1));
        let status = attach(&jvm, "status");
        assert_eq!(status.get("state"), Some("running"), "{}", status.text);
        assert_eq!(status.get("types"), Some("cpu=2ms"));

        // Another path is another copy of the library, with statics of its own.
        let copy = scratch_dir("second-copy").join("libotelprof.so");
        std::fs::copy(agent_path(), &copy).unwrap();
        let refused = attach_load(&jvm, &copy, "start,cpu=1ms");
        let error = refused.error.unwrap_or_default();
        assert!(
            error.contains("another copy of libotelprof.so")
                && error.contains(&agent_path().display().to_string()),
            "{error}"
        );
        let refused = attach_load(&jvm, &copy, "status");
        assert!(refused.error.is_some(), "{}", refused.text);

        let stopped = attach(&jvm, "stop");
        stopped.assert_ok();
        assert_eq!(files_of(&stopped, "cpu-").len(), 1, "{}", stopped.text);
        assert_nothing_runs(&jvm, "agentpath agent stopped");
        let wall_only = scratch_dir("attach-wall");
        attach(
            &jvm,
            &format!("start,cpu=off,wall=10ms,out={}", wall_only.display()),
        )
        .assert_ok();
        std::thread::sleep(Duration::from_millis(800));
        let stopped = attach(&jvm, "stop");
        assert_eq!(files_of(&stopped, "wall-").len(), 1, "{}", stopped.text);
        assert!(files_of(&stopped, "cpu-").is_empty());
        let run = jvm.wait(Duration::from_secs(180));
        run.assert_clean_exit();
        // Stopped before exit: VMDeath writes nothing more.
        let cpu_files = run.profiles_of("cpu");
        assert_eq!(cpu_files.len(), 1, "{cpu_files:?}");
    }
}

/// CPU time of the JVM's `worker-N` threads now, from the kernel (`schedstat`, ns).
fn workers_cpu_ns(jvm: &RunningJvm) -> u64 {
    let mut total = 0;
    for t in std::fs::read_dir(format!("/proc/{}/task", jvm.pid))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.starts_with("worker-") {
            let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            total += stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// The shares of CpuSplit's three callers (truth 60/30/10) on a JVM that ran 10 s before the
/// agent was loaded: its worker threads were running already, its classes loaded and its hot
/// loop compiled. Within ±1.5 pp, as with -agentpath (tests/tests/agent/accuracy.rs); and the CPU
/// sampled from the workers is the CPU the kernel says they used while the agent ran, neither
/// more (their CPU from before the start is not counted) nor less (they had timers).
#[test]
fn a_late_start_is_as_accurate_as_an_early_one() {
    const TRUTH: [(&str, f64); 3] = [("sixty", 60.0), ("thirty", 30.0), ("ten", 10.0)];
    for jdk in all_jdks() {
        let jvm = JvmRun::new(jdk.clone(), CPU_SPLIT)
            .args(&["2", "600"])
            .no_agent()
            .flags(&[
                "-XX:CompileCommand=quiet",
                &format!("-XX:CompileCommand=dontinline,{CPU_SPLIT}::spin"),
            ])
            .spawn();
        std::thread::sleep(Duration::from_secs(10));
        let out = scratch_dir("late-accuracy");
        let before = workers_cpu_ns(&jvm);
        attach(
            &jvm,
            &format!("start,cpu=1ms,period=600s,out={}", out.display()),
        )
        .assert_ok();
        // As in agent/accuracy.rs: 2 x 32 s of worker CPU (about 16,000 signals; the binomial error
        // of a 30 % share is then a quarter of the tolerance), however busy the machine is.
        let deadline = std::time::Instant::now() + Duration::from_secs(240);
        while workers_cpu_ns(&jvm) - before < 64_000_000_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "the workers got too little CPU"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let stopped = attach(&jvm, "stop");
        let used_ms = (workers_cpu_ns(&jvm) - before) as f64 / 1e6;
        stopped.assert_ok();
        let files = files_of(&stopped, "cpu-");
        let top = pprof_top(&files, "cpu", &[]);
        let measured: Vec<f64> = TRUTH
            .iter()
            .map(|(m, _)| top.cum(&format!("{CPU_SPLIT}.{m}")))
            .collect();
        let pooled: f64 = measured.iter().sum();
        let shares: Vec<f64> = measured.iter().map(|v| 100.0 * v / pooled).collect();
        let workers = pprof_top(&files, "cpu", &["-tagfocus=thread_name=^worker-"]);
        let ratio = workers.total / used_ms;
        println!(
            "{} late start: sixty {:.2}% thirty {:.2}% ten {:.2}%; workers sampled {:.0} ms of \
             {used_ms:.0} ms used while profiling ({ratio:.3})",
            jdk.name, shares[0], shares[1], shares[2], workers.total
        );
        assert!(
            pooled > 10_000.0,
            "too little CPU sampled for the tolerance: {pooled} ms"
        );
        for ((method, truth), share) in TRUTH.iter().zip(&shares) {
            assert!(
                (share - truth).abs() <= 1.5,
                "{}: {method} has {share:.2}%, truth {truth}%",
                jdk.name
            );
        }
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{}: sampled/used worker CPU = {ratio:.3}",
            jdk.name
        );
        drop(jvm);
    }
}
