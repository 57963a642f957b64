//! The live heap on demand: `otelprof attach PID start live=…` on a running JVM that holds a
//! steady set of objects from one method and wastes from another (tests/java LiveTarget),
//! then `dump -o` and `stop`, on OpenJDK 17 and Temurin 25. The snapshots hold the objects
//! allocated since the start that are still alive: the held set, not the waste.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use otelprof_tests::attach::run_in;
use otelprof_tests::{all_jdks, classes, cli_path, pprof_top, scratch_dir, RunningJvm, Top};

const CLASS: &str = "otelprof.tests.LiveTarget";

fn attach_in(cwd: &Path, pid: u32, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["attach".to_owned(), pid.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    run_in(Some(cwd), &[], &cli_path(), &all)
}

#[track_caller]
fn lines_of(result: &(i32, String, String)) -> Vec<String> {
    let (code, stdout, stderr) = result;
    assert_eq!(*code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout.lines().next(), Some("ok"), "{stdout}");
    stdout.lines().map(str::to_owned).collect()
}

/// The held set dominates the snapshot; the waste is absent.
#[track_caller]
fn assert_held(what: &str, top: &Top) {
    let keep = top.cum(&format!("{CLASS}.keep"));
    let waste = top.cum(&format!("{CLASS}.waste"));
    println!(
        "{what}: {:.1} MB live, keep {:.1} MB, waste {:.3} MB",
        top.total / 1e6,
        keep / 1e6,
        waste / 1e6
    );
    assert!(top.total > 2e6, "{what}: {top:?}");
    assert!(keep >= 0.9 * top.total, "{what}: {top:?}");
    assert!(waste <= 0.05 * top.total, "{what}: {top:?}");
}

#[test]
fn attach_start_live_then_dump_and_stop_give_live_snapshots_on_jdk17_and_jdk25() {
    for jdk in all_jdks() {
        let cwd = scratch_dir("attach-live-jvm");
        let mut cmd = Command::new(jdk.java());
        cmd.current_dir(&cwd)
            .args(["-Xmx256m", "-Xmn16m", "-cp"])
            .arg(classes())
            .arg(CLASS);
        let jvm = RunningJvm::start(cmd);
        let here = std::fs::canonicalize(scratch_dir("attach-live-here")).unwrap();
        std::fs::create_dir(here.join("profiles")).unwrap();

        let started = lines_of(&attach_in(
            &here,
            jvm.pid,
            &["start", "cpu=off,live=32k,out=profiles"],
        ));
        assert!(
            started.iter().any(|l| l == "types: live=32 KiB"),
            "{started:?}"
        );
        assert!(lines_of(&attach_in(&here, jvm.pid, &["status"]))
            .iter()
            .any(|l| l == "types: live=32 KiB"));
        std::thread::sleep(Duration::from_secs(4));
        let dumped = lines_of(&attach_in(
            &here,
            jvm.pid,
            &["dump", "-o", "live-now.pb.gz"],
        ));
        assert!(
            dumped.iter().any(|l| l == "file: live-now.pb.gz"),
            "{dumped:?}"
        );
        let top = pprof_top(&[here.join("live-now.pb.gz")], "inuse_space", &[]);
        assert_held(&format!("{} dump", jdk.name), &top);

        let stopped = lines_of(&attach_in(&here, jvm.pid, &["stop"]));
        let files: Vec<_> = stopped
            .iter()
            .filter_map(|l| l.strip_prefix("file: "))
            .filter(|f| f.contains("/live-"))
            .map(std::path::PathBuf::from)
            .collect();
        assert!(!files.is_empty(), "{stopped:?}");
        let top = pprof_top(&files[files.len() - 1..], "inuse_space", &[]);
        assert_held(&format!("{} stop", jdk.name), &top);
        assert!(jvm.alive());
        assert!(!jvm.stderr().contains("A fatal error"), "{}", jvm.stderr());
    }
}
