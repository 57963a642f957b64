//! A function's trend (`query::trend`) over a real store: its buckets are the timeline's, before
//! and after compaction; each bucket's share is what the profiles it overlaps say, parted by
//! their time in it; the buckets add up to the function's total in the whole selection; and a
//! live-heap trend holds each bucket's latest snapshot.
// Test code (clippy.toml allows these in #[test]s; the helpers are outside them).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{scratch, MINUTE, T0};
use otel_bridge::otlp::{EncodeOptions, ProfileId};
use otel_bridge::{FrameKind, Profile, ProfileBuilder};
use otelprof_store::columnar::{compact, ColumnarWriter};
use otelprof_store::focus::Glob;
use otelprof_store::query::timeline::timeline;
use otelprof_store::query::top::top_functions;
use otelprof_store::query::trend::{trend, Trend};
use otelprof_store::query::{self, Spec};
use otelprof_store::{Error, ProfileType, Selector, StoreSource};

const PERIOD: i64 = 10_000_000_000;
const START: i64 = T0 + 3_700_000_000;
const PROFILES: i64 = 60;
/// Samples of 10 ms a profile: four threads' wall time.
const SAMPLES: i64 = 4 * PERIOD / 10_000_000;

fn open(dir: &Path) -> impl Fn() -> Result<StoreSource, Error> + '_ {
    move || StoreSource::open(&[dir.to_path_buf()], Box::new(|p, e| panic!("{p:?}: {e}")))
}

/// Profile `k`'s samples in `app.Work.render`: a quarter in the first half, three quarters after.
fn render_samples(k: i64) -> i64 {
    if k < PROFILES / 2 {
        SAMPLES / 4
    } else {
        SAMPLES * 3 / 4
    }
}

/// Wall profile `k`: `render` (under `handle`) and the rest in `parse`, no sample timestamps.
fn wall(k: i64) -> Profile {
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("wall", "nanoseconds")],
        ("wall", "nanoseconds"),
        10_000_000,
    );
    let handle = b.function("app.Http.handle", "Http.java", 1);
    let render = b.function("app.Work.render", "Work.java", 10);
    let parse = b.function("app.Work.parse", "Work.java", 20);
    let (lh, lr, lp) = (
        b.location(handle, 2, FrameKind::Jvm),
        b.location(render, 11, FrameKind::Jvm),
        b.location(parse, 21, FrameKind::Jvm),
    );
    let r = render_samples(k);
    b.add_sample(&[lr, lh], &[], &[r, r * 10_000_000]);
    b.add_sample(&[lp, lh], &[], &[SAMPLES - r, (SAMPLES - r) * 10_000_000]);
    b.build(START + k * PERIOD, PERIOD)
}

/// The profiles as OTLP files in `dir/files` and as a columnar store in `dir/store`.
fn stores(dir: &Path) -> (PathBuf, PathBuf) {
    let (files, store) = (dir.join("files"), dir.join("store"));
    std::fs::create_dir_all(&files).unwrap();
    let writer = ColumnarWriter::open(&store).unwrap();
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_attribute(opentelemetry::KeyValue::new("service.instance.id", "i-1"))
        .build();
    for k in 0..PROFILES {
        let bytes = otel_bridge::otlp::encode_to_vec(
            &wall(k),
            &resource,
            ProfileId::from_random([k as u8 + 1; 16]),
            &EncodeOptions::default(),
        )
        .unwrap();
        std::fs::write(files.join(format!("{k:04}.otlp.pb")), &bytes).unwrap();
        writer
            .write(
                &otel_bridge::otlp::decode(&bytes).unwrap(),
                START + (k + 1) * PERIOD,
            )
            .unwrap();
    }
    (files, store)
}

fn render_trend(dir: &Path, ty: ProfileType, pattern: &str, buckets: usize) -> Trend {
    let spec = Spec::new(Some(ty), &Selector::default());
    trend(
        open(dir),
        &[],
        spec,
        &Glob::parse(pattern).unwrap(),
        buckets,
    )
    .unwrap()
}

/// What `render` and everything add up to in `[a, b)`, each profile counted by the part of its
/// time inside: worked out from the profiles as written, not by the store.
fn expected(a: i64, b: i64) -> (f64, f64) {
    let (mut render, mut all) = (0.0, 0.0);
    for k in 0..PROFILES {
        let (p0, p1) = (START + k * PERIOD, START + (k + 1) * PERIOD);
        let part = (p1.min(b) - p0.max(a)).max(0) as f64 / PERIOD as f64;
        render += part * (render_samples(k) * 10_000_000) as f64;
        all += part * (SAMPLES * 10_000_000) as f64;
    }
    (render, all)
}

#[test]
fn a_trend_has_the_timelines_buckets_and_the_profiles_shares() {
    let dir = scratch("trend");
    let (files, store) = stores(&dir);
    let check = |path: &Path, buckets: usize| {
        let t = render_trend(path, ProfileType::Wall, "*.render", buckets);
        let spec = Spec::new(Some(ProfileType::Wall), &Selector::default());
        let tl = timeline(open(path), spec, "span_name", buckets).unwrap();
        assert_eq!(
            t.times, tl.times,
            "the trend's buckets are not the timeline's"
        );
        assert_eq!(t.points.len() + 1, t.times.len());
        assert_eq!(t.functions.len(), 1, "{:?}", t.functions);
        for (p, w) in t.points.iter().zip(t.times.windows(2)) {
            let (render, all) = expected(w[0], w[1]);
            assert!((p.total - render).abs() <= 1e-6 * all, "{p:?} vs {render}");
            assert_eq!(p.total, p.self_value, "render is a leaf");
            assert!((p.selection - all).abs() <= 1e-6 * all, "{p:?} vs {all}");
            assert_eq!(p.requests, None, "no metrics stored");
        }
        // Wholly before the switch a quarter, wholly after three quarters.
        let switch = START + PROFILES / 2 * PERIOD;
        let shares = |before: bool| -> Vec<f64> {
            t.points
                .iter()
                .zip(t.times.windows(2))
                .filter(|(_, w)| {
                    if before {
                        w[1] <= switch
                    } else {
                        w[0] >= switch
                    }
                })
                .map(|(p, _)| p.share().unwrap())
                .collect()
        };
        let (before, after) = (shares(true), shares(false));
        assert!(before.len() >= 2 && after.len() >= 2, "{t:?}");
        assert!(before.iter().all(|s| (s - 0.25).abs() < 1e-9), "{before:?}");
        assert!(after.iter().all(|s| (s - 0.75).abs() < 1e-9), "{after:?}");
        // The buckets add up to the function's total in the whole selection.
        let spec = Spec::new(Some(ProfileType::Wall), &Selector::default());
        let (whole, _) = query::merge(&open(path)().unwrap(), spec).unwrap();
        let top = top_functions(&whole, None);
        let row = top
            .rows
            .iter()
            .find(|r| r.name == "app.Work.render")
            .unwrap();
        let sum: f64 = t.points.iter().map(|p| p.total).sum();
        assert!((sum - row.total_value).abs() <= 1e-6 * row.total_value);
        t
    };
    // 600 s in 70 buckets of 8.6 s (finer than a tick), in 20 of whole ticks (30 s).
    let fine = check(&files, 70);
    assert!(fine.times[1] % PERIOD != 0, "{:?}", fine.times);
    check(&files, 20);
    assert!(!compact(&store, START + 3 * 60 * MINUTE, 0)
        .unwrap()
        .is_empty());
    let t = check(&store, 20);
    assert!(
        t.times.len() > 2 && t.times[1] % PERIOD == 0,
        "{:?}",
        t.times
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A live-heap snapshot of one instance at minute `m`: `mb` MB held by `app.A.grow` and 1 MB
/// by `app.B.keep`.
fn snapshot(m: i64, mb: i64) -> Vec<u8> {
    let mut b = ProfileBuilder::new(
        &[("inuse_objects", "count"), ("inuse_space", "bytes")],
        ("memory", "bytes"),
        512 * 1024,
    );
    let grow = b.function("app.A.grow", "A.java", 1);
    let keep = b.function("app.B.keep", "B.java", 1);
    let (lg, lk) = (
        b.location(grow, 3, FrameKind::Jvm),
        b.location(keep, 4, FrameKind::Jvm),
    );
    b.add_sample(&[lg], &[], &[mb * 1000, mb * 1_000_000]);
    b.add_sample(&[lk], &[], &[1000, 1_000_000]);
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_attribute(opentelemetry::KeyValue::new("service.instance.id", "i-1"))
        .build();
    otel_bridge::otlp::encode_to_vec(
        &b.build(T0 + m * MINUTE, 0),
        &resource,
        ProfileId::from_random([m as u8 + 1; 16]),
        &EncodeOptions::default(),
    )
    .unwrap()
}

/// Snapshots are never added up: each bucket holds its latest, so a site growing 1 MB a minute
/// is 2, 4 and 6 MB in three buckets of two snapshots, beside 1 MB kept.
#[test]
fn a_live_trend_holds_each_buckets_latest_snapshot() {
    let dir = scratch("trend-live");
    for m in 0..6 {
        std::fs::write(dir.join(format!("{m}.otlp.pb")), snapshot(m, m + 1)).unwrap();
    }
    let t = render_trend(&dir, ProfileType::Live, "app.A.*", 3);
    let mb: Vec<f64> = t.points.iter().map(|p| p.total / 1e6).collect();
    assert_eq!(mb, [2.0, 4.0, 6.0], "{t:?}");
    let all: Vec<f64> = t.points.iter().map(|p| p.selection / 1e6).collect();
    assert_eq!(all, [3.0, 5.0, 7.0], "{t:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
