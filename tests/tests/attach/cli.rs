//! `otelprof attach` against real JVMs (OpenJDK 17, Temurin 25): the attach transport and
//! every way it must refuse, in one line, without harming the process.
//!
//! The transport is exercised with `otelprof attach PID jcmd …`, which goes through the same
//! checks, trigger, signal, socket and peer check as the agent verbs and needs no agent. The
//! JVMs run as root in our namespaces, in their own mount and pid namespaces (`unshare`, with
//! a private /tmp), and as another user (`setpriv` to nobody). Runs as root (scripts/test.sh
//! in CI).

use otelprof_tests::Tied as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use otelprof_tests::attach::*;
use otelprof_tests::RunningJvm;
use otelprof_tests::{all_jdks, cli_path, jdk17, jdk25, scratch_dir};

#[test]
fn attach_starts_the_listener_then_reuses_it_on_jdk17_and_jdk25() {
    for jdk in all_jdks() {
        let cwd = scratch_dir("attach-plain");
        let jvm = RunningJvm::start(java(&jdk, &cwd, &[]));
        let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid));
        assert!(
            !socket.exists(),
            "{}: listening before any attach",
            jdk.name
        );

        // First attach: trigger, SIGQUIT, wait for the socket, connect.
        assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk);
        assert!(socket.exists());
        assert_no_leftovers(&jvm, &cwd);
        // The SIGQUIT found the trigger: no thread dump was printed.
        assert!(
            !jvm.stdout().contains("Full thread dump"),
            "{}",
            jvm.stdout()
        );
        // Second attach: the listener is up already; several words make one command.
        let (code, stdout, stderr) = attach(jvm.pid, &["jcmd", "Thread.print", "-l"]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("\"main\""), "{stdout}");
        // A command HotSpot rejects: its words, exit 1.
        let (code, stdout, _) = attach(jvm.pid, &["jcmd", "No.such_command"]);
        assert_eq!(code, 1);
        assert!(stdout.contains("Unknown diagnostic command"), "{stdout}");
        assert!(jvm.alive());
    }
}

#[test]
fn attach_reaches_a_jvm_in_its_own_mount_and_pid_namespace() {
    // The JVM's class from /var/tmp: its private /tmp hides ours, where a checkout may be.
    let classes_dir = Staged::create();
    for jdk in all_jdks() {
        let cwd = scratch_dir("attach-ns");
        // A private /tmp: the JVM's socket and files are not in ours.
        let jvm = RunningJvm::start(java_in_namespaces(
            &jdk,
            &cwd,
            &[],
            &classes_dir.0.join("classes"),
        ));
        assert_eq!(jvm.own_pid, 1, "the JVM should be pid 1 of its namespace");
        assert_ne!(jvm.pid, 1);

        assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk);
        // Its socket is in its /tmp, named after the pid it sees.
        assert!(jvm.root().join("tmp/.java_pid1").exists());
        assert!(!Path::new(&format!("/tmp/.java_pid{}", jvm.pid)).exists());
        assert_no_leftovers(&jvm, &cwd);

        // Paths are the JVM's: a relative out= means nothing there.
        assert_refused(
            &attach(jvm.pid, &["start", "out=profiles"]),
            "sees other files than otelprof (another mount namespace or root), so a relative \
             directory is ambiguous",
        );
        assert_refused(
            &attach(
                jvm.pid,
                &["start", &format!("out={}", cwd.join("nope").display())],
            ),
            "no directory",
        );
        assert!(jvm.alive());
    }
}

#[test]
fn root_attaches_to_another_users_jvm_and_a_user_only_to_its_own() {
    assert_eq!(euid(), 0, "this test runs as root (scripts/test.sh does)");
    let staged = Staged::create();
    let (nobody, nogroup) = nobody_ids();
    for jdk in all_jdks() {
        // The JVM's working directory is / (not writable by nobody): the trigger goes to /tmp.
        let mut cmd = Command::new(AS_NOBODY[0]);
        cmd.current_dir("/")
            .args(&AS_NOBODY[1..])
            .arg(jdk.java())
            .arg("-cp")
            .arg(staged.0.join("classes"))
            .arg(MAIN);
        let jvm = RunningJvm::start(cmd);
        let meta = std::fs::metadata(format!("/proc/{}", jvm.pid)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (nobody, nogroup));

        // Root acts as the JVM's user: HotSpot's peer check passes.
        assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk);
        let socket = std::fs::metadata(format!("/tmp/.java_pid{}", jvm.pid)).unwrap();
        assert_eq!(socket.uid(), nobody);
        assert_no_leftovers(&jvm, Path::new("/"));

        // The JVM's own user attaches to it too (the listener already runs).
        let otelprof = staged.0.join("otelprof");
        let pid = jvm.pid.to_string();
        assert_version(
            &run_as(
                &AS_NOBODY,
                &otelprof,
                &["attach", &pid, "jcmd", "VM.version"],
            ),
            &jdk,
        );
        assert!(jvm.alive());
    }

    // Another user's JVM, for a user that is not root: refused before anything is sent.
    let cwd = scratch_dir("attach-root-jvm");
    let jvm = RunningJvm::start(java(&jdk17(), &cwd, &[]));
    let pid = jvm.pid.to_string();
    let otelprof = staged.0.join("otelprof");
    assert_refused(
        &run_as(&AS_NOBODY, &otelprof, &["attach", &pid, "status"]),
        &format!(
            "process {pid} (\"java\") runs as uid 0 gid 0, and you are uid {nobody} gid \
             {nogroup}: HotSpot answers only its own user and group, or root"
        ),
    );
    assert!(!Path::new(&format!("/tmp/.java_pid{pid}")).exists());
    assert_no_leftovers(&jvm, &cwd);
    assert!(jvm.alive());
}

#[test]
fn a_jvm_that_cannot_be_attached_is_refused_in_one_line_and_left_running() {
    let jdk = jdk25();
    // -XX:+DisableAttachMechanism, read from the JVM's performance data: no signal at all.
    let cwd = scratch_dir("attach-disabled");
    let jvm = RunningJvm::start(java(&jdk, &cwd, &["-XX:+DisableAttachMechanism"]));
    assert_refused(
        &attach(jvm.pid, &["status"]),
        &format!(
            "process {} (\"java\") runs with -XX:+DisableAttachMechanism: it cannot be \
             attached to",
            jvm.pid
        ),
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!jvm.stdout().contains("Full thread dump"), "signalled");
    assert_no_leftovers(&jvm, &cwd);
    assert!(jvm.alive());
    drop(jvm);

    // The same flag where otelprof cannot read it (an @argfile, no performance data): the
    // socket never appears, and the wait ends at --timeout.
    let cwd = scratch_dir("attach-disabled-argfile");
    std::fs::write(
        cwd.join("flags"),
        "-XX:+DisableAttachMechanism -XX:-UsePerfData",
    )
    .unwrap();
    let jvm = RunningJvm::start(java(&jdk, &cwd, &["@flags"]));
    let started = std::time::Instant::now();
    assert_refused(
        &attach(jvm.pid, &["--timeout", "2s", "jcmd", "VM.version"]),
        &format!(
            "process {} (\"java\") did not start its attach listener within 2s (attach may \
             be disabled with -XX:+DisableAttachMechanism",
            jvm.pid
        ),
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_no_leftovers(&jvm, &cwd);
    assert!(jvm.alive());
    drop(jvm);

    // -Xrs: HotSpot starts the listener at start-up (it will not handle SIGQUIT later).
    let cwd = scratch_dir("attach-xrs");
    let jvm = RunningJvm::start(java(&jdk, &cwd, &["-Xrs"]));
    let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid));
    for _ in 0..100 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk);
    // Without its socket it cannot be woken: SIGQUIT would kill it, so nothing is sent.
    std::fs::remove_file(&socket).unwrap();
    assert_refused(
        &attach(jvm.pid, &["jcmd", "VM.version"]),
        &format!(
            "process {} (\"java\") does not handle SIGQUIT (started with -Xrs, or still \
             starting up)",
            jvm.pid
        ),
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(jvm.alive(), "the -Xrs JVM was killed");
    assert_no_leftovers(&jvm, &cwd);
}

#[test]
fn processes_that_are_not_jvms_are_never_signalled() {
    let mut sleep = Command::new("sleep").arg("60").spawn_tied().unwrap();
    let pid = sleep.id();
    assert_refused(
        &attach(pid, &["status"]),
        &format!(
            "process {pid} (\"sleep\") is not a HotSpot JVM (no libjvm.so in its memory maps)"
        ),
    );
    assert_refused(
        &attach(pid, &["jcmd", "VM.version"]),
        "is not a HotSpot JVM",
    );
    // SIGQUIT would have killed it (its default action).
    assert!(sleep.try_wait().unwrap().is_none(), "sleep was signalled");
    sleep.kill().unwrap();
    sleep.wait().unwrap();

    // pid_max is never a pid: pids stay below it.
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .to_owned();
    assert_refused(
        &run(&cli_path(), &["attach", &pid_max, "status"]),
        &format!("no process with pid {pid_max}"),
    );
    for bad in ["0", "-3", "abc", "99999999999"] {
        let (code, stdout, stderr) = run(&cli_path(), &["attach", bad, "status"]);
        assert_eq!(code, 2, "{bad}: {stderr}");
        assert_eq!(stdout, "");
        assert!(stderr.contains("<PID>"), "{bad}: {stderr}");
    }
}

#[test]
fn agent_options_are_checked_before_the_jvm_is_touched() {
    let cwd = scratch_dir("attach-options");
    let jvm = RunningJvm::start(java(&jdk17(), &cwd, &[]));
    let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid));
    let long_service = format!("service={}", "s".repeat(1000));
    for (options, expected) in [
        ("cpu=1us", "agent option \"cpu=1us\": the shortest is 100us"),
        (
            "cpus=10ms",
            "unknown agent option \"cpus\" (known: cpu, wall,",
        ),
        (
            "reply=/etc/passwd",
            "option \"reply\" is set by otelprof attach itself",
        ),
        (
            "out=no/such/dir",
            "agent option out=\"no/such/dir\": no directory",
        ),
        ("cpu=1ms,cpu=2ms", "agent option \"cpu\" is given twice"),
        ("wall=\x1b[2J", "agent option \"wall=\\x1b[2J\""),
        (
            &long_service,
            "the agent options are too long: HotSpot passes at most 1024 bytes",
        ),
    ] {
        assert_refused(&attach(jvm.pid, &["start", options]), expected);
    }
    // Never contacted: no listener was started.
    assert!(!socket.exists());
    assert_no_leftovers(&jvm, &cwd);
}

#[test]
fn a_library_the_jvm_cannot_load_is_reported_with_the_jvms_words() {
    // An `otelprof` whose `libotelprof.so` is not a library.
    let dir = scratch_dir("attach-bad-lib");
    std::fs::copy(cli_path(), dir.join("otelprof")).unwrap();
    std::fs::write(dir.join("libotelprof.so"), "not an ELF file\n").unwrap();
    for jdk in all_jdks() {
        let cwd = scratch_dir("attach-bad-lib-jvm");
        let jvm = RunningJvm::start(java(&jdk, &cwd, &[]));
        let pid = jvm.pid.to_string();
        let lib = std::fs::canonicalize(dir.join("libotelprof.so")).unwrap();
        assert_refused(
            &run(&dir.join("otelprof"), &["attach", &pid, "start"]),
            &format!(
                "process {pid} (\"java\") did not load {}: {} was not loaded.",
                lib.display(),
                lib.display()
            ),
        );
        assert_no_leftovers(&jvm, &cwd);
        assert!(jvm.alive());
    }
    // No library beside otelprof at all.
    std::fs::remove_file(dir.join("libotelprof.so")).unwrap();
    assert_refused(
        &run(&dir.join("otelprof"), &["attach", "1", "status"]),
        "no agent library",
    );
}

/// Where the JVM cannot open our library, otelprof copies it into the JVM's /tmp as the
/// JVM's user, loads it from there, and reuses the copy. What the agent then answers is the
/// agent's business (tests/tests/attach/agent.rs); here: which file the JVM mapped.
#[test]
fn the_agent_library_is_copied_where_the_jvm_can_open_it_and_reused() {
    let library = otelprof_tests::agent_path();
    let hash = short_sha256(&library);
    let copy = format!("/tmp/otelprof-{hash}/libotelprof.so");

    // Another mount namespace: the copy goes into its private /tmp.
    // The JVM's class from /var/tmp: its private /tmp hides ours, where a checkout may be.
    let staged = Staged::create();
    let classes_dir = &staged;
    let cwd = scratch_dir("attach-copy-ns");
    let jvm = RunningJvm::start(java_in_namespaces(
        &jdk25(),
        &cwd,
        &[],
        &classes_dir.0.join("classes"),
    ));
    for _ in 0..2 {
        let _ = attach(jvm.pid, &["start"]);
        assert_eq!(mapped_agents(jvm.pid), vec![copy.clone()]);
    }
    let placed = jvm.root().join(copy.trim_start_matches('/'));
    let meta = std::fs::metadata(&placed).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o755));
    let dir_meta = std::fs::metadata(placed.parent().unwrap()).unwrap();
    assert_eq!(dir_meta.mode() & 0o7777, 0o755);
    assert_eq!(
        std::fs::read(&placed).unwrap(),
        std::fs::read(&library).unwrap()
    );
    // On the JVM's private /tmp, not on ours.
    let host_tmp = std::fs::metadata("/tmp").unwrap();
    assert_ne!(
        dir_meta.dev(),
        host_tmp.dev(),
        "the copy landed in our /tmp"
    );
    assert_no_leftovers(&jvm, &cwd);
    drop(jvm);

    // The same file system, but the JVM's user cannot enter the directory of ours.
    let private = staged.0.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    for file in ["otelprof", "libotelprof.so"] {
        std::fs::copy(staged.0.join(file), private.join(file)).unwrap();
    }
    let host_copy = RemovedOnDrop(PathBuf::from(format!("/tmp/otelprof-{hash}")));
    let _ = std::fs::remove_dir_all(&host_copy.0);
    let mut cmd = Command::new(AS_NOBODY[0]);
    cmd.current_dir("/")
        .args(&AS_NOBODY[1..])
        .arg(jdk17().java())
        .arg("-cp")
        .arg(staged.0.join("classes"))
        .arg(MAIN);
    let jvm = RunningJvm::start(cmd);
    let pid = jvm.pid.to_string();
    let _ = run(&private.join("otelprof"), &["attach", &pid, "start"]);
    assert_eq!(mapped_agents(jvm.pid), vec![copy.clone()]);
    let (nobody, _) = nobody_ids();
    assert_eq!(std::fs::metadata(&copy).unwrap().uid(), nobody);
    assert!(maps_hold(jvm.pid, &copy));
    assert_no_leftovers(&jvm, Path::new("/"));
    drop(jvm);
    drop(host_copy);
}

/// What is found in the JVM's /tmp is checked, never trusted: a copy's directory of another
/// user, a link in its place, a socket that another process serves.
#[test]
fn planted_files_in_the_jvms_tmp_are_refused() {
    let library = otelprof_tests::agent_path();
    let hash = short_sha256(&library);
    let (nobody, _) = nobody_ids();
    // The JVM's class from /var/tmp: its private /tmp hides ours, where a checkout may be.
    let classes_dir = Staged::create();
    let cwd = scratch_dir("attach-planted");
    let jvm = RunningJvm::start(java_in_namespaces(
        &jdk17(),
        &cwd,
        &[],
        &classes_dir.0.join("classes"),
    ));
    let tmp = jvm.root().join("tmp");
    let dir = tmp.join(format!("otelprof-{hash}"));

    // A socket where the JVM's would be, served by another process (this test), owned by
    // the JVM's user: connected to, identified, and not spoken to.
    let socket = tmp.join(".java_pid1");
    let fake = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    fake.set_nonblocking(true).unwrap();
    assert_refused(
        &attach(jvm.pid, &["jcmd", "VM.version"]),
        &format!(
            "not talking to /tmp/.java_pid1 of process {} (\"java\"): the process listening \
             there is pid {}, not the JVM",
            jvm.pid,
            std::process::id()
        ),
    );
    let (mut conn, _) = fake.accept().unwrap();
    conn.set_nonblocking(false).unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut conn, &mut got).unwrap();
    assert!(got.is_empty(), "sent {got:?} to an impostor");
    drop(fake);

    // Now a stale socket (nobody listens): the JVM is woken and replaces it.
    assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk17());
    // A directory of another user where the copy goes.
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(nobody), None).unwrap();
    assert_refused(
        &attach(jvm.pid, &["start"]),
        &format!(
            "cannot place libotelprof.so where process {} (\"java\") can open it: \
             /tmp/otelprof-{hash} belongs to uid {nobody}, not to the JVM's user (uid 0)",
            jvm.pid
        ),
    );
    std::fs::remove_dir(&dir).unwrap();

    // A link there, to a directory of ours.
    let bait = scratch_dir("attach-bait");
    std::os::unix::fs::symlink(&bait, &dir).unwrap();
    assert_refused(
        &attach(jvm.pid, &["start"]),
        &format!("/tmp/otelprof-{hash} is a symbolic link"),
    );
    std::fs::remove_file(&dir).unwrap();
    assert!(names(&bait, "").is_empty(), "wrote through the link");

    // A library there with other bytes.
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("libotelprof.so"), "something else").unwrap();
    std::fs::set_permissions(
        dir.join("libotelprof.so"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_refused(
        &attach(jvm.pid, &["start"]),
        &format!("/tmp/otelprof-{hash}/libotelprof.so exists with other content"),
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(mapped_agents(jvm.pid).is_empty(), "a library was loaded");

    assert_no_leftovers(&jvm, &cwd);
    assert!(jvm.alive());
}

/// What a JVM prints goes to a terminal escaped, and a closed pipe ends the command quietly.
#[test]
fn the_jvms_words_are_shown_escaped_and_a_closed_pipe_is_quiet() {
    let cwd = scratch_dir("attach-output");
    let mut cmd = java(&jdk17(), &cwd, &[]);
    cmd.args(["120", "evil\\e]0;pwned\\e\\\\\\e[2J"]);
    let jvm = RunningJvm::start(cmd);
    let (code, stdout, stderr) = attach(jvm.pid, &["jcmd", "Thread.print"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"evil\\x1b]0;pwned"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "a raw ESC reached the terminal");

    // `otelprof attach PID jcmd Thread.print | head -1`: 141, as cat or grep would end.
    let mut child = Command::new(cli_path())
        .args(["attach", &jvm.pid.to_string(), "jcmd", "Thread.print"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn_tied()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(jvm.alive());
}

/// A rootless container: the JVM is root in its own user namespace and nobody outside it.
/// HotSpot compares the peer's ids as its namespace sees them, so host root (not mapped
/// there) must take the JVM's host ids, which map to its root.
#[test]
fn attach_reaches_a_jvm_that_is_root_in_its_own_user_namespace() {
    let staged = Staged::create();
    let (nobody, _) = nobody_ids();
    let mut cmd = Command::new(AS_NOBODY[0]);
    cmd.current_dir("/")
        .args(&AS_NOBODY[1..])
        .args(["unshare", "--user", "--map-root-user"])
        .args(["--mount", "--pid", "--fork", "--mount-proc", "--kill-child"])
        .args([
            "sh",
            "-c",
            r#"mount -t tmpfs tmpfs /tmp && exec "$@""#,
            "sh",
        ])
        .arg(jdk25().java())
        .arg("-cp")
        .arg(staged.0.join("classes"))
        .arg(MAIN);
    let jvm = RunningJvm::start(cmd);
    let uid_map = std::fs::read_to_string(format!("/proc/{}/uid_map", jvm.pid)).unwrap();
    assert_eq!(
        uid_map.split_whitespace().collect::<Vec<_>>(),
        ["0", &nobody.to_string(), "1"],
        "the JVM should be root inside, nobody outside"
    );
    assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk25());
    let socket = std::fs::metadata(jvm.root().join("tmp/.java_pid1")).unwrap();
    assert_eq!(socket.uid(), nobody);
    // Its owner outside the namespace, without root, too.
    let pid = jvm.pid.to_string();
    assert_version(
        &run_as(
            &AS_NOBODY,
            &staged.0.join("otelprof"),
            &["attach", &pid, "jcmd", "VM.version"],
        ),
        &jdk25(),
    );
    assert_no_leftovers(&jvm, Path::new("/"));
    assert!(jvm.alive());
}

/// A JVM that stops answering mid-command (here: stopped with SIGSTOP once its listener is
/// up) costs `--timeout`, one line, and nothing else: it carries on when it is continued.
#[test]
fn a_jvm_that_does_not_answer_costs_the_timeout_and_one_line() {
    let cwd = scratch_dir("attach-hung");
    let jvm = RunningJvm::start(java(&jdk17(), &cwd, &[]));
    assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk17());
    // SAFETY: kill has no memory-safety preconditions; the pid is the JVM just started.
    unsafe { libc::kill(jvm.pid as i32, libc::SIGSTOP) };
    let started = std::time::Instant::now();
    let result = attach(jvm.pid, &["--timeout", "1500ms", "jcmd", "VM.version"]);
    let waited = started.elapsed();
    // SAFETY: as above.
    unsafe { libc::kill(jvm.pid as i32, libc::SIGCONT) };
    assert_refused(
        &result,
        &format!(
            "process {} (\"java\") did not answer `jcmd` within 1.5s (it may still carry it \
             out; see --timeout)",
            jvm.pid
        ),
    );
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    // Continued, it answers again.
    assert_version(&attach(jvm.pid, &["jcmd", "VM.version"]), &jdk17());
    assert_no_leftovers(&jvm, &cwd);
    assert!(jvm.alive());
}
