//! `otelprof leaks` on a real JVM's live-heap snapshots (tests/java LeakGrowth): with one site
//! that leaks among steady sites, short-lived ones and churn, that site comes first and no
//! other site is a candidate; without it, no candidate at all. The Leaks view of `otelprof
//! serve` over the same snapshots, in Chromium (tests/browser/leaks_ui.js), says the same.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use otelprof_tests::receive::{Launch, ReceiveProcess};
use otelprof_tests::{
    all_jdks, browser_node_modules, otelprof, repo_root, run_with_timeout, Jdk, JvmRun,
};

const LEAK_SITE: &str = "otelprof.tests.LeakGrowth.leak [byte[]]";

/// The Leaks view over `dir` in Chromium shows `site` first (`none`: no candidate).
fn the_leaks_view_shows(dir: &Path, site: &str) {
    let serve = ReceiveProcess::launch(Launch {
        store: Some(dir),
        ui_host: Some("127.0.0.1"),
        ..Launch::default()
    });
    let ui = serve.ui.unwrap();
    let modules = browser_node_modules();
    let mut node = Command::new("node");
    node.arg(repo_root().join("tests/browser/leaks_ui.js"))
        .env("NODE_PATH", &modules)
        .env("OTELPROF_UI", format!("http://127.0.0.1:{ui}"))
        .env("OTELPROF_LEAK_SITE", site);
    let (code, stdout, stderr, _) = run_with_timeout(node, Duration::from_secs(120));
    println!("{stdout}{stderr}");
    assert_eq!(
        code,
        Some(0),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
}

const SECONDS: &str = "40";

/// `otelprof leaks` on a run of LeakGrowth: its output and the snapshots' directory.
fn leaks_of(jdk: &Jdk, mode: &str) -> (String, std::path::PathBuf) {
    let out = JvmRun::new(jdk.clone(), "otelprof.tests.LeakGrowth")
        .agent("cpu=off,live=64k,alloc_rate=0,period=2s")
        .flags(&["-Xmx512m", "-XX:+UseG1GC"])
        .args(&[mode, SECONDS])
        .run();
    out.assert_clean_exit();
    let snapshots = out.profiles_of("live").len();
    assert!(snapshots >= 15, "{snapshots} snapshots");
    let (code, stdout, stderr) = otelprof(&["leaks", "--all", "5", out.out_dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    println!("{} {mode}: {}\n{stdout}", jdk.name, out.stdout.trim());
    (stdout, out.out_dir)
}

/// The candidates' rows: the lines between the candidates' header and "Other sites".
fn candidates(report: &str) -> Vec<&str> {
    report
        .lines()
        .skip_while(|l| !l.contains("leak candidate(s)"))
        .skip(2)
        .take_while(|l| !l.starts_with("Other sites"))
        .collect()
}

#[test]
fn the_leaking_site_comes_first_and_a_steady_heap_has_none() {
    for jdk in all_jdks() {
        // The two runs sleep most of their time (10 ms steps of light work): side by side
        // they take the time of one.
        let (leaking, steady) = std::thread::scope(|s| {
            let steady = s.spawn(|| leaks_of(&jdk, "none"));
            (leaks_of(&jdk, "leak"), steady.join().unwrap())
        });
        let (report, dir) = leaking;
        let rows = candidates(&report);
        assert!(!rows.is_empty(), "{report}");
        assert!(rows[0].ends_with(LEAK_SITE), "{report}");
        for row in &rows {
            assert!(
                row.contains("LeakGrowth.leak "),
                "not a leak: {row}\n{report}"
            );
        }
        the_leaks_view_shows(&dir, LEAK_SITE);
        // Focus: kept by --include of the leaking method, gone with --exclude of it.
        let focused = |flag: &str| {
            let dir = dir.to_str().unwrap();
            let (code, out, err) =
                otelprof(&["leaks", flag, "*.LeakGrowth.leak", "--all", "5", dir]);
            assert_eq!(code, 0, "{err}");
            out
        };
        let included = focused("--include");
        assert!(
            candidates(&included)
                .first()
                .is_some_and(|r| r.ends_with(LEAK_SITE)),
            "{included}"
        );
        let excluded = focused("--exclude");
        assert!(!excluded.contains("LeakGrowth.leak "), "{excluded}");
        let (report, dir) = steady;
        assert!(report.contains("no leak candidates among"), "{report}");
        the_leaks_view_shows(&dir, "none");
    }
}
