//! `otelprof leaks` on a real JVM's live-heap snapshots (tests/java LeakGrowth): with one site
//! that leaks among steady sites, short-lived ones and churn, that site comes first and no
//! other site is a candidate; without it, no candidate at all.

use otelprof_tests::{all_jdks, otelprof, Jdk, JvmRun};

const SECONDS: &str = "40";

/// `otelprof leaks` on a run of LeakGrowth: its output.
fn leaks_of(jdk: &Jdk, mode: &str) -> String {
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
    stdout
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
        let report = leaks_of(&jdk, "leak");
        let rows = candidates(&report);
        assert!(!rows.is_empty(), "{report}");
        assert!(
            rows[0].ends_with("otelprof.tests.LeakGrowth.leak [byte[]]"),
            "{report}"
        );
        for row in &rows {
            assert!(
                row.contains("LeakGrowth.leak "),
                "not a leak: {row}\n{report}"
            );
        }
        let report = leaks_of(&jdk, "none");
        assert!(report.contains("no leak candidates among"), "{report}");
    }
}
