//! The CPU engines (`clock=perf`, `clock=cpu`) in real JVMs: how many stack walks a busy
//! thread gets per CPU second at 1 ms, which engine the agent takes where perf events are
//! refused (a seccomp filter that returns EPERM or kills; an unprivileged user under
//! `kernel.perf_event_paranoid=2`), with the one line that says so, and that the profile is
//! right either way.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use otelprof_tests::{
    agent_path, all_jdks, classes, jdk17, native_mix_library, pprof_raw, pprof_top,
    run_with_timeout, seccomp_no_perf, Jdk, JvmRun, RunOutput,
};

const CPU_SPLIT: &str = "otelprof.workloads.CpuSplit";

/// The CPU the workers of a CpuSplit run reported (`cpu_ms <thread> <ms>` lines), in seconds.
fn worker_cpu_seconds(run: &RunOutput) -> f64 {
    run.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("cpu_ms "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
        .sum::<f64>()
        / 1000.0
}

/// The agent's `cpu engine:` line (exactly one).
fn engine_line(run: &RunOutput) -> String {
    let lines: Vec<&str> = run
        .agent_lines()
        .into_iter()
        .filter(|l| l.contains("cpu engine:"))
        .collect();
    assert_eq!(lines.len(), 1, "one engine line: {:?}", run.agent_lines());
    lines[0].to_owned()
}

/// CpuSplit's 60/30/10 shares in `run`'s profiles, within `tolerance` percentage points.
fn assert_split(run: &RunOutput, tolerance: f64, what: &str) {
    let top = pprof_top(&run.profiles(), "cpu", &[]);
    let measured: Vec<f64> = ["sixty", "thirty", "ten"]
        .iter()
        .map(|m| top.cum(&format!("{CPU_SPLIT}.{m}")))
        .collect();
    let pooled: f64 = measured.iter().sum();
    for (m, truth) in measured.iter().zip([60.0, 30.0, 10.0]) {
        let share = 100.0 * m / pooled;
        assert!(
            (share - truth).abs() <= tolerance,
            "{what}: {share:.1}% for {truth}% (±{tolerance} pp)"
        );
    }
}

/// At cpu=1ms a busy thread gets a stack walk per millisecond of CPU with perf events; the
/// per-thread timers, checked on the scheduler's tick, give far fewer walks, each standing
/// for several intervals.
#[test]
fn perf_events_walk_a_busy_thread_every_millisecond() {
    for jdk in all_jdks() {
        let mut per_engine = Vec::new();
        for clock in ["perf", "cpu"] {
            let run = JvmRun::new(jdk.clone(), CPU_SPLIT)
                .args(&["1", "5"])
                .agent(&format!("cpu=1ms,clock={clock},period=600s"))
                .run();
            run.assert_clean_exit();
            let c = run.agent_counters();
            let cpu = worker_cpu_seconds(&run);
            let walks_per_cpu_second = c["cpu_walks_java"] as f64 / cpu;
            println!(
                "{} clock={clock}: {} walks of Java threads for {cpu:.2} s of worker CPU = \
                 {walks_per_cpu_second:.0} walks per CPU second; all threads: {} walks for {} \
                 intervals",
                jdk.name, c["cpu_walks_java"], c["cpu_walks"], c["cpu_ticks"]
            );
            assert!(cpu >= 4.9, "the worker used {cpu} s");
            per_engine.push(walks_per_cpu_second);
            if clock == "perf" {
                assert!(engine_line(&run).contains("cpu engine: perf ("), "{run:?}");
                assert!(
                    walks_per_cpu_second >= 900.0,
                    "{walks_per_cpu_second:.0} walks per CPU second at 1 ms"
                );
                // One interval per walk: no merged signals to make up for.
                assert!(
                    c["cpu_walks"] as f64 >= 0.95 * c["cpu_ticks"] as f64,
                    "{c:?}"
                );
                assert_eq!(c["timers_created"], 0, "{c:?}");
                assert_eq!(c["perf_events_opened"], c["perf_events_closed"], "{c:?}");
            } else {
                assert!(engine_line(&run).contains("cpu engine: cpu ("));
                assert_eq!(c["perf_events_opened"], 0, "{c:?}");
            }
            // Either way the shares are right and the sampled CPU is the CPU used.
            assert_split(&run, 3.0, &format!("{} clock={clock}", jdk.name));
            // The worker's samples (pprof's `-top` total ignores a tag focus).
            let worker = pprof_raw(&run.profiles()).total("cpu", |s| {
                s.labels
                    .get("thread_name")
                    .is_some_and(|t| t.starts_with("worker-"))
            });
            let ratio = worker as f64 / 1e9 / cpu;
            assert!((0.95..=1.05).contains(&ratio), "sampled/used = {ratio:.3}");
        }
        println!(
            "{}: perf gives {:.1} times the walks of the CPU timers",
            jdk.name,
            per_engine[0] / per_engine[1]
        );
    }
}

/// Where a seccomp filter refuses perf_event_open, the agent says so in one line and samples
/// with the CPU timers; where the filter kills on the call, only the probe's child process
/// dies (the agent probes in a child under any filter), never the JVM.
#[test]
fn a_seccomp_filter_against_perf_events_falls_back_to_timers() {
    let launcher = seccomp_no_perf().to_str().unwrap().to_owned();
    for jdk in all_jdks() {
        for action in ["errno", "kill"] {
            for clock in ["auto", "perf"] {
                let run = JvmRun::new(jdk.clone(), CPU_SPLIT)
                    .args(&["2", "3"])
                    .agent(&format!("cpu=5ms,clock={clock}"))
                    .launcher(&[&launcher, action])
                    .run();
                run.assert_clean_exit();
                let line = engine_line(&run);
                println!("{} seccomp {action} clock={clock}: {line}", jdk.name);
                assert!(line.contains("cpu engine: cpu ("), "{line}");
                assert!(line.contains("perf_event_open refused"), "{line}");
                if action == "errno" {
                    assert!(line.contains("Operation not permitted"), "{line}");
                } else {
                    assert!(line.contains("seccomp"), "{line}");
                }
                let c = run.agent_counters();
                assert_eq!(c["perf_events_opened"], 0, "{c:?}");
                assert!(c["timers_created"] > 0, "{c:?}");
                assert_split(&run, 4.0, &format!("{} seccomp {action}", jdk.name));
            }
        }
    }
}

/// Files a JVM running as nobody can read and write wherever the repository is: the agent,
/// the workload classes, the JNI library and an output directory, under /var/tmp.
struct Staged(PathBuf);

impl Staged {
    fn create() -> Staged {
        let dir = PathBuf::from(format!(
            "/var/tmp/otelprof-engines-test-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let copy = |from: &Path, to: &Path| {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(from, to).unwrap();
        };
        copy(&agent_path(), &dir.join("libotelprof.so"));
        copy(
            &native_mix_library().join("libnativemix.so"),
            &dir.join("libnativemix.so"),
        );
        for class in [
            "otelprof/tests/NativeMix.class",
            "otelprof/workloads/CpuSplit.class",
        ] {
            copy(&classes().join(class), &dir.join("classes").join(class));
        }
        std::fs::create_dir_all(dir.join("out")).unwrap();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let mode = if e.path().is_dir() { 0o777 } else { 0o755 };
                std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode)).unwrap();
                if e.path().is_dir() {
                    stack.push(e.path());
                }
            }
        }
        Staged(dir)
    }

    fn profiles(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.0.join("out"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(".pb.gz"))
            .collect();
        v.sort();
        v
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs NativeMix as the user nobody with `options`: stdout, stderr, and the staged files
/// with the profiles (removed when dropped).
fn native_mix_as_nobody(jdk: &Jdk, options: &str) -> (String, String, Staged) {
    let staged = Staged::create();
    let dir = &staged.0;
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(jdk.java())
        .arg(format!(
            "-agentpath:{}={options},out={}",
            dir.join("libotelprof.so").display(),
            dir.join("out").display()
        ))
        .arg(format!("-Djava.library.path={}", dir.display()))
        .arg("-cp")
        .arg(dir.join("classes"))
        .args(["otelprof.tests.NativeMix", "1", "2"])
        .current_dir(dir);
    let (code, stdout, stderr, _) = run_with_timeout(cmd, Duration::from_secs(120));
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr, staged)
}

fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// As an unprivileged user, perf events that count kernel time need
/// `kernel.perf_event_paranoid` ≤ 1: above that only user-space events are allowed. The
/// default then takes the CPU timers (user-space events miss the time spent in the kernel);
/// `clock=perf` takes the user-space events, with native frames and no kernel frame.
#[test]
fn an_unprivileged_user_gets_native_frames_and_no_kernel_frames() {
    let jdk = jdk17();
    let user_only = paranoid() >= 2;
    for clock in ["auto", "perf"] {
        let (stdout, stderr, staged) =
            native_mix_as_nobody(&jdk, &format!("cpu=1ms,clock={clock},period=600s"));
        let line = stderr
            .lines()
            .find(|l| l.contains("cpu engine:"))
            .unwrap_or_else(|| panic!("no engine line:\n{stderr}"))
            .to_owned();
        println!("nobody, paranoid={}, clock={clock}: {line}", paranoid());
        assert!(stdout.contains("done"), "{stdout}");
        match (clock, user_only) {
            ("auto", true) => {
                assert!(line.contains("cpu engine: cpu ("), "{line}");
                assert!(line.contains("perf_event_paranoid="), "{line}");
            }
            ("perf", true) => assert!(line.contains("cpu engine: perf, user time only"), "{line}"),
            (_, false) => assert!(line.contains("cpu engine: perf ("), "{line}"),
            _ => unreachable!(),
        }
        let raw = pprof_raw(&staged.profiles());
        let jni: Vec<_> = raw
            .samples
            .iter()
            .filter(|s| s.labels.get("thread_name").is_some_and(|t| t == "jni-0"))
            .collect();
        let all: i64 = jni.iter().map(|s| s.value).sum();
        let in_c: i64 = jni
            .iter()
            .filter(|s| raw.names(s).contains(&"burn_c_loop"))
            .map(|s| s.value)
            .sum();
        let kernel = raw
            .samples
            .iter()
            .filter(|s| raw.has_kernel_frame(s))
            .count();
        println!("  jni-0: {in_c} of {all} intervals in burn_c_loop; {kernel} samples with kernel frames");
        // About 40% of its CPU is in C (NativeMix's split).
        assert!(in_c * 5 >= all, "native frames: {in_c} of {all}");
        if user_only {
            assert_eq!(kernel, 0, "kernel frames for an unprivileged user");
        }
    }
}
