//! The live heap (`live=`) against a workload whose truth the JVM measures (tests/java-otel
//! LiveSplit): three sites hold a steady 128 MiB in the ratio 60:30:10 while two others churn
//! twice that per second, then the churn stops and two full collections run. Read back with
//! `go tool pprof` on the `live-*` snapshots:
//!
//! - the snapshot written after the last collection gives each site its share of the three
//!   within ±3 pp of the truth (the exact bytes the workload holds), and the three sites'
//!   objects within 8 %; its total is within 10 % of the heap the JVM reports in use after
//!   that collection;
//! - in every snapshot, the churn sites hold under 5 % of the live bytes (young garbage is
//!   never live: an object counts only once a collection has run since it was sampled);
//!   under generational ZGC, whose minor cycles clear no weak reference, in the last one;
//! - the objects carry the allocating thread, span and endpoint.
//!
//! At `live=32k` with every sample kept (`alloc_rate=0`): a share's sampling error is then
//! about sqrt(r(1-r) I / S), 0.6 pp at 60 %, so ±3 pp is five standard deviations. A run with
//! `alloc=` beside it checks the shared sampler: each profile keeps its own interval, and the
//! allocation profile's total still matches what the thread allocated.

use std::collections::BTreeMap;
use std::path::PathBuf;

use otelprof_tests::{
    all_jdks, jdk17, jdk25, otel_classes, otel_sdk_jar, otelprof, pprof_top, pprof_traces, Jdk,
    JvmRun, RunOutput,
};

const CLASS: &str = "otelprof.tests.otel.LiveSplit";
const SITES: [&str; 3] = ["A", "B", "C"];
const SHARES: [f64; 3] = [60.0, 30.0, 10.0];

/// What the workload printed.
struct Truth {
    /// Per site: bytes and objects held.
    sites: BTreeMap<String, (f64, f64)>,
    heap_used: f64,
    heap_after_gc: f64,
    allocated: f64,
    trace_id: String,
    span_id: String,
}

fn truth(run: &RunOutput) -> Truth {
    let value = |key: &str| -> f64 {
        run.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no '{key}' line:\n{}", run.stdout))
            .parse()
            .unwrap()
    };
    let sites = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("truth "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_owned(),
                (f[1].parse().unwrap(), f[2].parse().unwrap()),
            )
        })
        .collect();
    let span = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("span "))
        .unwrap();
    let (trace_id, span_id) = span.split_once(' ').unwrap();
    Truth {
        sites,
        heap_used: value("heap_used"),
        heap_after_gc: value("heap_after_gc"),
        allocated: value("allocated"),
        trace_id: trace_id.to_owned(),
        span_id: span_id.to_owned(),
    }
}

fn run(jdk: &Jdk, options: &str, gc: &str) -> RunOutput {
    let mut run = JvmRun::new(jdk.clone(), CLASS)
        .javaagent()
        .agent(options)
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .flags(&["-Xmx1g", gc])
        // 128 MiB held, 20 s of churn at twice that per second, 7 s after the collection:
        // a 5 s period ends in between.
        .args(&["128", "20", "2", "7"]);
    run.timeout = std::time::Duration::from_secs(240);
    let out = run.run();
    out.assert_clean_exit();
    out
}

/// A site's bytes in a snapshot: its arrays and its holder.
fn site_bytes(top: &otelprof_tests::Top, site: &str) -> f64 {
    top.cum(&format!("{CLASS}.retain{site}")) + top.cum(&format!("{CLASS}.holder{site}"))
}

fn churn_bytes(top: &otelprof_tests::Top) -> f64 {
    top.cum(&format!("{CLASS}.churnArrays")) + top.cum(&format!("{CLASS}.churnStrings"))
}

/// When dead objects stop counting as live.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clears {
    /// After the next collection (G1, Parallel): every snapshot holds under 5 % of churn, and
    /// the table never fills.
    EveryCollection,
    /// After a major cycle (generational ZGC, whose minor cycles leave weak references
    /// alone): between major cycles the churn fills the table (the interval rises) and
    /// snapshots may count it; the one after the final collections must be exact.
    MajorCycles,
}

/// The checks on the snapshots of one run; returns the last snapshot.
fn check_snapshots(jdk: &Jdk, out: &RunOutput, t: &Truth) -> PathBuf {
    check_snapshots_clearing(jdk, out, t, Clears::EveryCollection)
}

fn check_snapshots_clearing(jdk: &Jdk, out: &RunOutput, t: &Truth, clears: Clears) -> PathBuf {
    let files = out.profiles_of("live");
    let c = out.agent_counters();
    println!(
        "{}: {} live snapshots; live_samples={} alloc_samples={} live_entries={} live_interval={} \
         live_collected={} live_interval_raises={} live_dropped_full={} gc_pauses={} gc_collections={}",
        jdk.name,
        files.len(),
        c["live_samples"],
        c["alloc_samples"],
        c["live_entries"],
        c["live_interval"],
        c["live_collected"],
        c["live_interval_raises"],
        c["live_dropped_full"],
        c["gc_pauses"],
        c["gc_collections"],
    );
    // A snapshot per 5 s period and one at exit.
    assert!(files.len() >= 5, "{files:?}");
    if clears == Clears::EveryCollection {
        assert_eq!(
            c["live_interval_raises"], 0,
            "the table never filled: {c:?}"
        );
    }
    for (i, f) in files.iter().enumerate() {
        let top = pprof_top(std::slice::from_ref(f), "inuse_space", &[]);
        if top.total == 0.0 {
            // The first period may end before anything has survived a collection.
            assert_eq!(i, 0, "an empty snapshot after the first: {}", f.display());
            continue;
        }
        let churn = 100.0 * churn_bytes(&top) / top.total;
        println!(
            "{} snapshot {i}: {:.1} MB live, churn {churn:.2} %",
            jdk.name,
            top.total / 1e6
        );
        let last = i + 1 == files.len();
        assert!(
            churn < 5.0 || (clears == Clears::MajorCycles && !last),
            "{}: churn {churn:.2} % in {}",
            jdk.name,
            f.display()
        );
    }
    let last = files.last().unwrap().clone();
    let top = pprof_top(std::slice::from_ref(&last), "inuse_space", &[]);
    let objects = pprof_top(std::slice::from_ref(&last), "inuse_objects", &[]);
    let measured: Vec<f64> = SITES.iter().map(|s| site_bytes(&top, s)).collect();
    let true_bytes: Vec<f64> = SITES.iter().map(|s| t.sites[*s].0).collect();
    let (sum, true_sum) = (measured.iter().sum::<f64>(), true_bytes.iter().sum::<f64>());
    let (mut counted, mut true_counted) = (0.0, 0.0);
    for (i, site) in SITES.iter().enumerate() {
        let share = 100.0 * measured[i] / sum;
        let truth = 100.0 * true_bytes[i] / true_sum;
        let count = objects.cum(&format!("{CLASS}.retain{site}"))
            + objects.cum(&format!("{CLASS}.holder{site}"));
        let true_count = t.sites[*site].1;
        println!(
            "{} site {site}: {share:.2} % of the sites' live bytes (truth {truth:.2} %, asked \
             {}), {:.1} MB (truth {:.1} MB), {count:.0} objects (truth {true_count:.0})",
            jdk.name,
            SHARES[i],
            measured[i] / 1e6,
            true_bytes[i] / 1e6
        );
        // ±3 pp at 32k; the sampling error grows with the square root of the interval, when a
        // full table raised it.
        let allowed = 3.0 * (c["live_interval"] as f64 / 32768.0).sqrt().max(1.0);
        assert!(
            (share - truth).abs() <= allowed,
            "{} {site}: {share:.2} vs {truth:.2} (±{allowed:.1})",
            jdk.name
        );
        counted += count;
        true_counted += true_count;
    }
    // Objects: at 32k a 512 B array is sampled with p = 1.6 %, so a count's sampling error is
    // large for few objects (6.5 % for site C's 1,600); the three sites' 16,000 together are
    // within 2 % (one standard deviation), checked at four. The error grows with the square
    // root of the interval, when a full table raised it.
    let objects_ratio = counted / true_counted;
    let bound = 0.08 * (c["live_interval"] as f64 / 32768.0).sqrt().max(1.0);
    println!(
        "{}: the sites' objects {counted:.0}, truth {true_counted:.0} ({objects_ratio:.3}, \
         allowed ±{bound:.3} at the interval {})",
        jdk.name, c["live_interval"]
    );
    assert!(
        (objects_ratio - 1.0).abs() <= bound,
        "{}: {counted:.0} objects vs {true_counted:.0}",
        jdk.name
    );
    // ZGC's heap in use counts its pages whole (153 MB in use for 134 MB held, measured):
    // there the snapshot is held to the bytes the workload holds.
    let against = match clears {
        Clears::EveryCollection => t.heap_used,
        Clears::MajorCycles => true_sum,
    };
    let ratio = top.total / against;
    println!(
        "{}: snapshot total {:.1} MB, heap used after full GC {:.1} MB (collection usage \
         {:.1} MB); the sites' truth {:.1} MB: {ratio:.3}",
        jdk.name,
        top.total / 1e6,
        t.heap_used / 1e6,
        t.heap_after_gc / 1e6,
        true_sum / 1e6
    );
    assert!(
        (ratio - 1.0).abs() <= 0.10,
        "{}: total/truth {ratio:.3}",
        jdk.name
    );

    // Thread, span and endpoint of the allocation.
    let samples = pprof_traces(std::slice::from_ref(&last), "inuse_space");
    let (mut in_sites, mut labelled) = (0.0, 0.0);
    let mut unlabelled = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| SITES.iter().any(|x| s.has_frame(&format!("retain{x}"))))
    {
        in_sites += s.value;
        if s.label("thread_name") == Some("main")
            && s.label("span_name") == Some("live /split")
            && s.label("trace_id") == Some(t.trace_id.as_str())
            && s.label("span_id") == Some(t.span_id.as_str())
            && s.frames[0] == "byte[]"
        {
            labelled += s.value;
        } else {
            *unlabelled
                .entry(format!("{:?} {}", s.labels, s.frames[0]))
                .or_insert(0.0) += s.value;
        }
    }
    if !unlabelled.is_empty() {
        println!(
            "{}: without the allocation's labels: {unlabelled:#?}",
            jdk.name
        );
    }
    println!(
        "{}: thread, span and endpoint on {:.2} % of the sites' bytes",
        jdk.name,
        100.0 * labelled / in_sites
    );
    assert!(labelled >= 0.99 * in_sites);
    last
}

#[test]
fn live_heap_shares_and_total_match_the_truth_on_every_jdk() {
    for jdk in all_jdks() {
        let out = run(
            &jdk,
            "cpu=off,live=32k,alloc_rate=0,period=5s",
            "-XX:+UseG1GC",
        );
        let t = truth(&out);
        check_snapshots(&jdk, &out, &t);
        assert!(out.profiles_of("alloc").is_empty(), "alloc= is off");
        cli_reads_one_snapshot(&jdk, &out);
    }
}

/// `alloc=64k` beside `live=32k`: one sampler at 32k, the allocation profile keeping its
/// share of the samples. Both stay right. The collector is Parallel, the other
/// stop-the-world collector of JDK 17, so the live heap is checked under it too.
#[test]
fn allocation_and_live_heap_share_one_sampler() {
    let jdk = jdk17();
    let out = run(
        &jdk,
        "cpu=off,alloc=64k,live=32k,alloc_rate=0,period=5s",
        "-XX:+UseParallelGC",
    );
    let t = truth(&out);
    check_snapshots(&jdk, &out, &t);
    let alloc = out.profiles_of("alloc");
    let top = pprof_top(&alloc, "alloc_space", &["-tagfocus=thread_name=main"]);
    let ratio = top.total / t.allocated;
    println!(
        "{}: the main thread allocated {:.0} MB, the allocation profile says {:.0} MB ({ratio:.3})",
        jdk.name,
        t.allocated / 1e6,
        top.total / 1e6
    );
    assert!((ratio - 1.0).abs() <= 0.05, "alloc total/true {ratio:.3}");
}

/// The total `otelprof top` prints in its header (`…; N samples, total 130.78MiB`), in bytes.
fn top_total(args: &[&str]) -> f64 {
    let (code, stdout, stderr) = otelprof(args);
    assert_eq!(code, 0, "otelprof {args:?}: {stderr}");
    let header = stdout.lines().next().unwrap_or_default();
    let total = header.rsplit("total ").next().unwrap_or_default().trim();
    let split = total.find(|c: char| c.is_ascii_alphabetic()).unwrap();
    let (number, unit) = total.split_at(split);
    let scale = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => panic!("unit of {header}"),
    };
    number.parse::<f64>().unwrap() * scale
}

/// `otelprof top --type live` reads snapshots as snapshots: the whole run gives the last
/// snapshot (not the sum of all), and `--to` before the last gives the one before it.
fn cli_reads_one_snapshot(jdk: &Jdk, out: &RunOutput) {
    let files = out.profiles_of("live");
    let dir = out.out_dir.to_str().unwrap();
    let n = files.len();
    let pprof_total = |f: &PathBuf| pprof_top(std::slice::from_ref(f), "inuse_space", &[]).total;
    let totals: Vec<f64> = files.iter().map(pprof_total).collect();
    let last = totals[n - 1];
    let all: f64 = totals.iter().sum();
    let whole = top_total(&["top", "--type", "live", dir]);
    // --to just after the earlier snapshot that differs most from the last: the file name's
    // time (whole seconds) of the snapshot after it cuts it off.
    let k = (0..n - 1)
        .filter(|k| totals[*k] > 0.0)
        .max_by(|a, b| {
            (totals[*a] - last)
                .abs()
                .total_cmp(&(totals[*b] - last).abs())
        })
        .unwrap();
    let before = totals[k];
    let name = files[k + 1].file_name().unwrap().to_str().unwrap();
    let stamp = name.split('-').nth(1).unwrap();
    let to = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15]
    );
    let earlier = top_total(&["top", "--type", "live", "--to", &to, dir]);
    println!(
        "{}: otelprof top --type live: {:.1} MB (last snapshot {:.1} MB, all {n} summed \
         {:.1} MB); --to {to}: {:.1} MB (snapshot {k}: {:.1} MB)",
        jdk.name,
        whole / 1e6,
        last / 1e6,
        all / 1e6,
        earlier / 1e6,
        before / 1e6
    );
    // The header rounds to two decimals of its unit.
    assert!((whole / last - 1.0).abs() < 0.005, "{whole} vs {last}");
    assert!(whole < 0.5 * all, "{whole} vs {all}");
    assert!(
        (earlier / before - 1.0).abs() < 0.005,
        "{earlier} vs {before}"
    );
}

/// A concurrent, generational collector: ZGC on JDK 25 (generational only). Its minor
/// cycles leave JNI weak references alone, so between major cycles the snapshots count
/// churn (measured: up to 95 % of a snapshot's bytes) and the agent says so in one line;
/// the snapshot after the final collections is as exact as under G1.
#[test]
fn live_heap_under_generational_zgc() {
    let jdk = jdk25();
    let out = run(
        &jdk,
        "cpu=off,live=32k,alloc_rate=0,period=5s",
        "-XX:+UseZGC",
    );
    assert!(
        out.stderr
            .contains("otelprof: live heap under generational ZGC:"),
        "{}",
        out.stderr
    );
    let t = truth(&out);
    check_snapshots_clearing(&jdk, &out, &t, Clears::MajorCycles);
}
