//! `otelprof findings` on the profiles of real JVMs: the workload
//! tests/java/otelprof/tests/Findings.java plants one pattern per run (exceptions as control
//! flow, stack traces built by a logger, regexes compiled per call, a contended synchronized
//! map, reflection per request) beside the same arithmetic, and plants none in its `compute`
//! run; GcChurn is the GC-bound run. Each planted rule must fire, naming the workload's
//! method, and the pure computation must give no finding at all. Sleeping in requests is
//! read from the wall profile of tests/java-otel WallStates.

use otelprof_tests::{jdk17, otel_classes, otel_sdk_jar, otelprof, JvmRun, RunOutput};

const MAIN: &str = "otelprof.tests.Findings";
const AGENT: &str = "period=1s,cpu=2ms,alloc=512k,lock=100us";
const SECONDS: &str = "4";

/// A run of the workload planting `pattern` (several joined by `+`), checked to exit cleanly.
pub(super) fn run(pattern: &str) -> RunOutput {
    // Two workers take turns on a lock with the other mostly spinning, not blocked, on a busy
    // machine; four keep some always blocked.
    let threads = if pattern == "locks" { "4" } else { "2" };
    let run = JvmRun::new(jdk17(), MAIN)
        .args(&[pattern, threads, SECONDS])
        .agent(AGENT)
        .run();
    run.assert_clean_exit();
    run
}

/// `otelprof findings --format json` on a run's profiles: the findings array.
pub(super) fn findings(run: &RunOutput) -> Vec<serde_json::Value> {
    let dir = run.out_dir.to_str().unwrap();
    let (code, out, err) = otelprof(&["findings", "--format", "json", dir]);
    assert_eq!(code, 0, "{err}");
    let (_, text, _) = otelprof(&["findings", dir]);
    println!("$ otelprof findings {dir}\n{text}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["findings"].as_array().unwrap().clone()
}

/// The finding of `rule`, which must be there, naming `method`.
fn expect(found: &[serde_json::Value], rule: &str, method: &str) -> serde_json::Value {
    let f = found
        .iter()
        .find(|f| f["rule"] == rule)
        .unwrap_or_else(|| panic!("no {rule} finding: {found:#?}"))
        .clone();
    assert_eq!(f["method"], method, "{f:#}");
    // The line of the method where the pattern costs most (lock findings name the file).
    let file = f["file"].as_str().unwrap_or_default();
    assert!(file.ends_with(".java") || file.contains(".java:"), "{f:#}");
    if rule != "contended-lock" {
        assert!(file.contains(".java:"), "{f:#}");
    }
    assert!(!f["stacks"].as_array().unwrap().is_empty(), "{f:#}");
    assert!(f["why"].as_str().unwrap().contains('≥'), "{f:#}");
    println!(
        "{rule}: {:.1} % of {} ({}), method {method} ({file}); why: {}",
        f["share"].as_f64().unwrap() * 100.0,
        f["of"].as_str().unwrap(),
        f["severity"].as_str().unwrap(),
        f["why"].as_str().unwrap()
    );
    f
}

#[test]
fn planted_patterns_are_found_and_a_pure_computation_is_not() {
    let clean = run("compute");
    // Unix seconds after the clean run: the baseline of the gate below is what came before.
    let after_clean = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let dir = clean.out_dir.to_str().unwrap();
    assert!(findings(&clean).is_empty());
    let (code, out, _) = otelprof(&["findings", "--fail-on", "info", dir]);
    assert_eq!(code, 0);
    assert!(out.starts_with("No findings (cpu: "), "{out}");

    let planted = [
        (
            "exceptions",
            "exceptions-control-flow",
            "otelprof.tests.Findings$OrderService.parse",
        ),
        (
            "stacktraces",
            "stack-traces-as-data",
            "otelprof.tests.Findings$AuditLog.record",
        ),
        (
            "regex",
            "regex-compiled-per-call",
            "otelprof.tests.Findings$Validator.check",
        ),
        (
            "locks",
            "contended-lock",
            "otelprof.tests.Findings$SessionCache.touch",
        ),
        (
            "reflection",
            "reflection-hot-path",
            "otelprof.tests.Findings$Dispatcher.call",
        ),
    ];
    for (pattern, rule, method) in planted {
        let r = run(pattern);
        let found = findings(&r);
        let f = expect(&found, rule, method);
        // One pattern planted, one rule fires: the others stay silent on the same arithmetic.
        assert!(found.iter().all(|f| f["rule"] == rule), "{found:#?}");
        if rule == "contended-lock" {
            assert!(
                f["title"].as_str().unwrap().starts_with(
                    "Contended synchronized collection java.util.Collections$SynchronizedMap"
                ),
                "{f:#}"
            );
        }
        if rule == "exceptions-control-flow" {
            // The CI gate: a warning or worse stops it with exit code 3.
            let dir = r.out_dir.to_str().unwrap();
            let severity = f["severity"].as_str().unwrap();
            let (code, _, err) = otelprof(&["findings", "--fail-on", severity, dir]);
            assert_eq!(code, 3, "{err}");
            assert!(err.contains("OrderService.parse"), "{err}");
            // Against a baseline: new since the clean run (the baseline: what came before), so
            // it stops the gate; against itself it is old, and the gate passes.
            let clean_dir = clean.out_dir.to_str().unwrap();
            let gate = |baseline: &str| {
                otelprof(&[
                    "findings",
                    "--from",
                    &after_clean,
                    "--new-against",
                    baseline,
                    "--fail-on",
                    "info",
                    dir,
                    clean_dir,
                ])
            };
            let (code, out, err) = gate(&format!("to={after_clean}"));
            assert_eq!(code, 3, "{out}{err}");
            assert!(
                out.contains("] new: Exceptions used for control flow"),
                "{out}"
            );
            assert!(err.contains(": new: Exceptions used for control flow in otelprof.tests.Findings$OrderService.parse"), "{err}");
            let (code, out, err) = gate(&format!("from={after_clean}"));
            assert_eq!(code, 0, "{out}{err}");
            assert!(out.contains("(also in the baseline)"), "{out}");
        }
    }

    let gc = JvmRun::new(jdk17(), "otelprof.tests.GcChurn")
        .args(&["2", "1000000", "120"])
        .agent(AGENT)
        .flags(&["-Xmx300m"])
        .run();
    gc.assert_clean_exit();
    let found = findings(&gc);
    let f = found
        .iter()
        .find(|f| f["rule"] == "gc-pressure")
        .unwrap_or_else(|| panic!("no gc-pressure finding: {found:#?}"));
    assert!(f["why"].as_str().unwrap().contains("MB/s"), "{f:#}");
    assert!(
        found.iter().all(|f| f["rule"] == "gc-pressure"),
        "{found:#?}"
    );
    println!("gc-pressure: why: {}", f["why"].as_str().unwrap());
}

/// Sleeping inside requests, from a wall profile: tests/java-otel WallStates's spanned workers
/// sleep 29 ms of each ~96 ms cycle (`sleepPhase`) inside a span, beside computing, blocking on
/// a monitor and `Object.wait`. The rule must name `sleepPhase`; with it excluded from the
/// selection, the other waits (blocked, waiting, and the sleeps of threads without a span)
/// must not fire it.
#[test]
fn sleeping_in_requests_is_found_in_wall_profiles() {
    let run = JvmRun::new(jdk17(), "otelprof.tests.otel.WallStates")
        .javaagent()
        .agent("period=1s,cpu=10ms,wall=10ms")
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .args(&["2", "0", SECONDS])
        .run();
    run.assert_clean_exit();
    let found = findings(&run);
    let f = expect(
        &found,
        "sleep-in-request",
        "otelprof.tests.otel.WallStates$Worker.sleepPhase",
    );
    let dir = run.out_dir.to_str().unwrap();
    // The traces it hurts most: those `otelprof traces` ranks first by the method's wall time.
    let traces: Vec<&str> = f["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trace_id"].as_str().unwrap())
        .collect();
    assert!(!traces.is_empty(), "{f:#}");
    let (code, out, err) = otelprof(&[
        "traces",
        "--type",
        "wall",
        "--include",
        "otelprof.tests.otel.WallStates$Worker.sleepPhase",
        "--limit",
        "3",
        dir,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(traces[0]), "{traces:?}\n{out}");
    let args = [
        "findings",
        "--format",
        "json",
        "--exclude",
        "*.sleepPhase",
        dir,
    ];
    let (code, out, err) = otelprof(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rest = v["findings"].as_array().unwrap();
    println!("without sleepPhase: {rest:#?}");
    assert!(
        rest.iter().all(|f| f["rule"] != "sleep-in-request"),
        "{rest:#?}"
    );
}

/// Starved pools, from wall profiles of tests/java-otel PoolStarvation: four request threads
/// give 20 ms tasks to a pool of one worker and wait on their futures (the tasks queue), or
/// take turns on a pool of one connection; fanned out to four workers, the requests wait only
/// as long as their tasks run, and no pool is starved.
#[test]
fn starved_pools_are_found_and_a_pool_that_keeps_up_is_not() {
    let pool = |mode: &str| {
        let run = JvmRun::new(jdk17(), "otelprof.tests.otel.PoolStarvation")
            .javaagent()
            .agent("period=1s,cpu=10ms,wall=10ms")
            .classpath(&[otel_classes(), otel_sdk_jar()])
            .args(&[mode, "4", SECONDS])
            .run();
        run.assert_clean_exit();
        run
    };
    let found = findings(&pool("executor"));
    let f = expect(
        &found,
        "starved-pool",
        "otelprof.tests.otel.PoolStarvation$OrderService.handle",
    );
    assert!(
        f["title"]
            .as_str()
            .unwrap()
            .starts_with("Requests queue for a starved thread pool"),
        "{f:#}"
    );
    assert!(f["why"].as_str().unwrap().contains("s queued"), "{f:#}");
    assert_eq!(f["endpoints"][0]["endpoint"], "GET /orders", "{f:#}");

    let found = findings(&pool("connections"));
    let f = expect(
        &found,
        "starved-pool",
        "otelprof.tests.otel.PoolStarvation$ConnectionPool.borrow",
    );
    assert!(
        f["title"]
            .as_str()
            .unwrap()
            .starts_with("Requests wait for a pooled resource"),
        "{f:#}"
    );

    let found = findings(&pool("fanout"));
    assert!(
        found.iter().all(|f| f["rule"] != "starved-pool"),
        "{found:#?}"
    );
}

/// The JIT compiler kept busy: tests/java JitChurn defines the same code as a new hidden
/// class again and again, so the compilers never go quiet; with one class (`steady`) they do
/// after the warm-up, and there is no finding. The rule needs 30 s of selection; the short
/// runs above (whose second compiler is still busy with large methods after 4 s) must not
/// fire it.
#[test]
fn a_jit_compiler_kept_busy_is_found_and_a_warm_up_is_not() {
    let jit = |mode: &str| {
        let run = JvmRun::new(jdk17(), "otelprof.tests.JitChurn")
            .args(&[mode, "32"])
            .agent("period=2s,cpu=10ms")
            .run();
        run.assert_clean_exit();
        run
    };
    let found = findings(&jit("churn"));
    let f = found
        .iter()
        .find(|f| f["rule"] == "jit-busy")
        .unwrap_or_else(|| panic!("no jit-busy finding: {found:#?}"));
    assert!(f["why"].as_str().unwrap().contains("later half"), "{f:#}");
    assert!(found.iter().all(|f| f["rule"] == "jit-busy"), "{found:#?}");
    println!("jit-busy: why: {}", f["why"].as_str().unwrap());
    let found = findings(&jit("steady"));
    assert!(found.is_empty(), "{found:#?}");
}

/// Busy-waiting in requests: tests/java-otel SpinWait's request threads wait about 10 ms for a
/// helper's answer by spinning on a flag with `Thread.yield()` (a system call: its frames are
/// on the stack). (With `Thread.onSpinWait()` instead, C2 compiles the call to one PAUSE
/// instruction with no frame of its own, and the loop is the waiting method's own time, which
/// no rule tells from computing: docs/findings.md says so.)
#[test]
fn busy_waiting_in_requests_is_found() {
    let run = JvmRun::new(jdk17(), "otelprof.tests.otel.SpinWait")
        .javaagent()
        .agent("period=1s,cpu=10ms,wall=10ms")
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .args(&["yield", "2", SECONDS])
        .run();
    run.assert_clean_exit();
    let found = findings(&run);
    expect(
        &found,
        "sleep-in-request",
        "otelprof.tests.otel.SpinWait$QuoteClient.awaitAnswer",
    );
}
