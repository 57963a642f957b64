//! The Findings panel of `otelprof serve`'s Explore view against `otelprof findings --format
//! json` on the same store, in Debian's Chromium (tests/browser/findings_ui.js). The store is
//! one run of the findings workload (tests/java Findings, as in [`super::findings`]) planting
//! two patterns at once: exceptions as control flow and regexes compiled per call. The script
//! compares the panel with the CLI (rule, title, cost, method, order) for the whole
//! selection, for one without the regex's method (`exclude`, one finding fewer), for a clean
//! one (`include` of the arithmetic: the "no findings" text) and against a baseline
//! (`new_against`, every finding marked as also there); and follows an evidence
//! stack into the flame graph, which must hold that stack's frames.

use std::process::Command;
use std::time::Duration;

use otelprof_tests::receive::{Launch, ReceiveProcess};
use otelprof_tests::{browser_node_modules, cli_path, repo_root, run_with_timeout};

#[test]
fn the_findings_panel_shows_what_the_cli_finds() {
    let modules = browser_node_modules();
    let run = super::findings::run("exceptions+regex");
    // Both planted patterns are found by the CLI, or the comparison would prove little.
    let found = super::findings::findings(&run);
    for rule in ["exceptions-control-flow", "regex-compiled-per-call"] {
        assert!(
            found.iter().any(|f| f["rule"] == rule),
            "no {rule}: {found:#?}"
        );
    }

    let serve = ReceiveProcess::launch(Launch {
        store: Some(&run.out_dir),
        ui_host: Some("127.0.0.1"),
        ..Launch::default()
    });
    let ui = serve.ui.unwrap();
    let mut node = Command::new("node");
    node.arg(repo_root().join("tests/browser/findings_ui.js"))
        .env("NODE_PATH", &modules)
        .env("OTELPROF_UI", format!("http://127.0.0.1:{ui}"))
        .env("OTELPROF_CLI", cli_path())
        .env("OTELPROF_STORE", &run.out_dir);
    let (code, stdout, stderr, _) = run_with_timeout(node, Duration::from_secs(180));
    println!("{stdout}{stderr}");
    assert_eq!(
        code,
        Some(0),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("findings panel checked"), "{stdout}");
}
