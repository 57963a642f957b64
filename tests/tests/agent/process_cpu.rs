//! The CPU profile accounts for the whole process's CPU, not only its Java threads: on an
//! allocation-bound workload (tests/java GcChurn: two threads replacing entries of a large
//! live set, so the collector's threads burn most of the CPU), the profile's total matches
//! the CPU time the kernel charged the process, on every supported JDK, with G1 and with
//! ParallelGC, and the GC, JIT compiler and VM threads show under their own frames, named by
//! their `thread_name` labels.
//!
//! The truth is read the moment the JVM has exited, before it is reaped: `/proc/PID/stat`
//! (utime + stime) of the zombie, which counts every thread the process ever had, and the
//! same total from `wait4`'s resource usage as a cross-check. Profiles are read with
//! `go tool pprof`.

use otelprof_tests::Tied as _;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use otelprof_tests::{
    agent_path, all_jdks, classes, jdk17, pprof_top, pprof_traces, scratch_dir, Jdk, JvmRun,
    RunOutput,
};

const CLASS: &str = "otelprof.tests.GcChurn";
/// Two workers, 2 million replacements each, 120 MB live in a 300 MB heap: about 6 CPU-s, of
/// which the collector takes 80-85 % (measured without the agent on both JDKs and GCs).
const ARGS: [&str; 3] = ["2", "2000000", "120"];
const HEAP: &str = "-Xmx300m";
/// How far the profile's CPU total may be from the process's.
const TOLERANCE: f64 = 0.05;

/// The process's CPU time as the kernel counts it at exit.
struct ProcessCpu {
    /// utime + stime of `/proc/PID/stat` read from the zombie, in ms.
    stat_ms: f64,
    /// ru_utime + ru_stime from `wait4`, in ms.
    rusage_ms: f64,
}

/// Runs `run` like [`JvmRun::run`] (agent with `out=`, compiled workloads on the class path),
/// reading the JVM's CPU time between its exit and its reaping.
fn run_measuring_cpu(run: &JvmRun) -> (RunOutput, ProcessCpu) {
    let out_dir = scratch_dir("process-cpu");
    let mut cmd = Command::new(run.jdk.java());
    let options = run.agent_options.as_deref().unwrap_or_default();
    let separator = if options.is_empty() { "" } else { "," };
    cmd.current_dir(&out_dir)
        .arg(format!(
            "-agentpath:{}={options}{separator}out={}",
            agent_path().display(),
            out_dir.display()
        ))
        .args(&run.jvm_flags)
        .arg("-cp")
        .arg(classes())
        .arg(&run.main_class)
        .args(&run.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    // Reaped with wait4 below, after its zombie's stat is read: std's wait would reap it
    // first and give no resource usage.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn_tied().unwrap();
    let pid = child.id() as libc::pid_t;
    let readers = [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ]
    .map(|mut pipe| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    });
    // Wait for the exit without reaping (WNOWAIT): the zombie's stat still holds the times.
    loop {
        // SAFETY: all-zero is a valid siginfo_t; `info` is a valid out pointer.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child; WNOWAIT leaves it waitable.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
            )
        };
        assert_eq!(rc, 0, "waitid: {}", std::io::Error::last_os_error());
        // SAFETY: waitid filled `info` (si_pid stays 0 while the child runs).
        if unsafe { info.si_pid() } == pid {
            break;
        }
        if start.elapsed() > run.timeout {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which ends at the last ')': state is field 3, utime 14,
    // stime 15.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage; valid out pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: reaps our own child, whose exit waitid saw.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    let [stdout, stderr] = readers.map(|r| r.join().unwrap());
    assert!(
        start.elapsed() <= run.timeout,
        "{} did not finish within {:?}\n{stderr}",
        run.main_class,
        run.timeout
    );
    let output = RunOutput {
        exit_code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout,
        stderr,
        out_dir,
        elapsed: start.elapsed(),
    };
    let cpu = ProcessCpu {
        stat_ms: ticks * 1e3 / ticks_per_second,
        rusage_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
    };
    (output, cpu)
}

fn churn(jdk: &Jdk, gc: &str, agent: &str) -> (RunOutput, ProcessCpu) {
    let run = JvmRun::new(jdk.clone(), CLASS)
        .args(&ARGS)
        .agent(agent)
        .flags(&[gc, HEAP]);
    let (out, cpu) = run_measuring_cpu(&run);
    out.assert_clean_exit();
    // Both readings are the kernel's one account of the process, in ticks and in µs.
    assert!(
        (cpu.stat_ms - cpu.rusage_ms).abs() <= 30.0,
        "/proc/PID/stat says {} ms, wait4 {} ms",
        cpu.stat_ms,
        cpu.rusage_ms
    );
    (out, cpu)
}

/// `worker_cpu_ms NAME MS` lines: each worker's CPU time as the JVM measured it.
fn worker_cpu_ms(stdout: &str) -> f64 {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("worker_cpu_ms "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
        .sum()
}

fn whole_process(jdk: &Jdk, gc: &str) {
    let (run, cpu) = churn(jdk, gc, "");
    let files = run.profiles_of("cpu");
    let top = pprof_top(&files, "cpu", &[]);
    let ratio = top.total / cpu.stat_ms;
    let share = |f: &str| 100.0 * top.cum(f) / top.total;
    let c = run.agent_counters();
    println!(
        "{} {gc}: profile {:.0} ms, process {:.0} ms (wait4 {:.0} ms): {ratio:.3}; \
         [GC] {:.1}% [JIT compiler] {:.1}% [VM] {:.1}% [otelprof] {:.1}% [native thread] {:.1}%; \
         {} threads found by the scan, {} intervals credited at discovery",
        jdk.name,
        top.total,
        cpu.stat_ms,
        cpu.rusage_ms,
        share("[GC]"),
        share("[JIT compiler]"),
        share("[VM]"),
        share("[otelprof]"),
        share("[native thread]"),
        c["native_threads_found"],
        c["native_cpu_credited"],
    );
    assert!(
        (ratio - 1.0).abs() <= TOLERANCE,
        "{} {gc}: the CPU profile holds {:.0} ms of the process's {:.0} ms",
        jdk.name,
        top.total,
        cpu.stat_ms
    );
    // The collector does most of this workload's work; the JIT and the VM thread some.
    assert!(share("[GC]") >= 50.0, "[GC] {:.1}%", share("[GC]"));
    assert!(top.cum("[JIT compiler]") > 0.0 && top.cum("[VM]") > 0.0);
    assert_eq!(c["timer_errors"], 0, "{c:?}");
    assert_eq!(c["timers_created"], c["timers_deleted"], "{c:?}");

    // Every role sample names its thread, and the names are the JVM's: GC samples come from
    // the collector's threads, JIT samples from compiler threads.
    let traces = pprof_traces(&files, "cpu");
    for s in &traces {
        let name = s.label("thread_name").unwrap_or("");
        let expected: &[&str] = match s.frames.first().map(String::as_str) {
            Some("[GC]") => &["GC Thread#", "G1 "],
            Some("[JIT compiler]") => &["C1 CompilerThre", "C2 CompilerThre", "Sweeper thread"],
            // The VM's threads, and the main thread's CPU before VMInit (the JVM's start-up).
            Some("[VM]") => &["VM ", "Service Thread", "Monitor Deflati", "main"],
            _ => continue,
        };
        assert!(
            expected.iter().any(|p| name.starts_with(p)),
            "{} sample on thread {name:?}",
            s.frames[0]
        );
        assert_eq!(s.frames.len(), 1, "a role sample is its role's frame");
    }

    // The Java threads keep their stacks and their CPU: the workers' sampled CPU matches what
    // the JVM says they used.
    // (`Top::total` stays the whole profile's under a focus; the rows' flat values add up
    // to what the focus keeps.)
    let workers = pprof_top(&files, "cpu", &["-tagfocus=thread_name=^churn-"]);
    let sampled: f64 = workers.rows.values().map(|r| r.flat).sum();
    let used = worker_cpu_ms(&run.stdout);
    println!(
        "{} {gc}: workers sampled {sampled:.0} ms, used {used:.0} ms",
        jdk.name
    );
    assert!(
        (sampled / used - 1.0).abs() <= 0.05,
        "workers sampled {sampled:.0} ms of {used:.0} ms"
    );
    assert!(workers.cum(&format!("{CLASS}.work")) >= 0.9 * sampled);
}

#[test]
fn cpu_profile_covers_the_whole_process_with_g1() {
    for jdk in all_jdks() {
        whole_process(&jdk, "-XX:+UseG1GC");
    }
}

#[test]
fn cpu_profile_covers_the_whole_process_with_parallel_gc() {
    for jdk in all_jdks() {
        whole_process(&jdk, "-XX:+UseParallelGC");
    }
}

/// Under `clock=itimer` the process timer's signals land on whatever thread runs: the scan
/// only has to recognise the JVM's threads, and it creates no timer.
#[test]
fn itimer_signals_on_jvm_threads_are_named_by_role() {
    let (run, cpu) = churn(&jdk17(), "-XX:+UseParallelGC", "clock=itimer");
    let top = pprof_top(&run.profiles_of("cpu"), "cpu", &[]);
    let c = run.agent_counters();
    println!(
        "itimer: profile {:.0} ms, process {:.0} ms; [GC] {:.0} ms, [non_Java_thread] {:.0} ms; {c:?}",
        top.total,
        cpu.stat_ms,
        top.cum("[GC]"),
        top.cum("[non_Java_thread]")
    );
    assert_eq!(c["timers_created"], 0);
    assert!(c["native_threads_found"] >= 5, "{c:?}");
    assert!(top.cum("[GC]") >= 0.5 * top.total);
    // A thread that started since the last scan (a GC worker the collector adds in the middle
    // of a collection) is named when its samples are drained; only threads that ended within
    // those 50 ms stay unrecognised.
    assert!(
        top.cum("[non_Java_thread]") <= 0.01 * top.total,
        "{} ms unrecognised",
        top.cum("[non_Java_thread]")
    );
}
