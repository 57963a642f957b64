//! The list of traces (`query::traces`), answered an hour at a time with each hour's first
//! traces and those near its edges kept, is the list that adding up every trace of the
//! selection gives: on a store of two hours with many short traces (most pruned in their
//! hour), a few that cross the hour (kept at the edges), and a distributed trace in two
//! services; before and after compaction (sample rows, then spans).
// Test code (clippy.toml allows these in #[test]s; the helpers are outside them).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use common::{scratch, MINUTE, T0};
use opentelemetry::KeyValue;
use otel_bridge::{FrameKind, Link, Profile, ProfileBuilder};
use otelprof_primitives::rng::SplitMix64;
use otelprof_store::columnar::{compact, ColumnarWriter};
use otelprof_store::focus::{Focus, Glob};
use otelprof_store::query::traces::top_traces;
use otelprof_store::query::{self, Spec};
use otelprof_store::{ProfileType, Selector, StoreSource};

fn link(trace: u64, span: u64) -> Option<Link> {
    Link::from_hex(&format!("{trace:032x}"), &format!("{span:016x}"))
}

/// A minute's profile of `service`: `traces` short traces of its own (random time), and the
/// long traces `long` (all of its minutes).
fn profile(service: u64, minute: i64, rng: &mut SplitMix64, long: &[u64]) -> Profile {
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        10_000_000,
    );
    let f = b.function("app.Work.run", "Work.java", 1);
    let loc = b.location(f, 3, FrameKind::Jvm);
    // The long traces wait in a method of their own (what a focus picks or drops).
    let hold = b.function("app.Long.hold", "Long.java", 1);
    let long_loc = b.location(hold, 7, FrameKind::Jvm);
    let endpoints = [
        b.str_label("span_name", "GET /a"),
        b.str_label("span_name", "GET /b"),
    ];
    let start = T0 + minute * MINUTE;
    for t in 0..40u64 {
        let n = 1 + rng.below(30) as i64;
        let trace = (service << 48) | ((minute as u64) << 16) | t;
        let ep = endpoints[(t % 2) as usize];
        // Some with timestamps, which a time window can cut.
        let stamps: Vec<i64> = match t % 4 {
            0 => vec![start + 10 * SECOND, start + 40 * SECOND],
            1 => vec![start + 50 * SECOND],
            _ => Vec::new(),
        };
        b.add_linked_sample(
            &[loc],
            &[ep],
            link(trace, t + 1),
            &[n, n * 10_000_000],
            &stamps,
        );
    }
    // Samples in no trace count in the totals only.
    b.add_sample(&[loc], &[], &[3, 30_000_000]);
    for (k, &trace) in long.iter().enumerate() {
        b.add_linked_sample(
            &[long_loc, loc],
            &[endpoints[0]],
            link(trace, 100 + service * 10 + k as u64),
            &[2, 20_000_000],
            &[],
        );
    }
    // A trace across the hour whose halves are each below the hour's first short traces,
    // but whose whole is above them all.
    if service == 1 && (minute == 59 || minute == 60) {
        b.add_linked_sample(
            &[loc],
            &[endpoints[1]],
            link(0xed9e, 7),
            &[18, 180_000_000],
            &[],
        );
    }
    b.build(start, MINUTE)
}

const SECOND: i64 = 1_000_000_000;

fn resource(service: u64) -> opentelemetry_sdk::Resource {
    opentelemetry_sdk::Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", format!("svc{service}")),
            KeyValue::new("service.instance.id", format!("svc{service}-0")),
        ])
        .build()
}

/// Two hours (12:00-14:00) of two services, a profile a minute each. One distributed trace
/// runs in both services from 12:40 to 13:20 (so across the hour), one in svc1 only from
/// 12:50 to 13:10, and one in svc1 for a minute either side of 13:00.
fn build(dir: &std::path::Path) {
    let writer = ColumnarWriter::open(dir).unwrap();
    let mut rng = SplitMix64(11);
    for minute in 0..120 {
        for service in 1..=2u64 {
            let mut long = Vec::new();
            if (40..80).contains(&minute) {
                long.push(0xd157_0000);
            }
            if service == 1 && (50..70).contains(&minute) {
                long.push(0x1006_0000);
            }
            let p = profile(service, minute, &mut rng, &long);
            let bytes = otel_bridge::otlp::encode_to_vec(
                &p,
                &resource(service),
                otel_bridge::otlp::ProfileId::from_random([(minute as u8) | 1; 16]),
                &otel_bridge::otlp::EncodeOptions {
                    timestamps: true,
                    ..Default::default()
                },
            )
            .unwrap();
            let decoded = otel_bridge::otlp::decode(&bytes).unwrap();
            writer.write(&decoded, T0 + (minute + 1) * MINUTE).unwrap();
        }
    }
}

/// What a case does to its selector's focus.
type SetFocus = Box<dyn Fn(&mut Selector)>;

/// A trace as compared: id, time, spans, window.
type Row = (String, i64, usize, (i64, i64));

/// Every trace added up from one merge of all spans: (trace, value, spans, window), most
/// time first; and the merge's total.
fn brute_force(source: &StoreSource, sel: &Selector) -> (Vec<Row>, f64) {
    let (m, _) = query::merge(source, Spec::new(Some(ProfileType::Cpu), sel).spans()).unwrap();
    let mut by: BTreeMap<String, (f64, usize, (i64, i64))> = BTreeMap::new();
    for (l, s) in &m.spans {
        let e = by
            .entry(l.trace_id_hex())
            .or_insert((0.0, 0, (i64::MAX, i64::MIN)));
        e.0 += s.value;
        e.1 += 1;
        let (a, b) = s.window.unwrap();
        e.2 = (e.2 .0.min(a), e.2 .1.max(b));
    }
    let mut rows: Vec<_> = by
        .into_iter()
        .map(|(t, (v, n, w))| (t, v.round() as i64, n, w))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    (rows, m.total())
}

#[test]
fn the_list_of_traces_is_every_trace_added_up() {
    let dir = scratch("traces");
    build(&dir);
    let check = |what: &str, spans: bool| {
        // A window that cuts minutes (and so samples with timestamps), and a trace.
        let cut = format!(
            "from={},to={}",
            (T0 + 30 * MINUTE + 30 * SECOND) / SECOND,
            (T0 + 89 * MINUTE + 45 * SECOND) / SECOND
        );
        let trace = format!("trace_id={:032x}", 0xd157_0000u64);
        let endpoint_cut = format!("span_name=GET /a,{cut}");
        // A focus decides on each sample's stack: only the long traces hold app.Long.hold.
        let long = |list: fn(&mut Focus) -> &mut Vec<Glob>| {
            move |sel: &mut Selector| list(&mut sel.focus).push(Glob::parse("app.Long.*").unwrap())
        };
        let focuses: [(&str, SetFocus); 3] = [
            ("", Box::new(|_: &mut Selector| {})),
            (" --include app.Long.*", Box::new(long(|f| &mut f.include))),
            (" --exclude app.Long.*", Box::new(long(|f| &mut f.exclude))),
        ];
        let cases = [
            "",
            "service.name=svc1",
            "span_name=GET /b",
            &cut,
            &trace,
            &endpoint_cut,
        ];
        for (terms, (focus_text, focus)) in cases
            .iter()
            .flat_map(|t| focuses.iter().map(move |f| (*t, f)))
        {
            let terms_shown = format!("{terms}{focus_text}");
            let terms = &terms_shown;
            let mut sel = Selector::default();
            sel.add_terms(terms.split(" --").next().unwrap_or(""), T0)
                .unwrap();
            focus(&mut sel);
            let open = || {
                let s = StoreSource::open(std::slice::from_ref(&dir), Box::new(|_, _| {}))
                    .unwrap()
                    .narrow_to(&sel);
                if spans {
                    s.use_spans(None)
                } else {
                    s
                }
            };
            let (all, total) = brute_force(&open(), &sel);
            for limit in [1, 3, 10] {
                let t =
                    top_traces(&open(), Spec::new(Some(ProfileType::Cpu), &sel), limit).unwrap();
                let got: Vec<_> = t
                    .rows
                    .iter()
                    .map(|r| {
                        (
                            r.trace_id_hex(),
                            r.value.round() as i64,
                            r.spans,
                            r.profiles.unwrap(),
                        )
                    })
                    .collect();
                let want: Vec<_> = all.iter().take(limit).cloned().collect();
                assert_eq!(got, want, "{what}, {terms:?}, limit {limit}");
                assert_eq!(t.total, all.len(), "{what}, {terms:?}, limit {limit}");
                if all.is_empty() {
                    // The trace condition and the exclusion of its method: nothing left.
                    assert!(t.rows.is_empty(), "{what}, {terms:?}");
                    continue;
                }
                assert!(t.merged.total() > 0.0);
                assert!(
                    (t.merged.total() - total).abs() < 1e-6 * total,
                    "{what}, {terms:?}: total {} against {total}",
                    t.merged.total()
                );
            }
        }
        // The long traces and the one across the hour are the first three of the store; the
        // distributed one has a span in each service.
        let t = top_traces(
            &StoreSource::open(std::slice::from_ref(&dir), Box::new(|_, _| {})).unwrap(),
            Spec::new(Some(ProfileType::Cpu), &Selector::default()),
            3,
        )
        .unwrap();
        let ids: Vec<String> = t.rows.iter().map(|r| r.trace_id_hex()).collect();
        let hex = |t: u64| format!("{t:032x}");
        assert_eq!(
            ids,
            [hex(0xd157_0000), hex(0x1006_0000), hex(0xed9e)],
            "{what}"
        );
        let first = &t.rows[0];
        assert_eq!(first.spans, 2, "{what}");
        assert_eq!(first.endpoints, ["GET /a"], "{what}");
    };
    check("sample rows", false);
    compact(&dir, T0 + 3 * 60 * MINUTE, 0).unwrap();
    check("spans", true);
    let _ = std::fs::remove_dir_all(&dir);
}
