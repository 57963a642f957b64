//! The web UI of `otelprof serve` in a real browser: Debian's Chromium,
//! driven by Playwright's `playwright-core` (tests/browser/serve_ui.js; scripts/test.sh
//! installs the pinned version under target/browser-node). The store is the one
//! `otelprof demo` writes with real JVMs and the real agent (shop 1.0 and 2.0, traces,
//! endpoints, a known regression), compacted as a receiver compacts an hour that is over
//! (`otelprof compact`), and served as `scripts/demo.sh --serve` serves it.
//! The script opens every view, drags a time range, searches a frame, picks a function's trend
//! (a row from the keyboard, a frame), colours a wall profile by thread state, opens a trace from
//! the keyboard, compares the versions and follows shared URLs, focuses (include, hide) and opens
//! the butterfly view from a frame, comparing both with the CLI run by the script on the same
//! store (tests/browser/focus_butterfly.js); it takes a screenshot of each view (and of
//! Explore's Findings panel),
//! into a scratch directory, or into docs/screenshots/ (the README's) with
//! `OTELPROF_UPDATE_SCREENSHOTS=1`, so that a test run leaves the checkout as it was. An
//! OpAMP agent (PyPI's opentelemetry-opamp-client) is connected, and the Instances view
//! starts a capture on it from the keyboard.

use otelprof_tests::receive::{Launch, ReceiveProcess};
use otelprof_tests::Tied as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use otelprof_tests::{
    browser_node_modules, cli_path, otelprof, python, repo_root, run_with_timeout, scratch_dir,
};

const REGRESSED: &str = "otelprof.demo.Catalog.findProduct";
/// The service.instance.id of the OpAMP agent the Instances view starts a capture on.
const OPAMP_INSTANCE: &str = "i-browser";
const SCREENS: [&str; 10] = [
    "explore.png",
    "findings.png",
    "states.png",
    "trend.png",
    "focus.png",
    "butterfly.png",
    "traces.png",
    "trace.png",
    "compare.png",
    "instances.png",
];

/// `otelprof serve` on free loopback ports; killed on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_view_works_in_chromium() {
    let modules = browser_node_modules();
    let started = SystemTime::now();

    let dir = scratch_dir("serve-browser");
    let mut demo = Command::new(cli_path());
    demo.args(["demo", "--seconds", "8", "--dir"]).arg(&dir);
    let (code, stdout, stderr, _) = run_with_timeout(demo, Duration::from_secs(180));
    assert_eq!(code, Some(0), "demo failed:\n{stdout}\n{stderr}");
    // The store as a receiver leaves it once its hours are over: converted into the columnar
    // store and compacted (rollups, series and spans answer the whole hours).
    let (code, out, err) = otelprof(&[
        "compact",
        "--store",
        dir.join("store").to_str().unwrap(),
        "--keep-otlp",
        "forever",
    ]);
    assert_eq!(code, 0, "compact failed:\n{out}\n{err}");
    assert!(
        !out.starts_with("0 requests converted") && !out.contains(" 0 hours compacted"),
        "{out}"
    );
    let columnar = std::fs::read_dir(dir.join("store/columnar"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("service="))
        .flat_map(|service| std::fs::read_dir(service.path()).unwrap().flatten())
        .flat_map(|hour| std::fs::read_dir(hour.path()).unwrap().flatten())
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    for kind in ["rollup-", "series-", "spans-", "samples-compacted-"] {
        assert!(columnar.iter().any(|f| f.starts_with(kind)), "{columnar:?}");
    }

    let store = dir.join("store");
    let serve = ReceiveProcess::launch(Launch {
        store: Some(&store),
        ui_host: Some("127.0.0.1"),
        ..Launch::default()
    });
    let ui = serve.ui.unwrap();

    // An agent connected over OpAMP for the Instances view (PyPI opentelemetry-opamp-client,
    // answering captures as tests/python/opamp_agent.py says), polling until killed.
    let _opamp_agent = Serve(
        Command::new(python())
            .arg(repo_root().join("tests/python/opamp_agent.py"))
            .arg(format!("http://127.0.0.1:{ui}/v1/opamp"))
            .args([OPAMP_INSTANCE, "600"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn_tied()
            .unwrap(),
    );

    let screenshots = if std::env::var_os("OTELPROF_UPDATE_SCREENSHOTS").is_some() {
        repo_root().join("docs/screenshots")
    } else {
        scratch_dir("screenshots")
    };
    std::fs::create_dir_all(&screenshots).unwrap();
    // The Traces view must list what `otelprof traces` prints: its first trace.
    let (code, traces, err) = otelprof(&[
        "traces",
        "--limit",
        "3",
        dir.join("store").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "otelprof traces failed:\n{traces}\n{err}");
    let first_trace = traces
        .lines()
        .nth(2)
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(first_trace.len(), 32, "{traces}");

    let mut node = Command::new("node");
    node.arg(repo_root().join("tests/browser/serve_ui.js"))
        .env("NODE_PATH", &modules)
        .env("OTELPROF_UI", format!("http://127.0.0.1:{ui}"))
        .env("OTELPROF_REGRESSED", REGRESSED)
        .env("OTELPROF_FIRST_TRACE", &first_trace)
        .env("OTELPROF_OPAMP_INSTANCE", OPAMP_INSTANCE)
        .env("OTELPROF_CLI", cli_path())
        .env("OTELPROF_STORE", &store)
        .env("OTELPROF_SCREENSHOTS", &screenshots);
    let (code, stdout, stderr, _) = run_with_timeout(node, Duration::from_secs(240));
    println!("{stdout}{stderr}");
    assert_eq!(
        code,
        Some(0),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all views checked"), "{stdout}");

    // One fresh PNG per view, written by this run.
    for name in SCREENS {
        let path = screenshots.join(name);
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{}",
            path.display()
        );
        assert!(bytes.len() > 10_000, "{} is nearly empty", path.display());
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(
            written >= started,
            "{} is not from this run",
            path.display()
        );
    }
}
