//! The timeline (`query::timeline`) over a real store: its buckets add up to the whole merge
//! of the selection, group by group, and the store gives the same timeline before compaction
//! (from the rows) and after (from the hours' series).
//!
//! A profile counts in every bucket its time overlaps, its samples without timestamps whole
//! in each: the sums are compared over buckets that no profile straddles (the store's
//! profiles are the first minute of every ten).
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
