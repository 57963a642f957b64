//! `otelprof demo` end to end (real JVMs, the real agent, the embedded receiver), then the
//! reading commands on the store it leaves: `diff --fail-above` exit codes, flame graphs in
//! SVG and HTML, and the HTML checked in headless Chromium (Debian `chromium`): it renders,
//! and typing in the search box highlights a known frame.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use otelprof_tests::{cli_path, otelprof, run_with_timeout, scratch_dir, which};
use serde_json::Value;

const REGRESSED: &str = "otelprof.demo.Catalog.findProduct";

struct Demo {
    dir: PathBuf,
    stdout: String,
    elapsed: Duration,
}

/// One demo run, shared by the tests of this file (they run one at a time).
fn demo() -> &'static Demo {
    static DEMO: OnceLock<Demo> = OnceLock::new();
    DEMO.get_or_init(|| {
        let dir = scratch_dir("demo");
        let mut cmd = Command::new(cli_path());
        cmd.args(["demo", "--seconds", "10", "--dir"]).arg(&dir);
        let (code, stdout, stderr, elapsed) = run_with_timeout(cmd, Duration::from_secs(180));
        assert_eq!(code, Some(0), "demo failed:\n{stdout}\n{stderr}");
        println!("{stderr}\n{stdout}");
        Demo {
            dir,
            stdout,
            elapsed,
        }
    })
}

#[test]
fn demo_answers_the_three_questions_in_under_two_minutes() {
    let d = demo();
    assert!(
        d.elapsed < Duration::from_secs(120),
        "the demo took {:?}",
        d.elapsed
    );
    let out = &d.stdout;
    // CPU per endpoint, with requests from the shop's OTLP metrics.
    for endpoint in [
        "GET /products/{id}",
        "GET /cart",
        "POST /checkout",
        "GET /report",
    ] {
        let row = out
            .lines()
            .find(|l| l.contains(&format!("  {endpoint}  (hottest:")))
            .unwrap_or_else(|| panic!("no row for {endpoint}:\n{out}"));
        let requests: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert!(requests >= 1.0, "{row}");
    }
    // The load runs in a process of its own: the service's CPU outside any request (its HTTP
    // dispatcher, GC) is a minority, not the clients' half it was when they ran inside it.
    let none = out
        .lines()
        .find(|l| l.contains("  <none>  (hottest:"))
        .map_or(0.0, |row| {
            let share = row.split_whitespace().nth(1).unwrap();
            share.trim_end_matches('%').parse::<f64>().unwrap()
        });
    assert!(none < 50.0, "outside any endpoint: {none}%\n{out}");
    // The drilldown of the slowest trace has samples, an endpoint and a window.
    let drill = out.split("== The slowest trace").nth(1).unwrap();
    assert!(drill.contains("\nendpoint "), "{drill}");
    assert!(drill.contains("samples from "), "{drill}");
    assert!(drill.contains("flame graph: "), "{drill}");
    // The diff names the regressed method, significantly.
    assert!(
        out.contains(&format!("Largest significant increase: {REGRESSED}")),
        "{out}"
    );
    assert!(
        out.contains(&format!("The regression: {REGRESSED}.")),
        "{out}"
    );
    for f in [
        "slowest-trace.html",
        "diff-1.0-2.0.html",
        "flame-1.0.html",
        "flame-2.0.html",
        "flame-2.0.svg",
    ] {
        let p = d.dir.join(f);
        assert!(
            p.is_file() && std::fs::metadata(&p).unwrap().len() > 10_000,
            "{}",
            p.display()
        );
        assert!(out.contains(&p.display().to_string()), "{f} not announced");
    }
}

#[test]
fn diff_fail_above_turns_the_regression_into_an_exit_code() {
    let store = demo().dir.join("store");
    let store = store.to_str().unwrap();
    let (code, out, err) = otelprof(&[
        "diff",
        "--base",
        "service.version=1.0",
        "--head",
        "service.version=2.0",
        "--fail-above",
        "5",
        store,
    ]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains(&format!("regression: {REGRESSED} grew")),
        "{err}"
    );
    // Per-request columns come from the stored HTTP server metrics.
    assert!(out.contains("Δ/request  endpoint"), "{out}");
    // A release compared with itself has no regression.
    let (code, out, err) = otelprof(&[
        "diff",
        "--base",
        "service.version=2.0",
        "--head",
        "service.version=2.0",
        "--fail-above",
        "1",
        store,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("No significant increase"), "{out}");
    // Bad selectors are errors, not empty results.
    let (code, _, err) = otelprof(&[
        "diff",
        "--base",
        "nonsense",
        "--head",
        "service.version=2.0",
        store,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--base"), "{err}");
}

#[test]
fn drilldown_offers_the_endpoint_when_a_span_has_no_samples() {
    let d = demo();
    let trace = d
        .stdout
        .lines()
        .find_map(|l| l.split("--trace-id ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    // The slowest request is usually a GET /report, but on a busy machine any endpoint can
    // be: take the one the demo names (`== The slowest trace …: … endpoint=GET /report ms=…`).
    let endpoint = d
        .stdout
        .lines()
        .find_map(|l| l.split(" endpoint=").nth(1))
        .and_then(|rest| rest.split(" ms=").next())
        .unwrap()
        .to_owned();
    let handler = match endpoint.as_str() {
        "GET /products/{id}" => "otelprof.demo.Shop.product",
        "GET /cart" => "otelprof.demo.Shop.cart",
        "POST /checkout" => "otelprof.demo.Shop.checkout",
        "GET /report" => "otelprof.demo.Shop.report",
        other => panic!("the demo named an endpoint it does not serve: {other:?}"),
    };
    let store = d.dir.join("store");
    let (code, out, err) = otelprof(&[
        "drilldown",
        "--trace-id",
        &trace,
        "--span-id",
        "00000000000000aa",
        "--limit",
        "0",
        store.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("span 00000000000000aa got no samples"),
        "{out}"
    );
    assert!(
        out.contains(&format!("the profile of its endpoint {endpoint:?}")),
        "{out}"
    );
    assert!(out.contains(handler), "{out}");
}

fn chromium() -> PathBuf {
    which("chromium").unwrap_or_else(|| {
        panic!("`chromium` not found: install Debian chromium (scripts/test.sh does)")
    })
}

/// Opens `html` in headless Chromium with a probe script appended that types `search` into
/// the search box (an `input` event, as a keyboard would send), hovers a frame and reports
/// what the page shows; returns the probe's findings.
fn probe(html: &Path, search: &str) -> Value {
    let page = std::fs::read_to_string(html).unwrap();
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http") && !page.contains("<link"),
        "the page loads something from elsewhere"
    );
    let script = format!(
        r#"<script>
window.addEventListener("load", function () {{
  var out = {{}};
  var chart = document.getElementById("chart");
  var frames = chart.querySelectorAll(".frame");
  out.drawn = frames.length;
  out.widest = 0;
  for (var i = 0; i < frames.length; i++) out.widest = Math.max(out.widest, frames[i].getBoundingClientRect().width);
  var box = document.getElementById("search");
  box.value = {search:?};
  box.dispatchEvent(new Event("input", {{ bubbles: true }}));
  var matched = Array.prototype.slice.call(chart.querySelectorAll(".frame.match"));
  out.matched = matched.map(function (e) {{ return e.textContent; }});
  out.matchedVisible = matched.filter(function (e) {{ return e.getBoundingClientRect().width > 0; }}).length;
  out.matchColor = matched.length ? getComputedStyle(matched[0]).backgroundColor : "";
  out.otherColor = getComputedStyle(chart.querySelector(".frame:not(.match)")).backgroundColor;
  out.status = document.getElementById("status").textContent;
  if (matched.length) {{
    matched[0].dispatchEvent(new MouseEvent("mousemove", {{ bubbles: true, clientX: 20, clientY: 20 }}));
    out.tip = document.getElementById("tip").textContent;
    matched[0].click();
    out.zoomed = document.getElementById("status").textContent;
    out.zoomedWidth = chart.querySelector(".frame.match").getBoundingClientRect().width;
    out.chartWidth = chart.getBoundingClientRect().width;
  }}
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}});
</script>"#
    );
    let probed = html.with_extension("probe.html");
    std::fs::write(
        &probed,
        page.replace("</body>", &format!("{script}</body>")),
    )
    .unwrap();
    let profile_dir = scratch_dir("chromium-profile");
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,900",
        "--virtual-time-budget=5000",
    ])
    .arg(format!("--user-data-dir={}", profile_dir.display()))
    .arg("--dump-dom")
    .arg(format!("file://{}", probed.display()));
    let (code, dom, stderr, _) = run_with_timeout(cmd, Duration::from_secs(90));
    assert_eq!(code, Some(0), "chromium failed: {stderr}");
    let json = dom
        .split("<pre id=\"probe\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .unwrap_or_else(|| {
            panic!(
                "the probe did not run (a script error?):\n{}",
                &dom[dom.len().saturating_sub(2000)..]
            )
        });
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}

#[test]
fn html_flame_graphs_render_and_search_highlights_in_chromium() {
    let d = demo();
    for (file, min_frames) in [("flame-2.0.html", 100), ("diff-1.0-2.0.html", 100)] {
        let r = probe(&d.dir.join(file), "findProduct");
        println!("{file}: {r}");
        assert!(r["drawn"].as_u64().unwrap() >= min_frames, "{file}: {r}");
        assert!(r["widest"].as_f64().unwrap() > 1000.0, "{file}: {r}");
        let matched: Vec<&str> = r["matched"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            !matched.is_empty(),
            "{file}: search highlighted nothing: {r}"
        );
        // Frames show their source file.
        let label = format!("{REGRESSED} (Catalog.java)");
        assert!(matched.iter().all(|m| *m == label), "{file}: {matched:?}");
        assert_eq!(
            r["matchedVisible"].as_u64().unwrap(),
            matched.len() as u64,
            "{r}"
        );
        assert_ne!(r["matchColor"], r["otherColor"], "{r}");
        assert!(r["status"].as_str().unwrap().starts_with("matched "), "{r}");
        assert!(r["tip"].as_str().unwrap().starts_with(REGRESSED), "{r}");
        assert!(
            r["zoomed"]
                .as_str()
                .unwrap()
                .contains(&format!("zoomed to {REGRESSED}")),
            "{r}"
        );
        // Zoomed, the frame spans the whole chart.
        let (w, full) = (
            r["zoomedWidth"].as_f64().unwrap(),
            r["chartWidth"].as_f64().unwrap(),
        );
        assert!((w - full).abs() < 2.0, "{r}");
    }
    // A search that matches nothing highlights nothing.
    let r = probe(&d.dir.join("flame-1.0.html"), "no.such.Frame");
    assert!(r["matched"].as_array().unwrap().is_empty(), "{r}");
}

#[test]
fn flame_writes_svg_and_refuses_unknown_formats() {
    let d = demo();
    let store = d.dir.join("store");
    let out = scratch_dir("flame").join("cpu.svg");
    let started = Instant::now();
    let (code, _, err) = otelprof(&[
        "flame",
        "--where",
        "span_name=GET /cart",
        "-o",
        out.to_str().unwrap(),
        store.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("<svg"), "not SVG");
    assert!(
        svg.contains("otelprof.demo.Shop.cart"),
        "the cart handler is not drawn"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let (code, _, err) = otelprof(&["flame", "-o", "x.png", store.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("*.html") && err.contains("*.svg"), "{err}");
}

fn alive(pid: u32) -> bool {
    // A zombie has no command line left; anything else still runs.
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
}

/// The demo's shop and load generator end with the demo, even when it is killed with SIGKILL
/// (no chance to clean up): the kernel signals them (PR_SET_PDEATHSIG).
#[test]
fn a_killed_demo_leaves_no_jvm_behind() {
    use otelprof_tests::running_jvm::children;
    use otelprof_tests::Tied as _;
    let dir = scratch_dir("demo-killed");
    let mut demo = Command::new(cli_path())
        .args(["demo", "--seconds", "30", "--dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn_tied()
        .expect("start otelprof demo");
    // Wait for the shop and its load: two JVMs at once.
    let start = Instant::now();
    let mut jvms = Vec::new();
    while start.elapsed() < Duration::from_secs(120) {
        jvms = children(demo.id());
        if jvms.len() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        jvms.len() >= 2,
        "the demo never ran its shop and load: {jvms:?}"
    );
    std::thread::sleep(Duration::from_secs(2));
    demo.kill().expect("SIGKILL the demo");
    demo.wait().expect("reap the demo");
    // The shop flushes its last profile on SIGTERM (at most 5 s with nobody receiving).
    let start = Instant::now();
    while jvms.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let left: Vec<u32> = jvms.iter().copied().filter(|&p| alive(p)).collect();
    println!(
        "demo's JVMs {jvms:?}: all ended {:?} after SIGKILL",
        start.elapsed()
    );
    assert!(left.is_empty(), "the demo's JVMs outlived it: {left:?}");
}

/// `top --value samples` on the demo's store with `extra` flags: the header's total and each
/// row's function with its total.
fn top_samples(extra: &[&str]) -> (f64, Vec<(String, f64)>) {
    let store = demo().dir.join("store");
    let mut args = vec!["top", "--value", "samples", "--limit", "0"];
    args.extend_from_slice(extra);
    args.push(store.to_str().unwrap());
    let (code, out, err) = otelprof(&args);
    assert_eq!(code, 0, "otelprof {}:\n{out}\n{err}", args.join(" "));
    let total: f64 = out
        .lines()
        .next()
        .and_then(|h| h.rsplit_once("total "))
        .and_then(|(_, t)| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no total in {out}"));
    let rows = out
        .lines()
        .skip(2)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let name = cols.get(4)?.to_string();
            Some((name, cols.get(2)?.parse().ok()?))
        })
        .collect();
    (total, rows)
}

/// Focus on real data: `--include` keeps exactly the stacks through a function (their total
/// is the function's total), `--exclude` the rest, `--hide` removes frames and keeps the
/// samples.
#[test]
fn focus_includes_excludes_and_hides_frames() {
    let (all, rows) = top_samples(&[]);
    let through = rows
        .iter()
        .find(|(n, _)| n == REGRESSED)
        .map(|(_, t)| *t)
        .expect("the regressed function in top");
    let (included, rows_in) = top_samples(&["--include", "otelprof.demo.Catalog.findProduct"]);
    assert_eq!(included, through, "include keeps the stacks through it");
    assert!(rows_in
        .iter()
        .any(|(n, t)| n == REGRESSED && *t == included));
    let (excluded, rows_ex) = top_samples(&["--exclude", "*.Catalog.findProduct"]);
    assert_eq!(excluded, all - through, "exclude drops exactly those");
    assert!(rows_ex.iter().all(|(n, _)| n != REGRESSED));
    let (hidden, rows_hid) = top_samples(&["--hide", "java.*", "--hide", "jdk.*"]);
    assert!(
        rows_hid
            .iter()
            .all(|(n, _)| !n.starts_with("java.") && !n.starts_with("jdk.")),
        "{rows_hid:?}"
    );
    // Only stacks made of nothing but JDK frames go: a small part of the demo's samples.
    assert!(hidden <= all && hidden >= 0.8 * all, "{hidden} of {all}");
    let (code, _, err) = otelprof(&[
        "top",
        "--include",
        "no.such.*",
        demo().dir.join("store").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--include no.such.*"), "{err}");
}

/// `callers` and `callees` on the demo: the paths into the regressed function add up to its
/// total (each sample once), and they are the shop's real callers.
#[test]
fn callers_and_callees_of_a_function() {
    let store = demo().dir.join("store");
    let store = store.to_str().unwrap();
    let (code, out, err) = otelprof(&[
        "callers",
        "*.Catalog.findProduct",
        "--min",
        "0",
        "--depth",
        "1",
        store,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    println!("{out}");
    let first_level: Vec<(f64, String)> = out
        .lines()
        // A first-level line: two spaces, the share in six columns, `%`, two spaces, the name.
        .filter(|l| l.as_bytes().get(8) == Some(&b'%') && l.starts_with("  "))
        .filter_map(|l| {
            let (pct, name) = l.trim().split_once("%  ")?;
            Some((pct.trim().parse().ok()?, name.to_owned()))
        })
        .collect();
    let sum: f64 = first_level.iter().map(|(p, _)| p).sum();
    assert!((sum - 100.0).abs() < 0.1, "callers add up to {sum}%: {out}");
    assert!(
        first_level
            .iter()
            .any(|(_, n)| n.starts_with("otelprof.demo.Catalog.related")),
        "{out}"
    );
    let (code, out, err) = otelprof(&["callees", "otelprof.demo.Shop.report", store]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("java.util.ArrayList.sort"), "{out}");
    let (code, _, err) = otelprof(&["callers", "no.such.Method", store]);
    assert_eq!(code, 1);
    assert!(err.contains("no function matches"), "{err}");
}
