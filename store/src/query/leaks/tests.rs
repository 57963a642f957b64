//! The statistics without a JVM: simulated snapshot series of sampled sites (the model of
//! the module docs' simulation), steady ones must not be named, a leak must.

use super::*;
use otelprof_primitives::rng::SplitMix64;

const INTERVAL: f64 = 512.0 * 1024.0;
const MINUTE: i64 = 60_000_000_000;

/// A site of `objects` objects of `size` bytes, each sampled with the agent's probability
/// `1 - exp(-size / I)`; each snapshot step an object dies with probability `death` and is
/// replaced, and `growth` objects are added. Returns the estimated live bytes per snapshot.
fn simulate(
    rng: &mut SplitMix64,
    objects: usize,
    size: f64,
    death: f64,
    growth: usize,
    steps: usize,
) -> Vec<f64> {
    let p = 1.0 - (-size / INTERVAL).exp();
    let weight = size / p;
    let bernoulli =
        |rng: &mut SplitMix64, n: usize, q: f64| (0..n).filter(|_| rng.next_f64() < q).count();
    let mut sampled = bernoulli(rng, objects, p);
    let mut total = objects;
    let mut out = Vec::with_capacity(steps);
    for _ in 0..steps {
        out.push(sampled as f64 * weight);
        // Deaths among the sampled, and among the rest (the replacements' count).
        let dead_sampled = bernoulli(rng, sampled, death);
        let dead_rest = bernoulli(rng, total - sampled, death);
        sampled = sampled - dead_sampled + bernoulli(rng, dead_sampled + dead_rest, p);
        sampled += bernoulli(rng, growth, p);
        total += growth;
    }
    out
}

/// Snapshots a minute apart of one instance, from per-site series.
fn series_of(sites: &[(&str, Vec<f64>)]) -> Series {
    let mut all = Series::default();
    for (site, ys) in sites {
        for (i, y) in ys.iter().enumerate() {
            let s = all.entry(("i".to_owned(), i as i64 * MINUTE)).or_default();
            s.period = INTERVAL as i64;
            if *y > 0.0 {
                s.sites.insert((*site).to_owned(), *y);
            }
        }
    }
    all
}

#[test]
fn steady_sites_are_not_named_and_a_leak_is_first() {
    let mut rng = SplitMix64(7);
    let mut false_positives = 0;
    let runs = 40;
    for run in 0..runs {
        // 60 snapshots a minute apart; steady sites of 20 MB of 1 KiB objects living about
        // 20 minutes, 2 hours, forever; churn-like short-lived ones; and, every other run,
        // a leak of 1 KiB objects at 60 MB/h.
        let steps = 60;
        let mut sites = vec![
            (
                "app.A.cache [byte[]]",
                simulate(&mut rng, 20_000, 1024.0, 0.05, 0, steps),
            ),
            (
                "app.B.pool [byte[]]",
                simulate(&mut rng, 20_000, 1024.0, 0.008, 0, steps),
            ),
            (
                "app.C.config [byte[]]",
                simulate(&mut rng, 20_000, 1024.0, 0.0, 0, steps),
            ),
            (
                "app.D.session [java.lang.String]",
                simulate(&mut rng, 5_000, 256.0, 0.3, 0, steps),
            ),
        ];
        let leaking = run % 2 == 0;
        if leaking {
            sites.push((
                "app.L.leak [byte[]]",
                simulate(&mut rng, 1_000, 1024.0, 0.0, 1_000, steps),
            ));
        }
        let report = rank(series_of(&sites), &LeakOptions::default());
        let named: Vec<&str> = report.candidates().map(|l| l.site.as_str()).collect();
        false_positives += named.iter().filter(|s| !s.contains(".leak")).count();
        if leaking {
            assert_eq!(named.first(), Some(&"app.L.leak [byte[]]"), "{report:#?}");
            let l = &report.sites[0];
            // 1,000 KiB a minute: 61 MB an hour.
            assert!((l.slope_per_hour / 61.44e6 - 1.0).abs() < 0.25, "{l:?}");
            assert!(l.share > 0.0 && l.share < 1.0);
        }
    }
    assert_eq!(false_positives, 0, "steady sites named in {runs} runs");
}

#[test]
fn a_perfectly_steady_heap_and_a_short_series_name_nothing() {
    let flat = vec![1e6; 20];
    let report = rank(
        series_of(&[("app.A.a [byte[]]", flat)]),
        &LeakOptions::default(),
    );
    assert_eq!(report.candidates().count(), 0);
    assert_eq!(report.sites.len(), 1);
    assert_eq!(report.latest_total, 1e6);
    // Growth, but fewer snapshots than asked for: not tested.
    let short: Vec<f64> = (0..5).map(|i| 1e6 * (i + 1) as f64).collect();
    let report = rank(
        series_of(&[("app.A.a [byte[]]", short)]),
        &LeakOptions::default(),
    );
    assert!(report.sites.is_empty() && report.instances == 0);
}

#[test]
fn the_slope_pools_instances_with_their_own_intercepts() {
    // Two instances growing 1 byte a nanosecond from very different levels.
    let x = |t: &[i64]| t.to_vec();
    let times = x(&[0, 10, 20, 30]);
    let a = InstanceSeries {
        times: &times,
        bytes: vec![100.0, 110.0, 120.0, 130.0],
    };
    let b = InstanceSeries {
        times: &times,
        bytes: vec![5000.0, 5010.0, 5020.0, 5030.0],
    };
    let f = fit(&[a, b]);
    assert!((f.slope - 1.0).abs() < 1e-12, "{f:?}");
    assert_eq!(f.df, 5.0);
}

#[test]
fn a_site_is_the_leaf_most_method_outside_the_jdk() {
    use otel_bridge::model::{FrameKind, ProfileBuilder};
    let mut b = ProfileBuilder::new(
        &[("inuse_objects", "count"), ("inuse_space", "bytes")],
        ("memory", "bytes"),
        512 * 1024,
    );
    let names = [
        "java.util.HashMap$Node",
        "java.util.HashMap.putVal",
        "java.util.HashMap.put",
        "com.app.Registry.register",
        "com.app.Main.main",
    ];
    let locs: Vec<_> = names
        .iter()
        .map(|n| {
            let f = b.function(n, "X.java", 1);
            b.location(f, 1, FrameKind::Jvm)
        })
        .collect();
    b.add_sample(&locs, &[], &[1, 100]);
    b.add_sample(&locs[..3], &[], &[1, 100]);
    let p = b.build(0, 0);
    let none = crate::focus::Focus::default();
    assert_eq!(
        site_of(&p, &p.samples[0], &none),
        "com.app.Registry.register [java.util.HashMap$Node]"
    );
    // Only JDK frames: the allocating method.
    assert_eq!(
        site_of(&p, &p.samples[1], &none),
        "java.util.HashMap.putVal [java.util.HashMap$Node]"
    );
    // A hidden method leaves the site to the next one out.
    let hide = crate::focus::Focus {
        hide: vec![crate::focus::Glob::parse("com.app.Registry.*").unwrap()],
        ..Default::default()
    };
    assert_eq!(
        site_of(&p, &p.samples[0], &hide),
        "com.app.Main.main [java.util.HashMap$Node]"
    );
}
