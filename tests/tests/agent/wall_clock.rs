//! Wall-clock accuracy against a workload whose truth the workload measures itself
//! (tests/java-otel WallStates): worker threads cycle through computing, sleeping, blocking on
//! a monitor and waiting in `Object.wait`, each phase in a method of its own; half of them do
//! it inside spans (otelprof direct API). "Idle" threads compute 20% of the time and sleep the
//! rest, long enough for the agent to thin their samples. Read back with `go tool pprof
//! -traces` on the `wall-*` files, on every supported JDK.

use std::collections::BTreeMap;

use otelprof_tests::{
    all_jdks, otel_classes, otel_sdk_jar, otelprof, pprof_traces, Jdk, JvmRun, RunOutput,
};

const CLASS: &str = "otelprof.tests.otel.WallStates";
/// Each phase method with the Java thread state it is in.
const PHASES: [(&str, &str); 4] = [
    ("computePhase", "RUNNABLE"),
    ("sleepPhase", "TIMED_WAITING"),
    ("blockedPhase", "BLOCKED"),
    ("waitPhase", "WAITING"),
];
/// Percentage points.
const TOLERANCE: f64 = 3.0;
const SECONDS: &str = "10";

/// `thread -> phase (or "total") -> ms`, from the workload's `phase` lines.
fn truth(stdout: &str) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut t: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for line in stdout.lines().filter(|l| l.starts_with("phase ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let ms = f[3].parse::<f64>().unwrap() / 1e6;
        t.entry(f[1].to_owned())
            .or_default()
            .insert(f[2].to_owned(), ms);
    }
    t
}

fn sum_truth(truth: &BTreeMap<String, BTreeMap<String, f64>>, prefix: &str, key: &str) -> f64 {
    truth
        .iter()
        .filter(|(t, _)| is_in(t, prefix))
        .map(|(_, p)| p.get(key).copied().unwrap_or(0.0))
        .sum()
}

/// Whether `thread` is `<prefix><number>` (not one of the workers' helper threads).
fn is_in(thread: &str, prefix: &str) -> bool {
    thread
        .strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn check(jdk: Jdk, clock: &str) {
    let run = JvmRun::new(jdk.clone(), CLASS)
        .javaagent()
        .agent(&format!("cpu=10ms,clock={clock},wall=10ms"))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .args(&["4", "4", SECONDS])
        .run();
    run.assert_clean_exit();
    let truth = truth(&run.stdout);
    assert_eq!(truth.len(), 8, "{}", run.stdout);
    let counters = run.agent_counters();
    println!("{} clock={clock}: agent {counters:?}", jdk.name);
    // Both sampling paths ran: signals to running threads, stack traces of waiting ones; and
    // the long-idle threads were thinned.
    assert!(counters["wall_signals"] > 500, "{counters:?}");
    assert!(counters["wall_stack_traces"] > 500, "{counters:?}");
    assert!(counters["wall_thinned"] > 100, "{counters:?}");
    let samples = pprof_traces(&run.profiles_of("wall"), "wall");

    for group in ["spanned-", "plain-"] {
        let mine: Vec<_> = samples
            .iter()
            .filter(|s| s.label("thread_name").is_some_and(|t| is_in(t, group)))
            .collect();
        let total: f64 = mine.iter().map(|s| s.value).sum();
        let true_total = sum_truth(&truth, group, "total");
        let true_phases: f64 = PHASES
            .iter()
            .map(|(p, _)| sum_truth(&truth, group, p))
            .sum();
        let phases: f64 = PHASES
            .iter()
            .map(|(p, _)| {
                mine.iter()
                    .filter(|s| s.has_frame(p))
                    .map(|s| s.value)
                    .sum::<f64>()
            })
            .sum();
        println!(
            "{} {group}: {total:.0} ms sampled of {true_total:.0} ms lived ({:.3}); phases {phases:.0} of {true_phases:.0} ms",
            jdk.name,
            total / true_total
        );
        // Weights add up to the threads' wall time (each thread loses at most the time
        // after its last visit).
        assert!(
            (0.95..=1.02).contains(&(total / true_total)),
            "{group}: {total:.0} ms sampled, {true_total:.0} ms lived"
        );
        for (phase, state) in PHASES {
            let in_phase: Vec<_> = mine.iter().filter(|s| s.has_frame(phase)).collect();
            let value: f64 = in_phase.iter().map(|s| s.value).sum();
            let share = 100.0 * value / phases;
            let true_share = 100.0 * sum_truth(&truth, group, phase) / true_phases;
            let in_state: f64 = in_phase
                .iter()
                .filter(|s| s.label("thread_state") == Some(state))
                .map(|s| s.value)
                .sum();
            let with_span: f64 = in_phase
                .iter()
                .filter(|s| {
                    let thread = s.label("thread_name").unwrap_or("");
                    s.label("span_name") == Some(&format!("wall /{thread}"))
                        && s.label("trace_id").is_some_and(|t| t.len() == 32)
                })
                .map(|s| s.value)
                .sum();
            println!(
                "{} {group}{phase}: {share:.2}% (truth {true_share:.2}%), {:.1}% {state}, {:.1}% with its span",
                jdk.name,
                100.0 * in_state / value,
                100.0 * with_span / value
            );
            assert!(
                (share - true_share).abs() <= TOLERANCE,
                "{} {group}{phase}: {share:.2}% vs truth {true_share:.2}% (±{TOLERANCE} pp)",
                jdk.name
            );
            // Leaving Object.wait re-enters the monitor (BLOCKED for a moment).
            let min_state = if phase == "waitPhase" { 0.85 } else { 0.95 };
            assert!(
                in_state >= min_state * value,
                "{} {group}{phase}: only {in_state:.0} of {value:.0} ms in state {state}",
                jdk.name
            );
            if group == "spanned-" {
                assert!(
                    with_span >= 0.98 * value,
                    "{} {phase}: {with_span:.0} of {value:.0} ms carry the thread's span",
                    jdk.name
                );
            } else {
                assert_eq!(with_span, 0.0, "plain threads have no span");
            }
        }
    }

    if clock == "perf" {
        top_has_a_column_per_state(&run, &jdk);
    }

    // Long-idle threads: thinned, yet their time and its split come out right.
    let idle: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.label("thread_name")
                .is_some_and(|t| t.starts_with("idle-"))
        })
        .collect();
    let total: f64 = idle.iter().map(|s| s.value).sum();
    let compute: f64 = idle
        .iter()
        .filter(|s| s.has_frame("idleCompute"))
        .map(|s| s.value)
        .sum();
    let true_total = sum_truth(&truth, "idle-", "total");
    let share = 100.0 * compute / total;
    let true_share = 100.0 * sum_truth(&truth, "idle-", "idleCompute") / true_total;
    println!(
        "{} idle threads: {total:.0} ms sampled of {true_total:.0} ms; computing {share:.2}% (truth {true_share:.2}%)",
        jdk.name
    );
    assert!(
        (0.9..=1.1).contains(&(total / true_total)),
        "idle threads: {total:.0} ms sampled of {true_total:.0} ms"
    );
    assert!(
        (share - true_share).abs() <= TOLERANCE,
        "idle threads compute {share:.2}% vs truth {true_share:.2}%"
    );
}

#[test]
fn wall_shares_states_and_spans_match_truth_on_every_jdk() {
    // With either CPU engine beside it: the wall-clock signals share SIGPROF with both.
    for jdk in all_jdks() {
        for clock in ["perf", "cpu"] {
            check(jdk.clone(), clock);
        }
    }
}

/// A duration as `otelprof top` prints it (`350ms`, `1.20s`, `-` for none), in ns.
fn nanos(cell: &str) -> f64 {
    if cell == "-" || cell == "0" {
        return 0.0;
    }
    let split = cell.find(|c: char| c.is_ascii_alphabetic()).unwrap();
    let (number, unit) = cell.split_at(split);
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        "h" => 3600e9,
        other => panic!("unit {other} in {cell}"),
    };
    number.parse::<f64>().unwrap() * scale
}

/// `otelprof top` of the wall profiles: a column per state, each phase's time in its state.
fn top_has_a_column_per_state(run: &RunOutput, jdk: &Jdk) {
    let files: Vec<String> = run
        .profiles_of("wall")
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut args = vec!["top", "--type", "wall", "--limit", "0"];
    args.extend(files.iter().map(String::as_str));
    let (code, out, err) = otelprof(&args);
    assert_eq!(code, 0, "{err}");
    let header: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&header[..4], ["self", "self%", "total", "total%"], "{out}");
    assert_eq!(header.last(), Some(&"function"), "{out}");
    let states = &header[4..header.len() - 1];
    for state in ["RUNNABLE", "BLOCKED", "WAITING", "TIMED_WAITING"] {
        assert!(states.contains(&state), "{state} missing from {header:?}");
    }
    for (phase, state) in PHASES {
        let line = out
            .lines()
            .find(|l| l.contains(&format!(".{phase} ")))
            .unwrap_or_else(|| panic!("{phase} not in\n{out}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        let total = nanos(cells[2]);
        let by_state: Vec<f64> = cells[4..4 + states.len()]
            .iter()
            .map(|c| nanos(c))
            .collect();
        let column = states.iter().position(|s| *s == state).unwrap();
        let sum: f64 = by_state.iter().sum();
        println!(
            "{} top: {phase} total {total:.0} ns, by state {by_state:?}",
            jdk.name
        );
        // The columns split the total (each rounded to three digits as printed).
        assert!((sum - total).abs() <= 0.02 * total, "{line}");
        let min_state = if phase == "waitPhase" { 0.85 } else { 0.95 };
        assert!(
            by_state[column] >= min_state * total,
            "{phase} in {state}: {line}"
        );
    }
    // The state picker's selection: only BLOCKED time, which is the blocked phase's column.
    let mut blocked = vec!["top", "--type", "wall", "--where", "thread.state=BLOCKED"];
    blocked.extend(files.iter().map(String::as_str));
    let (code, only, err) = otelprof(&blocked);
    assert_eq!(code, 0, "{err}");
    let line = only.lines().find(|l| l.contains(".blockedPhase ")).unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    let blocked_total = nanos(cells[2]);
    let all_line = out.lines().find(|l| l.contains(".blockedPhase ")).unwrap();
    let all_cells: Vec<&str> = all_line.split_whitespace().collect();
    let column = 4 + states.iter().position(|s| *s == "BLOCKED").unwrap();
    let in_column = nanos(all_cells[column]);
    assert!(
        (blocked_total - in_column).abs() <= 0.02 * in_column,
        "--where thread.state=BLOCKED: {line}; BLOCKED column: {all_line}"
    );
}
