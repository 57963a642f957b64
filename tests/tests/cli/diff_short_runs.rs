//! `otelprof diff` on runs too short for a side to measure its own noise: sides of three
//! profiles, or of one, without sample timestamps (the agent's defaults but for the period).
//! A side's time slices then cannot say how much its shares vary beyond their counts, and the
//! diff combines what they say with its stated assumption (an information rate per
//! CPU-second); these tests hold it to finding a real regression of about 20 pp and to
//! starring nothing when both sides run one build.
//!
//! The workload is tests/java/otelprof/tests/DiffService.java: its `inclusive` build moves
//! renderHtml's share of the CPU from 20 % to 42.9 % (see its class comment). Sides are given as
//! two directories of pprof files (base, then head), or as two time ranges.

use crate::diff_support;

use std::path::PathBuf;

use diff_support::{function_rows, printed};
use otelprof_tests::{jdk17, otelprof, JvmRun, RunOutput};

const MAIN: &str = "otelprof.tests.DiffService";
const RENDER_HTML: &str = "otelprof.tests.DiffService.renderHtml";
/// `--fail-above` of the gates below: a regression of about 20 pp must fail it.
const GATE: &str = "5";
/// A/A pairs of separate one-profile runs.
const AA_PAIRS: usize = 20;
const AA_SECONDS: u32 = 4;
const AA_OPTIONS: &str = "period=60s,cpu=2ms";

/// One run of a DiffService build, without sample timestamps, at period `period`.
fn run(build: &str, threads: u32, seconds: u32, period: &str) -> JvmRun {
    sampled(build, threads, seconds, &format!("period={period}"))
}

/// One run of a DiffService build with agent options `options`.
fn sampled(build: &str, threads: u32, seconds: u32, options: &str) -> JvmRun {
    JvmRun::new(jdk17(), MAIN)
        .args(&[build, &threads.to_string(), &seconds.to_string()])
        .agent(options)
        .flags(&[
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,otelprof/tests/DiffService.*",
        ])
}

/// Runs `base` and `head` at the same time.
fn both(base: JvmRun, head: JvmRun) -> (RunOutput, RunOutput) {
    let b = std::thread::spawn(move || base.run());
    let h = head.run();
    let b = b.join().unwrap();
    for out in [&b, &h] {
        out.assert_clean_exit();
    }
    (b, h)
}

fn dir(out: &RunOutput) -> &str {
    out.out_dir.to_str().unwrap()
}

/// `otelprof diff ARGS`, printed.
fn diff(args: &[&str]) -> (i32, String, String) {
    let (code, out, err) = otelprof(args);
    println!("$ otelprof {}\n{out}{err}", args.join(" "));
    (code, out, err)
}

/// The noise line under the tables.
fn noise(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("(noise:"))
        .unwrap_or_else(|| panic!("no noise line:\n{out}"))
}

/// Every size in pp the report prints as a detectable change.
fn detectable_sizes(out: &str, err: &str) -> Vec<f64> {
    let text = format!("{out}\n{err}");
    let mut sizes = Vec::new();
    for part in text
        .split("caught 4 times in 5: ")
        .skip(1)
        .chain(text.split("that takes ").skip(1))
    {
        for piece in part.split(", ") {
            if let Some(n) = piece
                .split(" pp")
                .next()
                .and_then(|n| n.trim().parse().ok())
            {
                sizes.push(n);
            }
        }
    }
    sizes
}

#[test]
fn a_regression_between_two_runs_of_seven_seconds_is_flagged() {
    // Three profiles a side (3 s, 3 s and the last second), compared as two directories. One
    // run after the other, so that each has both cores: about 1,400 samples a side.
    let base = run("base", 2, 7, "3s").run();
    base.assert_clean_exit();
    let head = run("inclusive", 2, 7, "3s").run();
    head.assert_clean_exit();
    assert_eq!(base.profiles_of("cpu").len(), 3, "{:?}", base.profiles());
    assert_eq!(head.profiles_of("cpu").len(), 3, "{:?}", head.profiles());
    let (code, out, err) = diff(&[
        "diff",
        "--fail-above",
        GATE,
        "--limit",
        "0",
        dir(&base),
        dir(&head),
    ]);
    assert_eq!(
        code, 3,
        "a regression of ~20 pp fails a 5 pp gate:\n{out}\n{err}"
    );
    // renderHtml's total grew by about 20 pp, and escape's (which it calls twelve times
    // instead of four) by about as much: either may rank first; both are starred.
    let grew = function_rows(&out, "Grew");
    let render = grew.iter().take(2).find(|r| r.name == RENDER_HTML);
    assert!(
        render.is_some_and(|r| r.total_starred == Some(true)),
        "{out}"
    );
    assert!(
        err.contains(&format!("otelprof: regression: {RENDER_HTML} grew from")),
        "{err}"
    );
    let line = noise(&out);
    assert!(line.contains("(3 and 3 slices per side)"), "{line}");
    assert!(
        line.contains("assumed: a CPU-second carries at most 40"),
        "{line}"
    );
    for size in detectable_sizes(&out, &err) {
        assert!(
            size <= 100.0,
            "a detectable change of {size} pp:\n{out}\n{err}"
        );
    }
}

#[test]
fn a_regression_between_two_one_profile_runs_compared_by_time_range_is_flagged() {
    // One run after the other, each written as one profile (the default 60 s period), the
    // sides told apart by their time ranges only.
    let base = run("base", 2, 15, "60s").run();
    base.assert_clean_exit();
    let head = run("inclusive", 2, 15, "60s").run();
    head.assert_clean_exit();
    let range = |out: &RunOutput| {
        let secs = |ms: i64| format!("{:.3}", ms as f64 / 1000.0);
        (
            secs(printed(&out.stdout, "start")),
            secs(printed(&out.stdout, "end")),
        )
    };
    let ((bf, bt), (hf, ht)) = (range(&base), range(&head));
    let (code, out, err) = diff(&[
        "diff",
        "--base-from",
        &bf,
        "--base-to",
        &bt,
        "--head-from",
        &hf,
        "--head-to",
        &ht,
        "--fail-above",
        GATE,
        "--limit",
        "0",
        dir(&base),
        dir(&head),
    ]);
    for side in ["base:", "head:"] {
        let header = out
            .lines()
            .find(|l| l.starts_with(side))
            .unwrap_or_default();
        assert!(
            header.contains("; 1 profile,"),
            "one profile a side: {header}"
        );
    }
    assert_eq!(code, 3, "{out}\n{err}");
    let grew = function_rows(&out, "Grew");
    assert_eq!(grew[0].name, RENDER_HTML, "{out}");
    assert_eq!(grew[0].total_starred, Some(true), "{out}");
    let line = noise(&out);
    assert!(line.contains("(1 and 1 slices per side)"), "{line}");
    assert!(line.contains("the assumption alone"), "{line}");
    for size in detectable_sizes(&out, &err) {
        assert!(
            size <= 100.0,
            "a detectable change of {size} pp:\n{out}\n{err}"
        );
    }
}

#[test]
fn twenty_a_a_pairs_of_one_profile_runs_flag_nothing() {
    // Two processes of one build, started together, each written as one profile with its own
    // warm-up (whose JIT differs from process to process): nothing may be starred, and the
    // gate must pass. Sampled every 2 ms, so that a side of a few CPU-seconds has about 1,500
    // samples: the differences between two processes then stand out of the binomial noise
    // (reading them with the binomial alone starred noise in 3 of 20 pairs, and the JIT's
    // warm-up in the dozen java.lang.invoke frames of each run), and the assumption must
    // cover them.
    let mut flagged: Vec<(usize, String)> = Vec::new();
    let mut sizes: Vec<f64> = Vec::new();
    for i in 0..AA_PAIRS {
        let (a, b) = both(
            sampled("base", 1, AA_SECONDS, AA_OPTIONS),
            sampled("base", 1, AA_SECONDS, AA_OPTIONS),
        );
        let (dir_a, dir_b): (PathBuf, PathBuf) = (a.out_dir.clone(), b.out_dir.clone());
        let args = [
            "diff",
            "--fail-above",
            GATE,
            "--limit",
            "0",
            dir_a.to_str().unwrap(),
            dir_b.to_str().unwrap(),
        ];
        let (code, out, err) = otelprof(&args);
        assert!(code == 0 || code == 3, "{out}\n{err}");
        let starred: Vec<String> = function_rows(&out, "Grew")
            .into_iter()
            .chain(function_rows(&out, "Shrank"))
            .filter(|row| row.starred())
            .map(|row| {
                format!(
                    "{} {:+.2}/{:+.2} pp",
                    row.name, row.delta_self, row.delta_total
                )
            })
            .collect();
        let half = detectable_sizes(&out, "").first().copied();
        sizes.extend(detectable_sizes(&out, &err));
        println!("A/A pair {i}: exit {code}; detectable at 50%: {half:?} pp; starred: {starred:?}");
        if code != 0 || !starred.is_empty() {
            flagged.push((i, format!("exit {code}: {starred:?}")));
        }
    }
    assert!(
        flagged.is_empty(),
        "{} of {AA_PAIRS} A/A pairs flagged noise: {flagged:?}",
        flagged.len()
    );
    assert!(!sizes.is_empty(), "no detectable change printed");
    for size in sizes {
        assert!(size <= 100.0, "a detectable change of {size} pp");
    }
}
