//! `--lines`: functions broken down to their source lines. A method with two loops, one three
//! times the other's work on lines of its own (tests/java HotLine); the agent's pprof files
//! read by `otelprof top --lines` and, independently, by `go tool pprof -lines`.

use otelprof_tests::Tied as _;
use std::process::Command;

use otelprof_tests::{cli_path, jdk17, pprof_top, repo_root, JvmRun};

/// The line numbers of the loops marked `// HOT` and `// COLD` in the workload's source.
fn marked_lines() -> (usize, usize) {
    let source =
        std::fs::read_to_string(repo_root().join("tests/java/otelprof/tests/HotLine.java"))
            .unwrap();
    let line = |mark: &str| {
        source
            .lines()
            .position(|l| l.ends_with(mark))
            .map(|i| i + 1)
            .unwrap()
    };
    (line("// HOT"), line("// COLD"))
}

#[test]
fn the_hottest_line_of_a_method_is_one_flag_away() {
    let (hot, cold) = marked_lines();
    let run = JvmRun::new(jdk17(), "otelprof.tests.HotLine")
        .agent("cpu=10ms")
        .args(&["4"])
        .run();
    run.assert_clean_exit();
    let files = run.profiles_of("cpu");
    let out = Command::new(cli_path())
        .args(["top", "--lines", "--limit", "0"])
        .args(&files)
        .output_tied()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let self_share = |line: usize| -> f64 {
        let name = format!("otelprof.tests.HotLine.work (HotLine.java:{line})");
        let row = text
            .lines()
            .find(|l| l.ends_with(&name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"));
        row.split_whitespace()
            .nth(1)
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap()
    };
    let (hot_share, cold_share) = (self_share(hot), self_share(cold));
    // The method's two loops: 3 : 1, so 75 % of their CPU is on the hot line.
    let ratio = hot_share / (hot_share + cold_share);
    println!("hot line {hot}: {hot_share}%, cold line {cold}: {cold_share}%, ratio {ratio:.3}");
    assert!((0.68..=0.82).contains(&ratio), "{ratio}\n{text}");
    // The hottest row of all is the hot line.
    let first = text.lines().nth(2).unwrap();
    assert!(first.ends_with(&format!("(HotLine.java:{hot})")), "{first}");
    // go tool pprof, at its granularity of the same name, puts the same share on that line.
    let top = pprof_top(&files, "cpu", &["-lines"]);
    let pprof_hot = top
        .rows
        .iter()
        .find(|(name, _)| {
            name.contains("HotLine.work") && name.contains(&format!("HotLine.java:{hot}"))
        })
        .map(|(_, row)| 100.0 * row.flat / top.total)
        .unwrap_or_else(|| panic!("pprof has no row for line {hot}: {:?}", top.rows.keys()));
    assert!(
        (pprof_hot - hot_share).abs() < 0.5,
        "pprof {pprof_hot}% vs otelprof {hot_share}%"
    );
}
