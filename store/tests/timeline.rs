//! The timeline (`query::timeline`) over a real store: its buckets add up to the whole merge
//! of the selection, group by group, and the store gives the same timeline before compaction
//! (from the rows) and after (from the hours' series).
//!
//! A profile counts in every bucket its time overlaps, its samples without timestamps by the
//! part of its time in each: a steady load draws a flat line whatever the buckets' edges.
// Test code (clippy.toml allows these in #[test]s; the helpers are outside them).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{build_store, scratch, MINUTE, T0};
use otelprof_store::columnar::compact;
use otelprof_store::query::timeline::{timeline, Timeline};
use otelprof_store::query::{self, Spec};
use otelprof_store::{Error, ProfileType, Selector, StoreSource};

fn open(dir: &Path) -> impl Fn() -> Result<StoreSource, Error> + '_ {
    move || StoreSource::open(&[dir.to_path_buf()], Box::new(|p, e| panic!("{p:?}: {e}")))
}

fn the_timeline(dir: &Path, selector: &Selector, buckets: usize) -> Timeline {
    let spec = Spec::new(Some(ProfileType::Cpu), selector);
    timeline(open(dir), spec, "span_name", buckets).unwrap()
}

/// What each `span_name` adds up to in the whole selection.
fn whole(dir: &Path, selector: &Selector) -> BTreeMap<String, f64> {
    let spec = Spec::new(Some(ProfileType::Cpu), selector).by(Some("span_name"));
    let (m, _) = query::merge(&open(dir)().unwrap(), spec).unwrap();
    let mut sums = BTreeMap::new();
    for s in &m.stacks {
        *sums.entry(m.group(s.group).to_owned()).or_insert(0.0) += s.value;
    }
    sums.retain(|_, v| *v != 0.0);
    sums
}

fn sums(t: &Timeline) -> BTreeMap<String, f64> {
    t.series
        .iter()
        .map(|(name, values)| (name.clone(), values.iter().sum()))
        .collect()
}

fn assert_close(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in a {
        assert!(
            (v - b[k]).abs() <= 1e-6 * v.abs().max(1.0),
            "{k}: {v} vs {}",
            b[k]
        );
    }
}

#[test]
fn buckets_add_up_to_the_whole_and_compaction_changes_nothing() {
    let dir = scratch("timeline");
    build_store(&dir);
    let all = Selector::default();
    // 81 minutes in 9 buckets of 9 minutes: each profile within one.
    let nine = the_timeline(&dir, &all, 9);
    assert_eq!(nine.ty, ProfileType::Cpu);
    assert_eq!(nine.unit, "nanoseconds");
    let starts: Vec<i64> = (0..=9).map(|k| T0 + 9 * k * MINUTE).collect();
    assert_eq!(nine.times, starts);
    assert!(nine.series.iter().all(|(_, v)| v.len() == 9));
    assert_close(&sums(&nine), &whole(&dir, &all));
    let rows = the_timeline(&dir, &all, 60);
    assert!(
        rows.times.len() >= 2 && rows.times.len() <= 61,
        "{:?}",
        rows.times
    );
    assert!(
        rows.times.windows(2).all(|w| w[0] < w[1]),
        "{:?}",
        rows.times
    );
    assert!(rows
        .series
        .iter()
        .all(|(_, v)| v.len() + 1 == rows.times.len()));
    // A range of ten minutes: buckets finer than the series' tick, read from the rows.
    let ten = Selector {
        from: Some(T0 + 20 * MINUTE),
        to: Some(T0 + 30 * MINUTE),
        ..Selector::default()
    };
    let ten_rows = the_timeline(&dir, &ten, 60);
    assert_eq!(ten_rows.times.first(), Some(&(T0 + 20 * MINUTE)));
    assert!(!ten_rows.series.is_empty());

    compact(&dir, T0 + 150 * MINUTE, 0).unwrap();
    let series = the_timeline(&dir, &all, 60);
    assert_eq!(series.times, rows.times);
    assert_eq!(
        series.series.iter().map(|s| &s.0).collect::<Vec<_>>(),
        rows.series.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    for ((name, a), (_, b)) in series.series.iter().zip(&rows.series) {
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= 1e-6 * x.abs().max(1.0),
                "{name}: {a:?} vs {b:?}"
            );
        }
    }
    assert_eq!(the_timeline(&dir, &ten, 60), ten_rows);
    assert_eq!(the_timeline(&dir, &all, 9), nine);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A live-heap snapshot of one instance at minute `m`: `mb` MB allocated in `span_name=GET /a`.
fn live_snapshot(m: i64, mb: i64) -> Vec<u8> {
    use otel_bridge::otlp::{EncodeOptions, ProfileId};
    use otel_bridge::{FrameKind, ProfileBuilder};
    let mut b = ProfileBuilder::new(
        &[("inuse_objects", "count"), ("inuse_space", "bytes")],
        ("memory", "bytes"),
        512 * 1024,
    );
    let class = b.function("byte[]", "", 0);
    let site = b.function("app.A.grow", "A.java", 1);
    let stack = [
        b.location(class, 0, FrameKind::Jvm),
        b.location(site, 3, FrameKind::Jvm),
    ];
    let ep = b.str_label("span_name", "GET /a");
    b.add_sample(&stack, &[ep], &[mb * 1000, mb * 1_000_000]);
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

/// Live-heap snapshots are never added up: each bucket holds the latest snapshot in it, so a
/// site growing 1 MB a minute draws a line up to the last snapshot's 6 MB, not a sum.
#[test]
fn a_live_timeline_draws_each_buckets_latest_snapshot() {
    let dir = scratch("timeline-live");
    for m in 0..6 {
        std::fs::write(dir.join(format!("{m}.otlp.pb")), live_snapshot(m, m + 1)).unwrap();
    }
    let spec = |buckets| {
        let spec = Spec::new(Some(ProfileType::Live), &Selector::default());
        timeline(open(&dir), spec, "span_name", buckets).unwrap()
    };
    let six = spec(6);
    assert_eq!(six.ty, ProfileType::Live);
    assert_eq!(six.series.len(), 1, "{six:?}");
    let mb: Vec<f64> = six.series[0].1.iter().map(|v| v / 1e6).collect();
    assert_eq!(mb, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "{six:?}");
    // Two snapshots a bucket: the later of each.
    let three = spec(3);
    let mb: Vec<f64> = three.series[0].1.iter().map(|v| v / 1e6).collect();
    assert_eq!(mb, [2.0, 4.0, 6.0], "{three:?}");
    // The whole selection: the last snapshot.
    let spec = Spec::new(Some(ProfileType::Live), &Selector::default());
    let (m, _) = query::merge(&open(&dir)().unwrap(), spec).unwrap();
    assert_eq!(m.total(), 6e6);
}

/// In the columnar store, before and after its hour is compacted: the whole selection read
/// from the hour's rollup is still the last snapshot (the rollup keeps it, not a sum), and a
/// timeline from the hour's series still draws one snapshot per bucket.
#[test]
fn a_compacted_hour_of_snapshots_answers_its_latest() {
    let dir = scratch("timeline-live-columnar");
    let writer = otelprof_store::columnar::ColumnarWriter::open(&dir).unwrap();
    for m in 0..6 {
        let decoded = otel_bridge::otlp::decode(&live_snapshot(m, m + 1)).unwrap();
        writer.write(&decoded, T0 + m * MINUTE).unwrap();
    }
    drop(writer);
    let whole = || {
        let spec = Spec::new(Some(ProfileType::Live), &Selector::default());
        let source = open(&dir)().unwrap().use_rollups(false, None);
        query::merge(&source, spec).unwrap().0.total()
    };
    assert_eq!(whole(), 6e6);
    compact(&dir, T0 + 150 * MINUTE, 0).unwrap();
    assert_eq!(whole(), 6e6);
    let spec = Spec::new(Some(ProfileType::Live), &Selector::default());
    let t = timeline(open(&dir), spec, "span_name", 3).unwrap();
    let mb: Vec<f64> = t.series[0].1.iter().map(|v| v / 1e6).collect();
    assert_eq!(mb, [2.0, 4.0, 6.0], "{t:?}");
}

/// A wall profile of `PERIOD` starting at `start`: four threads' wall time, three quarters in
/// `app.Work.busy`, the rest in `app.Work.idle`, samples of 10 ms without timestamps (what the
/// agent sends unless `timestamps=on`).
fn steady_wall(start: i64) -> otel_bridge::Profile {
    use otel_bridge::{FrameKind, ProfileBuilder};
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("wall", "nanoseconds")],
        ("wall", "nanoseconds"),
        10_000_000,
    );
    let run = b.function("app.Main.run", "Main.java", 1);
    let busy = b.function("app.Work.busy", "Work.java", 10);
    let idle = b.function("app.Work.idle", "Work.java", 20);
    let (lr, lb, li) = (
        b.location(run, 2, FrameKind::Jvm),
        b.location(busy, 11, FrameKind::Jvm),
        b.location(idle, 21, FrameKind::Jvm),
    );
    let ep = b.str_label("span_name", "GET /steady");
    let samples = 4 * PERIOD / 10_000_000;
    b.add_sample(
        &[lb, lr],
        &[ep],
        &[samples * 3 / 4, samples * 3 / 4 * 10_000_000],
    );
    b.add_sample(&[li, lr], &[ep], &[samples / 4, samples / 4 * 10_000_000]);
    b.build(start, PERIOD)
}

/// The agent's period in the steady store.
const PERIOD: i64 = 10_000_000_000;
/// Where the steady store's first profile starts: on no tick, bucket edge or minute.
const STEADY_START: i64 = T0 + 3_700_000_000;

/// `profiles` steady wall profiles, back to back from [`STEADY_START`], as OTLP files in
/// `dir/files` and as a columnar store in `dir/store`.
fn steady_store(dir: &Path, profiles: i64) -> (std::path::PathBuf, std::path::PathBuf) {
    use otel_bridge::otlp::{EncodeOptions, ProfileId};
    let (files, store) = (dir.join("files"), dir.join("store"));
    std::fs::create_dir_all(&files).unwrap();
    let writer = otelprof_store::columnar::ColumnarWriter::open(&store).unwrap();
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_attribute(opentelemetry::KeyValue::new(
            "service.instance.id",
            "tomcat-1",
        ))
        .build();
    for k in 0..profiles {
        let start = STEADY_START + k * PERIOD;
        let bytes = otel_bridge::otlp::encode_to_vec(
            &steady_wall(start),
            &resource,
            ProfileId::from_random([k as u8 + 1; 16]),
            &EncodeOptions::default(),
        )
        .unwrap();
        std::fs::write(files.join(format!("{k:04}.otlp.pb")), &bytes).unwrap();
        let decoded = otel_bridge::otlp::decode(&bytes).unwrap();
        writer.write(&decoded, start + PERIOD).unwrap();
    }
    (files, store)
}

/// The wall time per second of each bucket of `t` (all series), and the mean over buckets.
fn rates(t: &Timeline) -> (Vec<f64>, f64) {
    let per_second: Vec<f64> = t
        .times
        .windows(2)
        .enumerate()
        .map(|(k, w)| {
            let v: f64 = t.series.iter().map(|(_, s)| s[k]).sum();
            v / ((w[1] - w[0]) as f64 / 1e9)
        })
        .collect();
    let mean = per_second.iter().sum::<f64>() / per_second.len().max(1) as f64;
    (per_second, mean)
}

/// Four threads' wall time a second: what every bucket of the steady store holds.
const STEADY_RATE: f64 = 4e9;

/// A steady load draws a flat timeline. Profiles of 10 s straddle the edges of buckets that
/// are not aligned with them; a profile's samples carry no timestamps, so each bucket takes
/// the share of the profile's value that its time overlaps (samples spread evenly over the
/// profile), not the whole value: counted whole, a bucket holding a period boundary held
/// two profiles' worth, a spike at every boundary.
#[test]
fn steady_wall_profiles_draw_a_flat_timeline() {
    let dir = scratch("timeline-steady");
    let (files, store) = steady_store(&dir, 90);
    let wall = |path: &Path, buckets: usize, selector: &Selector| {
        let spec = Spec::new(Some(ProfileType::Wall), selector);
        timeline(open(path), spec, "span_name", buckets).unwrap()
    };
    let all = Selector::default();
    let whole = {
        let spec = Spec::new(Some(ProfileType::Wall), &all);
        query::merge(&open(&files)().unwrap(), spec)
            .unwrap()
            .0
            .total()
    };
    assert_eq!(whole, 90.0 * 10.0 * STEADY_RATE);
    // Buckets of 7 s (900 s in 128), 3 s (90 s in 30) and 25 s (a range cut inside
    // profiles), none aligned with the profiles.
    let ninety = Selector {
        from: Some(STEADY_START + 20 * PERIOD + 1_300_000_000),
        to: Some(STEADY_START + 29 * PERIOD + 1_300_000_000),
        ..Selector::default()
    };
    let cases = [(&all, 128), (&ninety, 30), (&all, 36)];
    for (selector, buckets) in cases {
        let t = wall(&files, buckets, selector);
        let (per_second, mean) = rates(&t);
        assert!(
            per_second
                .iter()
                .all(|r| (r - STEADY_RATE).abs() <= 1e-6 * STEADY_RATE),
            "{buckets} buckets: not flat at {STEADY_RATE}/s (mean {mean}): {per_second:?}"
        );
        if selector.from.is_none() {
            let sum: f64 = t.series.iter().flat_map(|(_, s)| s).sum();
            assert!((sum - whole).abs() <= 1e-6 * whole, "{sum} vs {whole}");
        }
    }
    // Compacted: long windows are answered from the hours' series by whole ticks, which the
    // profiles straddle too.
    assert!(!compact(&store, STEADY_START + 4 * 60 * MINUTE, 0)
        .unwrap()
        .is_empty());
    for buckets in [60, 45] {
        let t = wall(&store, buckets, &all);
        let inner = &t.times[1..t.times.len() - 1];
        assert!(
            inner.iter().all(|x| x % PERIOD == 0),
            "not ticks: {inner:?}"
        );
        let (per_second, mean) = rates(&t);
        assert!(
            per_second
                .iter()
                .all(|r| (r - STEADY_RATE).abs() <= 1e-6 * STEADY_RATE),
            "series, {buckets} buckets: not flat at {STEADY_RATE}/s (mean {mean}): {per_second:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
