//! Units are never mixed: an OTLP store carries an allocation profile as two profiles (bytes
//! and objects) and a lock profile as two (delay and contentions); every reading shows one of
//! them, with its unit. The agent exports to a real `otelprof receive` and writes pprof files
//! in the same run; `otelprof top` on the store must give the totals `go tool pprof` gives on
//! the files, and the workload's own truth within its sampling error.

use otelprof_tests::Tied as _;
use std::collections::BTreeMap;
use std::process::Command;

use otelprof_tests::receive::ReceiveProcess;
use otelprof_tests::{cli_path, jdk17, otel_classes, otel_sdk_jar, pprof_top, JvmRun};

/// `otelprof top` on the store with `args`: the header line and the total it states.
fn top_total(store: &std::path::Path, args: &[&str]) -> (String, String) {
    let out = Command::new(cli_path())
        .arg("top")
        .args(args)
        .arg(store)
        .output_tied()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = text.lines().next().unwrap_or("").to_owned();
    let total = header
        .rsplit_once("total ")
        .map(|(_, t)| t.to_owned())
        .unwrap_or_default();
    (header, total)
}

/// A total as `otelprof` prints it (`1.5GiB`, `12.3s`, `12345`) in the unit's base (bytes,
/// nanoseconds, count).
fn parse_total(text: &str) -> f64 {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: f64 = n.parse().unwrap();
    let scale = match unit {
        "" | "B" | "ns" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        "h" => 3600e9,
        other => panic!("unknown unit {other:?} in {text:?}"),
    };
    n * scale
}

fn close(a: f64, b: f64, within: f64) -> bool {
    (a / b - 1.0).abs() <= within
}

#[test]
fn allocation_bytes_and_objects_are_read_apart() {
    let receive = ReceiveProcess::start(&[]);
    let run = JvmRun::new(jdk17(), "otelprof.tests.otel.AllocSplit")
        .javaagent()
        .agent(&format!(
            "alloc=512k,alloc_rate=0,cpu=off,{}",
            receive.agent_options()
        ))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .flags(&["-Xmx256m"])
        .args(&["2048"])
        .run();
    run.assert_clean_exit();
    let truth: f64 = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("alloc "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
        .sum();
    let files = run.profiles_of("alloc");
    let (pprof_bytes, pprof_objects) = (
        pprof_top(&files, "alloc_space", &[]).total,
        pprof_top(&files, "alloc_objects", &[]).total,
    );
    let (header, total) = top_total(&receive.store, &["--type", "alloc"]);
    assert!(header.starts_with("Type: alloc_space (bytes)"), "{header}");
    let bytes = parse_total(&total);
    // The store and the files hold the same samples; the printed total is rounded to three
    // digits.
    assert!(
        close(bytes, pprof_bytes, 0.01),
        "store {bytes} vs pprof {pprof_bytes}"
    );
    assert!(
        close(bytes, truth, 0.15),
        "store {bytes} vs allocated {truth}"
    );
    let (header, total) = top_total(&receive.store, &["--value", "objects"]);
    assert!(
        header.starts_with("Type: alloc_objects (count)"),
        "{header}"
    );
    let objects = parse_total(&total);
    assert!(
        close(objects, pprof_objects, 0.001),
        "store {objects} vs pprof {pprof_objects}"
    );
    println!("allocated {truth:.0} B; store {bytes:.0} B and {objects:.0} objects; pprof {pprof_bytes:.0} B and {pprof_objects:.0} objects");
}

#[test]
fn lock_delay_and_contentions_are_read_apart() {
    let receive = ReceiveProcess::start(&[]);
    let run = JvmRun::new(jdk17(), "otelprof.tests.otel.LockContention")
        .javaagent()
        .agent(&format!("lock=0,cpu=off,{}", receive.agent_options()))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .args(&["4", "monitor"])
        .run();
    run.assert_clean_exit();
    let waited: BTreeMap<&str, f64> = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("waited "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0], f[1].parse::<f64>().unwrap())
        })
        .collect();
    let truth: f64 = waited.values().sum();
    let files = run.profiles_of("lock");
    // pprof_top reads time in milliseconds.
    let (pprof_delay, pprof_contentions) = (
        pprof_top(&files, "delay", &[]).total * 1e6,
        pprof_top(&files, "contentions", &[]).total,
    );
    let (header, total) = top_total(&receive.store, &["--type", "lock"]);
    assert!(header.starts_with("Type: delay (nanoseconds)"), "{header}");
    let delay = parse_total(&total);
    assert!(
        close(delay, pprof_delay, 0.01),
        "store {delay} vs pprof {pprof_delay}"
    );
    assert!(close(delay, truth, 0.15), "store {delay} vs waited {truth}");
    let (header, total) = top_total(&receive.store, &["--value", "contentions"]);
    assert!(header.starts_with("Type: contentions (count)"), "{header}");
    let contentions = parse_total(&total);
    assert!(
        close(contentions, pprof_contentions, 0.001),
        "store {contentions} vs pprof {pprof_contentions}"
    );
    println!("waited {truth:.0} ns; store {delay:.0} ns and {contentions:.0} contentions; pprof {pprof_delay:.0} ns and {pprof_contentions:.0}");
}
