//! `otelprof attach PID start|status|dump|stop` with the agent (`Agent_OnAttach`): a JVM
//! started without otelprof is profiled from outside, on OpenJDK 17 and Temurin 25, as root
//! in our namespaces and as another user in its own mount and pid namespaces; the agent's
//! replies come back through the reply files and `dump -o` brings the profile here.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use otelprof_tests::attach::*;
use otelprof_tests::RunningJvm;
use otelprof_tests::{all_jdks, cli_path, jdk25, pprof_top, scratch_dir};

/// `otelprof attach PID ARGS` run in `cwd`.
fn attach_in(cwd: &Path, pid: u32, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["attach".to_owned(), pid.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    run_in(Some(cwd), &[], &cli_path(), &all)
}

/// An `ok` reply holding `line`.
#[track_caller]
fn assert_ok(result: &(i32, String, String), line: &str) {
    let (code, stdout, stderr) = result;
    assert_eq!(*code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout.lines().next(), Some("ok"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l == line || l.starts_with(line)),
        "{line:?} not in {stdout}"
    );
}

/// The profile at `file` is a pprof file in which the JVM's busy method shows.
#[track_caller]
fn assert_profile(file: &Path) {
    let bytes = std::fs::read(file).unwrap();
    assert_eq!(&bytes[..2], [0x1f, 0x8b], "{} is not gzip", file.display());
    let top = pprof_top(&[file.to_path_buf()], "cpu", &[]);
    assert!(
        top.cum("otelprof.tests.AttachTarget.spin") > 0.0,
        "{}: {:?}",
        file.display(),
        top.rows
    );
}

#[test]
fn start_status_dump_stop_and_start_again_on_jdk17_and_jdk25() {
    for jdk in all_jdks() {
        let jvm_cwd = scratch_dir("attach-agent-jvm");
        let jvm = RunningJvm::start(java(&jdk, &jvm_cwd, &[]));
        // Our side: a relative out= and -o are ours, made absolute here.
        let here = scratch_dir("attach-agent-here");
        std::fs::create_dir(here.join("profiles")).unwrap();
        let here = std::fs::canonicalize(here).unwrap();

        // Without the agent, status, stop and dump load nothing.
        assert_ok(&attach_in(&here, jvm.pid, &["status"]), "state: not loaded");
        let stop = attach_in(&here, jvm.pid, &["stop"]);
        assert_eq!(stop.0, 1, "{stop:?}");
        assert_eq!(
            stop.1,
            "error: not running (no otelprof agent in this JVM)\n"
        );
        assert!(
            mapped_agents(jvm.pid).is_empty(),
            "loaded by status or stop"
        );

        let started = attach_in(&here, jvm.pid, &["start", "cpu=5ms,out=profiles"]);
        assert_ok(&started, "state: running");
        assert_ok(&started, "options: cpu=5ms,");
        assert!(
            started
                .1
                .contains(&format!("out={}", here.join("profiles").display())),
            "{}",
            started.1
        );
        assert_ok(&attach_in(&here, jvm.pid, &["status"]), "state: running");

        std::thread::sleep(Duration::from_millis(1500));
        let dumped = attach_in(&here, jvm.pid, &["dump", "-o", "now.pb.gz"]);
        assert_ok(&dumped, "file: now.pb.gz");
        assert_profile(&here.join("now.pb.gz"));

        assert_ok(&attach_in(&here, jvm.pid, &["stop"]), "state: stopped");
        let again = attach_in(&here, jvm.pid, &["stop"]);
        assert_eq!(again.0, 1, "{again:?}");
        assert!(again.1.starts_with("error: "), "{again:?}");

        // Stopped is not the end: the same library starts again.
        assert_ok(
            &attach_in(&here, jvm.pid, &["start", "cpu=5ms,out=profiles"]),
            "state: running",
        );
        assert_ok(&attach_in(&here, jvm.pid, &["stop"]), "state: stopped");
        let written: Vec<PathBuf> = std::fs::read_dir(here.join("profiles"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(!written.is_empty(), "no profile in out=");

        assert_no_leftovers(&jvm, &jvm_cwd);
        assert!(jvm.alive());
        assert!(!jvm.stderr().contains("A fatal error"), "{}", jvm.stderr());
    }
}

#[test]
fn verbs_reach_another_users_jvm_in_its_own_namespaces() {
    let staged = Staged::create();
    let (nobody, _) = nobody_ids();
    let jvm_cwd = scratch_dir("attach-agent-ns");
    let jvm = RunningJvm::start(java_in_namespaces(
        &jdk25(),
        &jvm_cwd,
        &AS_NOBODY,
        &staged.0.join("classes"),
    ));
    assert_eq!(jvm.own_pid, 1);
    let here = std::fs::canonicalize(scratch_dir("attach-agent-ns-here")).unwrap();

    // out= is the JVM's path: its own /tmp.
    assert_ok(
        &attach_in(&here, jvm.pid, &["start", "cpu=5ms,out=/tmp"]),
        "state: running",
    );
    std::thread::sleep(Duration::from_millis(1500));
    let (code, stdout, stderr) = attach_in(&here, jvm.pid, &["dump", "-o", "ns.pb.gz"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.lines().any(|l| l == "file: ns.pb.gz"), "{stdout}");
    // The period's file is named as the JVM sees it; where that is from here is said once.
    assert!(
        stderr.contains(&format!(
            "the files named are in the file system of process {} (\"java\"): from here, \
             under /proc/{}/root",
            jvm.pid, jvm.pid
        )),
        "{stderr}"
    );
    let dump = here.join("ns.pb.gz");
    assert_eq!(
        std::fs::metadata(&dump).unwrap().uid(),
        0,
        "ours, not the JVM's"
    );
    assert_profile(&dump);

    // The library was copied into the JVM's /tmp as its user.
    let copies: Vec<String> = names(&jvm.root().join("tmp"), "otelprof-")
        .into_iter()
        .filter(|n| !n.starts_with("otelprof-reply-") && !n.starts_with("otelprof-dump-"))
        .collect();
    assert!(!copies.is_empty());
    for copy in &copies {
        let meta = std::fs::metadata(jvm.root().join("tmp").join(copy)).unwrap();
        assert_eq!(meta.uid(), nobody, "{copy}");
    }

    assert_ok(&attach_in(&here, jvm.pid, &["stop"]), "state: stopped");
    assert_no_leftovers(&jvm, &jvm_cwd);
    assert!(jvm.alive());
}

/// A JVM started with `-agentpath` (or `-javaagent`) is driven through the library it
/// loaded, whichever `otelprof` asks: another path would be a second copy of the agent.
#[test]
fn an_agent_loaded_at_start_is_reached_through_its_own_path() {
    let jdk = otelprof_tests::jdk17();
    let loaded = otelprof_tests::agent_path();
    let jvm_cwd = scratch_dir("attach-agent-early");
    let jvm = RunningJvm::start(java(
        &jdk,
        &jvm_cwd,
        &[&format!(
            "-agentpath:{}=cpu=5ms,out={}",
            loaded.display(),
            jvm_cwd.display()
        )],
    ));
    // Another otelprof, with its own copy of the library beside it.
    let other = scratch_dir("attach-agent-other");
    for file in ["otelprof", "libotelprof.so"] {
        std::fs::copy(cli_path().with_file_name(file), other.join(file)).unwrap();
    }
    let pid = jvm.pid.to_string();
    let (code, stdout, stderr) = run(&other.join("otelprof"), &["attach", &pid, "status"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.lines().any(|l| l == "state: running"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l == format!("library: {}", loaded.display())),
        "{stdout}"
    );
    assert_eq!(
        stderr.trim(),
        format!(
            "otelprof: process {pid} (\"java\") has otelprof's agent loaded from {}: talking \
             to that one",
            loaded.display()
        )
    );
    let (code, stdout, _) = run(&other.join("otelprof"), &["attach", &pid, "stop"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.lines().any(|l| l == "state: stopped"), "{stdout}");
    // Only the library it started with is mapped.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        !maps.contains(&other.display().to_string()),
        "a second copy was loaded"
    );
    assert!(jvm.alive());
}
