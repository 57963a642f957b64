//! `otelprof profile PID`: a one-shot profile of a running JVM in one file (attach, profile,
//! write, stop), in every format its name can ask for, read back with independent tools
//! (`go tool pprof`, the official OTLP classes, Chromium's page is the flame test's); Ctrl-C
//! ends it early and still writes; a JVM with a session of its own is left alone.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use otelprof_tests::{
    cli_path, jdk17, otelprof, pprof_top, python, scratch_dir, JvmRun, RunningJvm, Tied as _,
};

const CPU_SPLIT: &str = "otelprof.workloads.CpuSplit";

fn busy_jvm() -> RunningJvm {
    let jvm = JvmRun::new(jdk17(), CPU_SPLIT)
        .args(&["2", "600"])
        .no_agent()
        .spawn();
    std::thread::sleep(Duration::from_secs(3));
    jvm
}

/// The sample count `otelprof profile` printed (`N samples in …`).
fn samples(stdout: &str) -> u64 {
    stdout
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sample count in {stdout:?}"))
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn profile(jvm: &RunningJvm, extra: &[&str], output: &Path) -> String {
    let pid = jvm.pid.to_string();
    let mut args = vec!["profile", pid.as_str()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-o", output.to_str().unwrap()]);
    let (code, out, err) = otelprof(&args);
    println!("$ otelprof {}\n{out}{err}", args.join(" "));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(output.is_file(), "{} not written", output.display());
    let left = files_in(output.parent().unwrap());
    assert!(
        left.iter().all(|n| !n.starts_with(".otelprof-profile")),
        "temporary files left: {left:?}"
    );
    out
}

#[test]
fn one_command_profiles_a_running_jvm_into_each_format_and_stops() {
    let jvm = busy_jvm();
    let jvm_files = files_in(&jvm.out_dir);
    let dir = scratch_dir("profile-once");

    // pprof: the workload's split, read by go tool pprof.
    let pprof = dir.join("cpu.pb.gz");
    let out = profile(&jvm, &["--duration", "4s"], &pprof);
    assert!(samples(&out) >= 100, "{out}");
    assert!(
        out.contains("wrote") && (out.contains("KiB)") || out.contains(" B)")),
        "{out}"
    );
    let top = pprof_top(std::slice::from_ref(&pprof), "cpu", &[]);
    let cum = |m: &str| top.cum(&format!("{CPU_SPLIT}.{m}"));
    // Shares of the three methods together (the JVM's own threads are not the workload's).
    let pooled = cum("sixty") + cum("thirty") + cum("ten");
    let share = |m: &str| 100.0 * cum(m) / pooled;
    for (m, truth) in [("sixty", 60.0), ("thirty", 30.0), ("ten", 10.0)] {
        let s = share(m);
        println!("{m}: {s:.1}% (truth {truth}%)");
        assert!((s - truth).abs() <= 6.0, "{m}: {s:.1}% vs {truth}%");
    }

    // Collapsed stacks: one line per stack, root first, a count at the end.
    let folded = dir.join("cpu.collapsed");
    profile(&jvm, &["-d", "2s", "--interval", "5ms"], &folded);
    let text = std::fs::read_to_string(&folded).unwrap();
    let counted: u64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(counted > 0, "{text}");
    assert!(text.contains(&format!("{CPU_SPLIT}.sixty")), "{text}");

    // OTLP, parsed by the official classes.
    let otlp = dir.join("cpu.otlp.pb");
    profile(&jvm, &["-d", "2s"], &otlp);
    let check = Command::new(python())
        .args([
            "-c",
            "import sys\n\
             from opentelemetry.proto.profiles.v1development import profiles_pb2 as pb\n\
             d = pb.ProfilesData()\n\
             d.ParseFromString(open(sys.argv[1], 'rb').read())\n\
             n = sum(len(p.samples) for r in d.resource_profiles for s in r.scope_profiles for p in s.profiles)\n\
             print(n, len(d.dictionary.function_table))",
        ])
        .arg(&otlp)
        .output_tied()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let n: Vec<u64> = said
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(n[0] > 0 && n[1] > 0, "OTLP samples and functions: {said}");

    // The flame graph as a page, and wall clock.
    let html = dir.join("wall.html");
    profile(&jvm, &["-d", "2s", "--type", "wall", "-i", "10ms"], &html);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("OtelprofFlame") && page.contains("sixty"),
        "no flame graph"
    );

    // Nothing left running in the JVM, and nothing written where it runs.
    let (code, status, _) = otelprof(&["attach", &jvm.pid.to_string(), "status"]);
    assert_eq!(code, 0, "{status}");
    assert!(status.contains("state: stopped"), "{status}");
    assert_eq!(
        files_in(&jvm.out_dir),
        jvm_files,
        "files appeared beside the JVM"
    );

    // Bad requests fail before the JVM is touched.
    for (args, says) in [
        (vec!["--type", "wall", "-i", "512k"], "--interval"),
        (vec!["-i", "10ms,wall=1ms"], "--interval"),
    ] {
        let pid = jvm.pid.to_string();
        let mut all = vec!["profile", pid.as_str()];
        all.extend(args);
        all.extend(["-o", "x.html"]);
        let (code, _, err) = otelprof(&all);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(says), "{err}");
    }
    let (code, _, err) = otelprof(&["profile", &jvm.pid.to_string(), "-o", "x.jfr"]);
    assert!(code == 1 && err.contains("*.html"), "{err}");

    // A session of the JVM's own is not ended by a one-shot profile.
    let started = otelprof(&[
        "attach",
        &jvm.pid.to_string(),
        "start",
        &format!("cpu=10ms,out={}", dir.display()),
    ]);
    assert_eq!(started.0, 0, "{}{}", started.1, started.2);
    let (code, _, err) = otelprof(&[
        "profile",
        &jvm.pid.to_string(),
        "-d",
        "1s",
        "-o",
        dir.join("refused.html").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("already runs an otelprof session"), "{err}");
    let (_, status, _) = otelprof(&["attach", &jvm.pid.to_string(), "status"]);
    assert!(status.contains("state: running"), "{status}");
    assert_eq!(otelprof(&["attach", &jvm.pid.to_string(), "stop"]).0, 0);
    assert!(jvm.alive());
}

#[test]
fn ctrl_c_ends_the_profile_early_and_still_writes_the_file() {
    let jvm = busy_jvm();
    let out = scratch_dir("profile-ctrl-c").join("early.svg");
    let mut child = Command::new(cli_path())
        .args(["profile", &jvm.pid.to_string(), "--duration", "10m", "-o"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_tied()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let start = Instant::now();
    // SAFETY: kill(2) on our own child's pid, which it still is (not yet reaped).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "still profiling");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    println!("{stdout} ({:?} after Ctrl-C)", start.elapsed());
    assert!(status.success(), "{status:?}");
    assert!(
        stdout.contains("(ended early)") && samples(&stdout) > 0,
        "{stdout}"
    );
    assert!(std::fs::read_to_string(&out).unwrap().contains("<svg"));
    let (_, st, _) = otelprof(&["attach", &jvm.pid.to_string(), "status"]);
    assert!(st.contains("state: stopped"), "{st}");
}
