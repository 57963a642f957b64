//! `otelprof diff --by span_name` between two time ranges of one real JVM whose regression is
//! confined to one endpoint (tests/java-otel EndpointService: the real OpenTelemetry SDK makes
//! the server spans and exports `http.server.request.duration` over OTLP/HTTP to the same
//! `otelprof receive` the agent sends its profiles to).
//!
//! Halfway through, `GET /cart` starts calling a helper it shares with `POST /checkout` twice:
//! its CPU per request doubles, the other endpoints' stays the same. The call tree cannot tell
//! the two endpoints apart (both call the helper from the same handler); the endpoint table
//! must. Its per-request numbers are checked against the CPU per endpoint that
//! tests/python/endpoint_cpu.py reads from the store with the official OTLP classes, divided by
//! the requests the workload counted.

use crate::diff_support;
use otelprof_tests::Tied as _;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::OnceLock;

use diff_support::{endpoint_rows, function_rows, parse_duration_ms, printed};
use otelprof_tests::otelprof;
use otelprof_tests::receive::ReceiveProcess;
use otelprof_tests::{jdk17, otel_classes, otel_sdk_jar, python, repo_root, JvmRun, RunOutput};

const MAIN: &str = "otelprof.tests.otel.EndpointService";
const CART: &str = "GET /cart";
const OTHERS: [&str; 2] = ["GET /home", "POST /checkout"];

struct Run {
    /// The receiver's store; the receiver itself is stopped once the runs are in.
    store: String,
    out: RunOutput,
    /// Unix ms: the start of the measured phase before the switch, the switch, the end.
    measure: i64,
    switch: i64,
    end: i64,
}

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let receive = ReceiveProcess::start(&[]);
        let metrics = format!("http://127.0.0.1:{}/v1/metrics", receive.http);
        let out = JvmRun::new(jdk17(), MAIN)
            .javaagent()
            .agent(&format!(
                "{},period=2s,timestamps=on,cpu=1ms",
                receive.grpc_agent_options()
            ))
            .classpath(&[otel_classes(), otel_sdk_jar()])
            .args(&[&metrics, "2", "3", "10", "10"])
            .flags(&[
                "-XX:CompileCommand=quiet",
                "-XX:CompileCommand=dontinline,otelprof/tests/otel/EndpointService.*",
            ])
            .env("OTEL_SERVICE_NAME", "endpoint-service")
            .run();
        out.assert_clean_exit();
        let counters = out.agent_counters();
        assert_eq!(counters["otlp_unsent"], 0, "{counters:?}");
        let (measure, switch, end) = (
            printed(&out.stdout, "measure"),
            printed(&out.stdout, "switch"),
            printed(&out.stdout, "end"),
        );
        let store = receive.store_arg().to_owned();
        receive.stop();
        Run {
            store,
            out,
            measure,
            switch,
            end,
        }
    })
}

fn secs(ms: i64) -> String {
    format!("{:.3}", ms as f64 / 1000.0)
}

/// Requests per endpoint the workload counted in `phase`.
fn requests(out: &RunOutput, phase: &str) -> BTreeMap<String, f64> {
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("requests {phase} ")))
        .map(|rest| {
            let (endpoint, n) = rest.rsplit_once(' ').unwrap();
            (endpoint.replace('_', " "), n.parse().unwrap())
        })
        .collect()
}

/// CPU (ms) per endpoint in [from, to) (Unix ms), read by tests/python/endpoint_cpu.py.
fn python_cpu_ms(store: &str, from: i64, to: i64) -> BTreeMap<String, f64> {
    let out = Command::new(python())
        .arg(repo_root().join("tests/python/endpoint_cpu.py"))
        .arg(store)
        .arg((from * 1_000_000).to_string())
        .arg((to * 1_000_000).to_string())
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "endpoint_cpu.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ns: BTreeMap<String, f64> = serde_json::from_slice(&out.stdout).unwrap();
    ns.into_iter().map(|(k, v)| (k, v / 1e6)).collect()
}

#[test]
fn a_regression_confined_to_one_endpoint_is_named_as_that_endpoint() {
    let r = run();
    let store = r.store.as_str();
    let args = [
        "diff",
        "--by",
        "span_name",
        "--base-from",
        &secs(r.measure),
        "--base-to",
        &secs(r.switch),
        "--head-from",
        &secs(r.switch),
        "--head-to",
        &secs(r.end),
        "--limit",
        "0",
        "--fail-above",
        "50",
        store,
    ];
    let (code, out, err) = otelprof(&args);
    println!("$ otelprof {}\n{out}{err}", args.join(" "));
    assert_eq!(code, 0, "no function grew by 50 pp:\n{out}\n{err}");
    let rows = endpoint_rows(&out);
    let top = &rows[0];
    assert_eq!(top.name, CART, "{out}");
    assert!(top.starred, "{out}");
    // Truth: 2 units of work per request, then 4 (plus the span's own cost, the same in both).
    let change = top.change.unwrap();
    assert!(
        (change - 100.0).abs() < 40.0,
        "GET /cart's CPU per request changed {change:+.1}%, the workload's truth is +100%"
    );
    // The others did not change: not starred, and within what a few hundred samples per
    // endpoint and side allow (and the machine's load, which moves CPU per request a little).
    for other in OTHERS {
        let row = rows.iter().find(|row| row.name == other).unwrap();
        let change = row.change.unwrap();
        assert!(
            !row.starred && change.abs() < 25.0,
            "{other} did not change, yet: {row:?}\n{out}"
        );
    }
    assert!(
        out.contains(&format!(
            "Largest significant increase by span_name: {CART} (cpu per request +"
        )),
        "{out}"
    );
    // The function that grew is shared by two endpoints, from one call site: its row leads
    // (its total, truth +11 pp of the CPU), but only the endpoint table says where.
    let grew = function_rows(&out, "Grew");
    assert_eq!(
        grew[0].name, "otelprof.tests.otel.EndpointService.total",
        "{out}"
    );
    assert!((grew[0].delta_total - 11.0).abs() < 6.0, "{:?}", grew[0]);

    // Per request, against the store read by the official OTLP classes and the workload's own
    // request counts.
    for (phase, from, to, column) in [
        ("before", r.measure, r.switch, "base"),
        ("after", r.switch, r.end, "head"),
    ] {
        let cpu = python_cpu_ms(store, from, to);
        let counted = requests(&r.out, phase);
        for endpoint in std::iter::once(CART).chain(OTHERS) {
            let want = cpu[endpoint] / counted[endpoint];
            let row = rows.iter().find(|row| row.name == endpoint).unwrap();
            let cell = if column == "base" {
                &row.base_per_request
            } else {
                &row.head_per_request
            };
            let got = parse_duration_ms(cell);
            println!("{phase} {endpoint}: CLI {got:.5} ms/request, OTLP classes {want:.5}");
            assert!(
                (got - want).abs() <= 0.01 * want,
                "{phase} {endpoint}: the CLI says {cell} per request, the store holds {want:.5} ms \
                 over {} requests",
                counted[endpoint]
            );
        }
    }
}

#[test]
fn without_request_counts_endpoints_compare_by_share() {
    // By thread: no request counts exist for threads, so shares are compared, and the
    // per-request columns are absent.
    let r = run();
    let args = [
        "diff",
        "--by",
        "thread.name",
        "--base-from",
        &secs(r.measure),
        "--base-to",
        &secs(r.switch),
        "--head-from",
        &secs(r.switch),
        "--head-to",
        &secs(r.end),
        r.store.as_str(),
    ];
    let (code, out, err) = otelprof(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("base share") && l.ends_with("  thread.name")),
        "{out}"
    );
    assert!(!out.contains("Δ/request"), "{out}");
}
