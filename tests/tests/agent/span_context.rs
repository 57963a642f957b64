//! Span context against the real OpenTelemetry Java SDK (1.30.1): a real JVM with otelprof.jar
//! as `-javaagent`, CPU sampling on, and workloads where each span does its work in a method
//! of its own (tests/java-otel SpanScenarios). Read back with `go tool pprof -traces`.
//!
//! - precision: of the samples in some span's work method that carry a span id, the share
//!   whose span is the one that owns that method;
//! - recall: of the samples in a span's work method, the share that carry that span.

use otelprof_tests::Tied as _;
use std::collections::{BTreeMap, HashMap, HashSet};

use otelprof_tests::{
    jdk17, jdk25, otel_classes, otel_sdk_jar, pprof_traces, Jdk, JvmRun, RunOutput, TraceSample,
};

const CLASS: &str = "otelprof.tests.otel.SpanScenarios";
const PRECISION: f64 = 0.995;
const RECALL: f64 = 0.98;

/// What the workload printed about one span.
#[derive(Clone, Debug)]
struct Expected {
    trace_id: String,
    methods: HashSet<String>,
    local_root: String,
    endpoint: String,
    sampled: bool,
}

fn expectations(stdout: &str) -> HashMap<String, Expected> {
    let mut spans: HashMap<String, Expected> = HashMap::new();
    for line in stdout.lines().filter(|l| l.starts_with("span ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let e = spans.entry(f[1].to_owned()).or_insert_with(|| Expected {
            trace_id: f[2].to_owned(),
            methods: HashSet::new(),
            local_root: f[4].to_owned(),
            endpoint: f[5].replace('_', " "),
            sampled: f[6] == "true",
        });
        e.methods.insert(f[3].to_owned());
    }
    spans
}

/// Work methods per scenario.
const SCENARIOS: &[(&str, &[&str])] = &[
    ("sequential", &["seqOne", "seqTwo", "seqThree"]),
    (
        "nested",
        &["nestedParentBefore", "nestedChild", "nestedParentAfter"],
    ),
    ("executor", &["poolChildWork", "poolWrappedWork"]),
    ("endpoints", &["endpointAWork", "endpointBWork"]),
    ("virtual", &["virtualWorkOne", "virtualWorkTwo"]),
];

fn run(jdk: Jdk, scenarios: &[&str]) -> (RunOutput, Vec<TraceSample>) {
    let out = JvmRun::new(jdk.clone(), CLASS)
        .javaagent()
        .agent("cpu=2ms")
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .flags(&["-Dseconds=4"])
        .args(scenarios)
        .run();
    out.assert_clean_exit();
    let samples = pprof_traces(&out.profiles(), "cpu");
    (out, samples)
}

#[derive(Default, Debug)]
struct Score {
    in_methods: f64,
    carrying_own_span: f64,
    with_span: f64,
    with_right_span: f64,
    wrong_root: f64,
    wrong_endpoint: f64,
}

fn score(samples: &[TraceSample], spans: &HashMap<String, Expected>, methods: &[&str]) -> Score {
    let mut s = Score::default();
    for sample in samples {
        let Some(method) = methods.iter().find(|m| sample.has_frame(m)) else {
            continue;
        };
        s.in_methods += sample.value;
        let Some(span_id) = sample.label("span_id") else {
            continue;
        };
        s.with_span += sample.value;
        let Some(e) = spans.get(span_id) else {
            continue;
        };
        if e.methods.contains(*method) {
            s.with_right_span += sample.value;
            s.carrying_own_span += sample.value;
        }
        if sample.label("local_root_span_id") != Some(e.local_root.as_str()) {
            s.wrong_root += sample.value;
        }
        if sample.label("span_name") != Some(e.endpoint.as_str())
            || sample.label("trace_id") != Some(&e.trace_id)
        {
            s.wrong_endpoint += sample.value;
        }
    }
    s
}

fn check_scenarios(jdk: Jdk, scenarios: &[&str]) {
    let (out, samples) = run(jdk.clone(), scenarios);
    let spans = expectations(&out.stdout);
    let counters = out.agent_counters();
    println!(
        "{}: {} spans reported; agent {:?}",
        jdk.name,
        spans.len(),
        counters
    );
    assert_eq!(
        counters["context_torn"] * 100 / counters["samples_all_types"].max(1),
        0,
        "more than 1% of samples saw a record mid-write: {counters:?}"
    );
    for (scenario, methods) in SCENARIOS.iter().filter(|(s, _)| scenarios.contains(s)) {
        let s = score(&samples, &spans, methods);
        let precision = s.with_right_span / s.with_span;
        let recall = s.carrying_own_span / s.in_methods;
        println!(
            "{} {scenario}: {:.0} ms in work methods, precision {:.4}, recall {:.4}, wrong local root {:.0} ms, wrong endpoint/trace {:.0} ms",
            jdk.name, s.in_methods, precision, recall, s.wrong_root, s.wrong_endpoint
        );
        assert!(
            s.in_methods >= 1_000.0,
            "{scenario}: too few samples to judge ({:.0} ms)",
            s.in_methods
        );
        assert!(
            precision >= PRECISION,
            "{} {scenario}: precision {precision:.4}",
            jdk.name
        );
        assert!(
            recall >= RECALL,
            "{} {scenario}: recall {recall:.4}",
            jdk.name
        );
        assert!(
            s.wrong_root <= 0.005 * s.in_methods,
            "{scenario}: wrong local roots {s:?}"
        );
        assert!(
            s.wrong_endpoint <= 0.005 * s.in_methods,
            "{scenario}: wrong endpoints {s:?}"
        );
    }
}

#[test]
fn spans_on_platform_threads_jdk17() {
    check_scenarios(jdk17(), &["sequential", "nested", "executor", "endpoints"]);
}

#[test]
fn spans_on_platform_and_virtual_threads_jdk25() {
    check_scenarios(
        jdk25(),
        &["sequential", "nested", "executor", "endpoints", "virtual"],
    );
}

/// The child's samples name the child; once it closes, the parent is back: checked above by
/// the nested scenario's methods. Here: the local root of the child is the parent, and the
/// late rename reached samples taken before it.
#[test]
fn nested_child_has_parent_as_local_root_and_final_endpoint() {
    let (out, samples) = run(jdk17(), &["nested"]);
    let spans = expectations(&out.stdout);
    let child_samples: Vec<&TraceSample> = samples
        .iter()
        .filter(|s| s.has_frame("nestedChild"))
        .collect();
    assert!(child_samples.len() > 10);
    for s in child_samples {
        let span = s.label("span_id").unwrap();
        let e = &spans[span];
        assert!(e.methods.contains("nestedChild"), "{s:?}");
        assert_ne!(e.local_root, span, "the child is not its own local root");
        assert_eq!(s.label("local_root_span_id"), Some(e.local_root.as_str()));
        assert_eq!(
            s.label("span_name"),
            Some("nested /final"),
            "the rename must reach earlier samples"
        );
    }
}

#[test]
fn unsampled_trace_keeps_endpoint_but_gets_no_link() {
    let (out, samples) = run(jdk17(), &["unsampled"]);
    assert!(expectations(&out.stdout).values().all(|e| !e.sampled));
    let mut total = 0.0;
    let mut with_endpoint = 0.0;
    for s in samples.iter().filter(|s| s.has_frame("unsampledWork")) {
        total += s.value;
        assert_eq!(
            s.label("trace_id"),
            None,
            "no link for an unsampled trace: {s:?}"
        );
        assert_eq!(s.label("span_id"), None);
        assert_eq!(s.label("local_root_span_id"), None);
        if s.label("span_name") == Some("unsampled-root") {
            with_endpoint += s.value;
        }
    }
    println!("unsampled: {total:.0} ms, {with_endpoint:.0} ms with the endpoint");
    assert!(total >= 1_000.0);
    assert!(
        with_endpoint >= RECALL * total,
        "{with_endpoint} of {total}"
    );
}

/// Per-endpoint CPU: the two interleaved endpoints split the shared pool's work evenly.
#[test]
fn endpoints_interleaved_on_a_shared_pool_split_by_name() {
    let (_, samples) = run(jdk25(), &["endpoints"]);
    let mut by_endpoint: BTreeMap<String, f64> = BTreeMap::new();
    let (mut total, mut wrong) = (0.0, 0.0);
    for s in samples
        .iter()
        .filter(|s| s.has_frame("endpointAWork") || s.has_frame("endpointBWork"))
    {
        let name = s.label("span_name").unwrap_or("(none)");
        let expected = if s.has_frame("endpointAWork") {
            "GET /a"
        } else {
            "GET /b"
        };
        total += s.value;
        if name != expected {
            wrong += s.value;
        }
        *by_endpoint.entry(name.to_owned()).or_default() += s.value;
    }
    println!("{by_endpoint:?}");
    assert!(
        wrong <= (1.0 - RECALL) * total,
        "{wrong:.0} of {total:.0} ms under the wrong endpoint"
    );
    let (a, b) = (by_endpoint["GET /a"], by_endpoint["GET /b"]);
    assert!((a / (a + b) - 0.5).abs() < 0.1, "{a} vs {b}");
}

/// A tracer that is not OpenTelemetry uses otelprof's direct API (otelprof.ThreadContext).
#[test]
fn direct_api_sets_and_clears_context() {
    let out = JvmRun::new(jdk17(), "otelprof.tests.otel.DirectApi")
        .javaagent()
        .agent("cpu=2ms")
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .flags(&["-Dseconds=5"])
        .run();
    out.assert_clean_exit();
    let samples = pprof_traces(&out.profiles(), "cpu");
    let spans = expectations(&out.stdout);
    let s = score(&samples, &spans, &["directWorkA", "directWorkB"]);
    let (precision, recall) = (
        s.with_right_span / s.with_span,
        s.carrying_own_span / s.in_methods,
    );
    println!(
        "direct API: {:.0} ms, precision {precision:.4}, recall {recall:.4}, {s:?}",
        s.in_methods
    );
    assert!(s.in_methods >= 1_000.0);
    assert!(precision >= PRECISION && recall >= RECALL);
    assert!(s.wrong_endpoint <= 0.005 * s.in_methods && s.wrong_root <= 0.005 * s.in_methods);
    // After clear(), work carries no span.
    let untraced: Vec<_> = samples
        .iter()
        .filter(|s| s.has_frame("untracedWork"))
        .collect();
    assert!(!untraced.is_empty());
    let leaked: f64 = untraced
        .iter()
        .filter(|s| s.label("span_id").is_some())
        .map(|s| s.value)
        .sum();
    let total: f64 = untraced.iter().map(|s| s.value).sum();
    assert!(
        leaked <= 0.005 * total,
        "{leaked} of {total} ms after clear() still carry a span"
    );
}

/// otelprof.jar on the class path, no -javaagent: the SDK autoconfigure SPI starts the agent
/// and installs the context integration; the span processor it registers reports the final
/// name of a root renamed after its scope closed.
#[test]
fn autoconfigure_spi_starts_agent_and_wraps_context() {
    let out = JvmRun::new(jdk25(), "otelprof.tests.otel.SpiCheck")
        .no_agent()
        .classpath(&[otel_classes(), otel_sdk_jar(), &otelprof_tests::jar_path()])
        .env("OTELPROF_OPTIONS", "cpu=2ms")
        .run();
    out.assert_clean_exit();
    assert!(
        out.stdout.contains("providers=1 customizers=1"),
        "{}",
        out.stdout
    );
    let samples = pprof_traces(&out.profiles(), "cpu");
    let spans = expectations(&out.stdout);
    let s = score(&samples, &spans, &["spiWork"]);
    println!("SPI: {s:?}; stderr: {}", out.stderr);
    assert!(s.in_methods >= 1_000.0);
    assert!(s.carrying_own_span / s.in_methods >= RECALL, "{s:?}");
    assert!(
        s.wrong_endpoint <= 0.005 * s.in_methods,
        "the end-of-span name must win: {s:?}"
    );
    assert!(
        !out.stderr.contains("before otelprof could wrap it"),
        "{}",
        out.stderr
    );
}

/// If the application touched context before otelprof could wrap it, OpenTelemetry silently
/// ignores the wrapper; otelprof must say so in one line (and the JVM runs on).
#[test]
fn a_wrapper_added_too_late_is_reported() {
    let out = JvmRun::new(jdk17(), "otelprof.tests.otel.SpiCheck")
        .no_agent()
        .classpath(&[otel_classes(), otel_sdk_jar(), &otelprof_tests::jar_path()])
        .env("OTELPROF_OPTIONS", "cpu=2ms")
        .flags(&["-Dotelprof.verifyDelayMs=500"])
        .args(&["early"])
        .run();
    out.assert_clean_exit();
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("before otelprof could wrap it"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
}

/// What an OTEP 4947 reader sees: `otel_thread_ctx_v1` is in the library's dynamic symbol
/// table as a TLS symbol, and on each thread (platform and virtual, after a remount) it points
/// at that thread's record, which holds the ids in the OTEP layout.
#[test]
fn otel_thread_ctx_v1_is_exported_and_points_at_the_record() {
    let syms = std::process::Command::new("readelf")
        .args(["--dyn-syms", "--wide"])
        .arg(otelprof_tests::agent_path())
        .output_tied()
        .unwrap();
    let syms = String::from_utf8_lossy(&syms.stdout);
    assert!(
        syms.lines().any(|l| l.contains(" TLS ")
            && l.contains(" GLOBAL ")
            && l.ends_with(" otel_thread_ctx_v1")),
        "otel_thread_ctx_v1 is not a global TLS symbol in .dynsym"
    );
    for jdk in [jdk17(), jdk25()] {
        let out = JvmRun::new(jdk.clone(), "otelprof.tests.otel.TlsCheck")
            .javaagent()
            .agent("cpu=10ms")
            .classpath(&[otel_classes(), otel_sdk_jar()])
            .flags(&["--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED"])
            .run();
        out.assert_clean_exit();
        println!("{}: {}", jdk.name, out.stdout.trim());
        let expected = "sequence=ok published=true trace=af7651916cd43dd/8448eb211c80319c span=b7ad6b7169203331 valid=1 flags=1 attrs=key0/len16/1122334455667788 cleared=0";
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("platform ") && l.ends_with(expected)),
            "{lines:?}"
        );
        if jdk.feature() >= 21 {
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with("virtual ") && l.ends_with(expected)),
                "{lines:?}"
            );
        }
    }
}

/// The jar carries no OpenTelemetry classes: the application's own are used.
#[test]
fn jar_bundles_no_opentelemetry_classes() {
    let listing = std::process::Command::new(jdk17().home.join("bin/jar"))
        .arg("--list")
        .arg("--file")
        .arg(otelprof_tests::jar_path())
        .output_tied()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("otelprof/otel/OtelprofContextStorage.class"));
    assert!(listing.contains("META-INF/services/io.opentelemetry.sdk.autoconfigure.spi.AutoConfigurationCustomizerProvider"));
    assert!(!listing.lines().any(|l| l.starts_with("io/")), "{listing}");
}

/// The process context (OTEP 4719) of a running JVM, read from outside (/proc/PID/maps and
/// /proc/PID/mem) and decoded with the official Python protobuf classes: the resource, and the
/// reference data that tells a reader how to decode `otel_thread_ctx_v1` records.
#[test]
fn process_context_is_published_for_external_readers() {
    let out_dir = otelprof_tests::scratch_dir("process-context");
    let mut child = std::process::Command::new(jdk17().java())
        .arg(format!(
            "-agentpath:{}=cpu=10ms,out={}",
            otelprof_tests::agent_path().display(),
            out_dir.display()
        ))
        .arg("-cp")
        .arg(otelprof_tests::classes())
        .args(["otelprof.workloads.CpuSplit", "1", "4"])
        .env("OTEL_SERVICE_NAME", "checkout")
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.version=1.5,deployment.environment.name=staging",
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn_tied()
        .unwrap();
    let pid = child.id().to_string();
    let mut attributes = None;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let read = std::process::Command::new(otelprof_tests::python())
            .arg(otelprof_tests::repo_root().join("tests/python/read_process_context.py"))
            .arg(&pid)
            .output_tied()
            .unwrap();
        if read.status.success() {
            attributes = Some(String::from_utf8(read.stdout).unwrap());
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let attributes = attributes.expect("no process context found while the JVM ran");
    println!("{attributes}");
    for expected in [
        r#""service.name": "checkout""#,
        r#""service.version": "1.5""#,
        r#""deployment.environment.name": "staging""#,
        r#""threadlocal.schema_version": "tlsdesc_v1_dev""#,
        r#""threadlocal.attribute_key_map": ["local_root_span_id"]"#,
        &format!(r#""process.pid": {pid}"#),
    ] {
        assert!(
            attributes.contains(expected),
            "{expected} missing in {attributes}"
        );
    }
}

/// With the default OpenTelemetry storage below it, otelprof keeps the context itself (one
/// thread-local lookup per attach); every behaviour applications rely on (no-op attaches,
/// out-of-order and double closes ignored, values, other threads, `wrap`, `taskWrapping`) must
/// be the same as without otelprof.
#[test]
fn owned_context_storage_behaves_like_the_default() {
    let steps = |out: &RunOutput| -> Vec<String> {
        out.stdout
            .lines()
            .filter(|l| l.starts_with("ok ") || l.starts_with("FAIL "))
            .map(str::to_owned)
            .collect()
    };
    let plain = JvmRun::new(jdk17(), "otelprof.tests.otel.StorageSemantics")
        .no_agent()
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .run();
    plain.assert_clean_exit();
    assert!(plain.stdout.contains("failures=0"), "{}", plain.stdout);
    for jdk in [jdk17(), jdk25()] {
        let with = JvmRun::new(jdk, "otelprof.tests.otel.StorageSemantics")
            .javaagent()
            .agent("cpu=10ms")
            .classpath(&[otel_classes(), otel_sdk_jar()])
            .run();
        with.assert_clean_exit();
        assert!(
            with.stdout
                .contains("storage=otelprof.otel.OtelprofContextStorage owns=true failures=0"),
            "{}\n{}",
            with.stdout,
            with.stderr
        );
        assert_eq!(steps(&with), steps(&plain));
        assert!(steps(&plain).len() >= 18);
    }
}

/// The shim parses every new span's ids; on JDK ≤ 23 (and on later JDKs run with
/// `--sun-misc-unsafe-memory-access=allow`) it reads the id strings' bytes in place (Unsafe),
/// elsewhere from a copy. Both paths, and the validating parser of the direct API, must agree
/// with `Long.parseUnsignedLong` on random ids and fall back on strings that are not Latin-1;
/// and using Unsafe must never make the JVM print its deprecation warning.
#[test]
fn id_parsing_matches_the_reference_on_every_path() {
    for (jdk, flags, direct) in [
        (jdk17(), &[][..], true),
        (jdk17(), &["-Dotelprof.unsafe=false"][..], false),
        (jdk25(), &[][..], false),
        (
            jdk25(),
            &["--sun-misc-unsafe-memory-access=allow"][..],
            true,
        ),
        (
            jdk25(),
            &[
                "--sun-misc-unsafe-memory-access=allow",
                "-Dotelprof.unsafe=false",
            ][..],
            false,
        ),
    ] {
        let out = JvmRun::new(jdk, "otelprof.tests.otel.HexCheck")
            .no_agent()
            .classpath(&[otel_classes(), &otelprof_tests::jar_path()])
            .flags(flags)
            .run();
        out.assert_clean_exit();
        let want = format!("direct={direct} checked=1200004 failures=0");
        assert!(out.stdout.contains(&want), "want {want}:\n{}", out.stdout);
        assert!(
            !out.stderr.contains("WARNING"),
            "{flags:?}: the JVM warned:\n{}",
            out.stderr
        );
    }
}
