//! The columnar store answers as the OTLP files it was written from: every query of the engine
//! (type, time, attribute terms, trace and span, group-by key, lines, counts) gives the same
//! merged table from both; retention deletes whole hours; a bad file is skipped, not fatal.

// The helpers that build the stores are test code too (clippy.toml allows these in #[test]s).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{build_store, canonical, cpu_profile, resource, scratch, MINUTE, T0};
use otel_bridge::otlp::{EncodeOptions, ProfileId};
use otelprof_store::columnar::{compact, retain, ColumnarSource, ColumnarWriter};
use otelprof_store::query::{self, Spec};
use otelprof_store::select::Measure;
use otelprof_store::{Merged, ProfileType, Selector, Source, StoreSource};

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

fn selector(terms: &str) -> Selector {
    let mut s = Selector::default();
    s.add_terms(terms, T0 + 2 * 60 * MINUTE).unwrap();
    s
}

/// Whether narrowing to `s` reads every partition of the test store.
fn narrowed_whole(s: &Selector) -> bool {
    s.from.is_none() && s.to.is_none() && !s.conditions.iter().any(|c| c.key == "service.name")
}

/// Type, terms, group-by key, measure, lines, spans.
type Case = (
    Option<ProfileType>,
    &'static str,
    Option<&'static str>,
    Measure,
    bool,
    bool,
);

#[test]
fn every_query_answers_as_the_otlp_files() {
    let dir = scratch("same");
    build_store(&dir);
    let files = Source::open(&[dir.join("profiles")], Box::new(|_, _| {})).unwrap();
    let all = ColumnarSource::open(&dir, Box::new(|p, e| panic!("{}: {e}", p.display()))).unwrap();
    // Two services × two hours.
    assert_eq!(all.partitions.len(), 4, "{:?}", all.partitions);

    let cases: Vec<Case> = vec![
        (
            Some(ProfileType::Cpu),
            "",
            None,
            Measure::Amount,
            false,
            false,
        ),
        (None, "", Some("span_name"), Measure::Amount, false, true),
        (
            Some(ProfileType::Cpu),
            "",
            Some("service.version"),
            Measure::Count,
            false,
            false,
        ),
        (
            Some(ProfileType::Cpu),
            "span_name=GET /b",
            None,
            Measure::Amount,
            true,
            false,
        ),
        (
            Some(ProfileType::Cpu),
            "span_name!=GET /b,service.name=shop",
            Some("thread.pool"),
            Measure::Amount,
            false,
            false,
        ),
        (
            Some(ProfileType::Cpu),
            "from=2025-01-31T12:30:20Z,to=2025-01-31T13:00:00Z",
            None,
            Measure::Amount,
            false,
            false,
        ),
        (
            Some(ProfileType::Cpu),
            "trace_id=0000000000000000000000000000abd1,span_id=0000000000000011",
            None,
            Measure::Amount,
            false,
            true,
        ),
        (
            Some(ProfileType::Cpu),
            "service.name=billing,from=2025-01-31T13:10:00Z",
            None,
            Measure::Amount,
            false,
            false,
        ),
        (
            Some(ProfileType::Alloc),
            "",
            None,
            Measure::Amount,
            false,
            false,
        ),
        (
            Some(ProfileType::Alloc),
            "",
            None,
            Measure::Count,
            true,
            false,
        ),
    ];
    let mut compared = 0;
    let mut native_checked = 0;
    for (ty, terms, by, measure, lines, spans) in cases {
        let sel = selector(terms);
        let mut spec = Spec::new(ty, &sel).view(measure, lines).by(by);
        if spans {
            spec = spec.spans();
        }
        let (a, ta) = query::merge(&files, spec.clone()).unwrap();
        // Native and kernel frames name the binary they are in, read either way.
        for (frame, file) in [("read", "libc.so.6"), ("ksys_read", "[kernel.kallsyms]")] {
            if let Some(i) = a.frames.iter().position(|f| f == frame) {
                assert_eq!(a.file(i as u32), file, "{frame}");
                native_checked += 1;
            }
        }
        let narrowed = ColumnarSource::open(&dir, Box::new(|_, _| {}))
            .unwrap()
            .narrow_to(&sel);
        let (b, tb) = query::merge(&narrowed, spec).unwrap();
        let what = format!("{ty:?} {terms:?} by {by:?} {measure:?} lines={lines}");
        assert_eq!(ta, tb, "{what}");
        assert!(a.total() > 0.0, "{what}: the case selects nothing");
        assert_eq!(canonical(&a), canonical(&b), "{what}");
        assert_eq!(
            (a.sample_type.as_str(), a.unit.as_str()),
            (b.sample_type.as_str(), b.unit.as_str()),
            "{what}"
        );
        assert_eq!(a.profiles_used, b.profiles_used, "{what}");
        // Profiles looked at: all of them from the files; from the columnar store, those of
        // the partitions the selection's service and time can touch.
        if narrowed_whole(&sel) {
            assert_eq!(
                (a.profiles_seen, a.other_type),
                (b.profiles_seen, b.other_type),
                "{what}"
            );
        } else {
            assert!(b.profiles_seen < a.profiles_seen, "{what}");
        }
        assert_eq!(a.window, b.window, "{what}");
        assert_eq!(sorted(&a.instances), sorted(&b.instances), "{what}");
        let spans = |m: &Merged| {
            let mut v: Vec<_> = m
                .spans
                .iter()
                .map(|(l, s)| {
                    let id = (l.trace_id_hex(), l.span_id_hex());
                    (id, s.value as i64, s.first, s.last, s.window)
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(spans(&a), spans(&b), "{what}");
        compared += 1;
    }
    assert_eq!(compared, 10);
    assert!(
        native_checked >= 2,
        "no case had the native and kernel frames"
    );

    // A 20-minute window of one service reads its one (or two) hours, not the rest.
    let narrow = ColumnarSource::open(&dir, Box::new(|_, _| {}))
        .unwrap()
        .narrow_to(&selector(
            "service.name=shop,from=2025-01-31T13:10:00Z,to=2025-01-31T13:30:00Z",
        ));
    let hours: Vec<i64> = narrow
        .selected()
        .iter()
        .map(|p| (p.hour - T0) / (60 * MINUTE))
        .collect();
    assert_eq!(hours, [0, 1]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stacks_are_stored_once_per_partition() {
    let dir = scratch("dedup");
    build_store(&dir);
    let part = dir.join("columnar/service=shop/hour=2025-01-31T12");
    let names: Vec<String> = std::fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let samples = names.iter().filter(|n| n.starts_with("samples-")).count();
    let stacks = names.iter().filter(|n| n.starts_with("stacks-")).count();
    // Minutes 0..60 of two JVMs (one with an allocation request too, one with an empty
    // profile once): 19 requests; stacks
    // only where a request brought new ones (the first of each JVM and type).
    assert_eq!(samples, 19, "{names:?}");
    assert!(stacks > 0 && stacks <= 4, "{names:?}");
    // A writer opened anew (a restart) reads the stored ids back and adds no stacks file.
    let writer = ColumnarWriter::open(&dir).unwrap();
    let bytes = otel_bridge::otlp::encode_to_vec(
        &cpu_profile(0, 7),
        &resource(0),
        ProfileId::from_random([9; 16]),
        &EncodeOptions::default(),
    )
    .unwrap();
    let written = writer
        .write(&otel_bridge::otlp::decode(&bytes).unwrap(), T0)
        .unwrap();
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(written[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("samples-"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn retention_deletes_whole_hours_and_bad_files_are_skipped() {
    let dir = scratch("retain");
    build_store(&dir);
    // Garbage posing as a samples file: reported, and the rest still answers. Failures are
    // reported in path order (hour 12 before hour 13).
    std::fs::write(
        dir.join("columnar/service=shop/hour=2025-01-31T13/samples-0-bad.parquet"),
        b"PAR1 not really PAR1",
    )
    .unwrap();
    // A well-formed Parquet file of the other table posing as samples: named, not read.
    let part = dir.join("columnar/service=shop/hour=2025-01-31T12");
    let stacks_file = std::fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("stacks-")
        })
        .unwrap();
    std::fs::copy(&stacks_file, part.join("samples-0-stacks.parquet")).unwrap();
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = heard.clone();
    let source = ColumnarSource::open(
        &dir,
        Box::new(move |p, e| {
            log.lock().unwrap().push(format!(
                "{}: {}",
                p.file_name().unwrap().to_string_lossy(),
                otelprof_store::chain(e)
            ))
        }),
    )
    .unwrap();
    let spec = Spec::new(Some(ProfileType::Cpu), &Selector::default());
    let (m, _) = query::merge(&source, spec).unwrap();
    assert_eq!(m.profiles_used, 27);
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(
        heard[1].starts_with("samples-0-bad.parquet: not a file of the columnar store"),
        "{heard:?}"
    );
    assert_eq!(
        heard[0],
        "samples-0-stacks.parquet: not a file of the columnar store: no column profile"
    );

    // At 14:30 with a retention of 90 minutes, the hour 12:00-13:00 has expired (both
    // services), 13:00-14:00 has not.
    let now = T0 + 150 * MINUTE;
    let deleted = retain(&dir, 90 * MINUTE, now).unwrap();
    let names: Vec<String> = deleted
        .iter()
        .map(|p| {
            p.strip_prefix(dir.join("columnar"))
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "service=billing/hour=2025-01-31T12",
            "service=shop/hour=2025-01-31T12"
        ]
    );
    let left = ColumnarSource::open(&dir, Box::new(|_, _| {})).unwrap();
    let hours: Vec<String> = left
        .partitions
        .iter()
        .map(|p| format!("{} {}", p.service, (p.hour - T0) / (60 * MINUTE)))
        .collect();
    assert_eq!(hours, ["billing 1", "shop 1"]);
    assert!(std::fs::read_dir(dir.join("columnar/.tmp"))
        .unwrap()
        .next()
        .is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Merges `spec` from the columnar store of `dir`, narrowed to `sel`, with or without rollups.
fn columnar_merge(dir: &std::path::Path, sel: &Selector, spec: Spec, rollups: bool) -> Merged {
    columnar_merge_counted(dir, sel, spec, rollups).0
}

/// [`columnar_merge`], and how many partitions a rollup answered.
fn columnar_merge_counted(
    dir: &std::path::Path,
    sel: &Selector,
    spec: Spec,
    rollups: bool,
) -> (Merged, usize) {
    let spans = spec.spans;
    let by = spec.group_by.clone();
    let mut source = ColumnarSource::open(dir, Box::new(|p, e| panic!("{}: {e}", p.display())))
        .unwrap()
        .narrow_to(sel);
    if rollups {
        source = source.use_rollups(spans, by.as_deref());
    }
    let merged = query::merge(&source, spec).unwrap().0;
    (merged, source.derived_reads())
}

/// What rollups must keep: stacks, values, counts, groups, type, unit, window, instances.
fn same_answer(a: &Merged, b: &Merged, what: &str) {
    assert!(a.total() > 0.0, "{what}: selects nothing");
    assert_eq!(canonical(a), canonical(b), "{what}");
    assert_eq!(
        (&a.sample_type, &a.unit),
        (&b.sample_type, &b.unit),
        "{what}"
    );
    assert_eq!(a.window, b.window, "{what}");
    assert_eq!(sorted(&a.instances), sorted(&b.instances), "{what}");
}

/// Type, terms, group-by key, measure, spans, whether the rollup of some hour answers.
type RollupCase = (
    ProfileType,
    &'static str,
    Option<&'static str>,
    Measure,
    bool,
    bool,
);

fn rollup_cases() -> Vec<RollupCase> {
    vec![
        (ProfileType::Cpu, "", None, Measure::Amount, false, true),
        (
            ProfileType::Cpu,
            "",
            Some("span_name"),
            Measure::Count,
            false,
            true,
        ),
        (
            ProfileType::Cpu,
            "",
            Some("thread.pool"),
            Measure::Amount,
            false,
            true,
        ),
        (
            ProfileType::Cpu,
            "service.version=1.0",
            None,
            Measure::Amount,
            false,
            true,
        ),
        (
            ProfileType::Cpu,
            "span_name!=GET /b",
            Some("service.version"),
            Measure::Amount,
            false,
            true,
        ),
        (
            ProfileType::Cpu,
            "from=2025-01-31T12:00:00Z,to=2025-01-31T13:00:00Z",
            None,
            Measure::Amount,
            false,
            true,
        ),
        (ProfileType::Alloc, "", None, Measure::Amount, false, true),
        (
            ProfileType::Alloc,
            "",
            Some("service.name"),
            Measure::Count,
            false,
            true,
        ),
        // Whole slots of hour 12 (6 minutes each; the profile before 12:06 ends before it):
        // answered from the slot rollup alone.
        (
            ProfileType::Cpu,
            "from=2025-01-31T12:06:00Z,to=2025-01-31T12:42:00Z",
            Some("span_name"),
            Measure::Amount,
            false,
            true,
        ),
        // A cut inside the profile of 12:10 (inside timestamped samples): its slot from the
        // rows, the other slots from the slot rollup.
        (
            ProfileType::Cpu,
            "from=2025-01-31T12:10:30Z,to=2025-01-31T12:48:00Z",
            None,
            Measure::Count,
            false,
            true,
        ),
        // Needs what the rollup drops: a time cut inside samples' timestamps (hour 12 from
        // its rows, hour 13 from its rollup), a trace, per-span statistics.
        (
            ProfileType::Cpu,
            "from=2025-01-31T12:30:20Z",
            None,
            Measure::Amount,
            false,
            true,
        ),
        (
            ProfileType::Cpu,
            "trace_id=0000000000000000000000000000abd1",
            None,
            Measure::Amount,
            false,
            false,
        ),
        // Per-thread attributes, which the rollup drops (it keeps their pools).
        (
            ProfileType::Cpu,
            "",
            Some("thread.name"),
            Measure::Amount,
            false,
            false,
        ),
        (
            ProfileType::Cpu,
            "thread.name=exec-1",
            None,
            Measure::Amount,
            false,
            false,
        ),
        (
            ProfileType::Cpu,
            "thread.pool=exec-N",
            Some("thread.pool"),
            Measure::Count,
            false,
            true,
        ),
        (ProfileType::Cpu, "", None, Measure::Amount, true, false),
    ]
}

#[test]
fn compacted_hours_answer_from_rollups_as_from_sample_rows() {
    let dir = scratch("rollup");
    build_store(&dir);
    let cases = rollup_cases();
    let spec_of = |c: &RollupCase, sel: &Selector| {
        let mut spec = Spec::new(Some(c.0), sel).view(c.3, false).by(c.2);
        if c.4 {
            spec = spec.spans();
        }
        spec
    };
    let before: Vec<Merged> = cases
        .iter()
        .map(|c| {
            let sel = selector(c.1);
            columnar_merge(&dir, &sel, spec_of(c, &sel), false)
        })
        .collect();
    // At 14:30 both hours are closed; with 40 minutes of grace only 12:00-13:00 is.
    let compacted = compact(&dir, T0 + 150 * MINUTE, 40 * MINUTE).unwrap();
    assert_eq!(compacted.len(), 2, "{compacted:?}");
    let compacted = compact(&dir, T0 + 150 * MINUTE, 0).unwrap();
    assert_eq!(compacted.len(), 2, "{compacted:?}");
    assert!(compact(&dir, T0 + 150 * MINUTE, 0).unwrap().is_empty());
    for part in ColumnarSource::open(&dir, Box::new(|_, _| {}))
        .unwrap()
        .partitions
    {
        let mut names: Vec<String> = std::fs::read_dir(&part.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .map(|n| n.split('-').take(2).collect::<Vec<_>>().join("-"))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "rollup-1738333800000000000",
                "samples-compacted",
                "series-1738333800000000000",
                "slots-1738333800000000000",
                "spans-1738333800000000000",
                "stacks-compacted"
            ]
        );
    }
    for (c, a) in cases.iter().zip(&before) {
        let sel = selector(c.1);
        let what = format!("{c:?}");
        let rows = columnar_merge(&dir, &sel, spec_of(c, &sel), false);
        same_answer(a, &rows, &what);
        assert_eq!(
            a.profiles_used, rows.profiles_used,
            "{what}: compacted rows"
        );
        // Profiles looked at: with a time window, only the row groups it can touch are read,
        // and a compacted file's groups hold more profiles than one request's file.
        if sel.from.is_none() && sel.to.is_none() {
            assert_eq!(
                a.profiles_seen, rows.profiles_seen,
                "{what}: compacted rows"
            );
        }
        let (rolled, derived) = columnar_merge_counted(&dir, &sel, spec_of(c, &sel), true);
        same_answer(a, &rolled, &what);
        assert_eq!(derived > 0, c.5, "{what}: answered from a rollup");
        // A rollup profile stands for an hour of one JVM's profiles of a type, and counts
        // for them.
        assert_eq!(rolled.profiles_used, rows.profiles_used, "{what}: rollups");
        if sel.from.is_none() && sel.to.is_none() {
            assert_eq!(rolled.profiles_seen, rows.profiles_seen, "{what}: rollups");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

type SeriesAnswer = (Vec<(String, i64, i64)>, String, Option<(i64, i64)>);

/// What a series keeps of a merge: per group, value and count; type, unit, window,
/// instances and the profiles used.
fn series_answer(m: &Merged) -> SeriesAnswer {
    let mut groups: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for s in &m.stacks {
        let g = groups.entry(m.group(s.group).to_owned()).or_default();
        g.0 += s.value;
        g.1 += s.count;
    }
    let groups = groups
        .into_iter()
        .map(|(g, (v, c))| (g, (v * 1000.0).round() as i64, (c * 1000.0).round() as i64))
        .filter(|g| g.1 != 0 || g.2 != 0)
        .collect();
    let head = format!(
        "{} {} {:?} used {}",
        m.sample_type,
        m.unit,
        sorted(&m.instances),
        m.profiles_used
    );
    (groups, head, m.window)
}

#[test]
fn compacted_hours_answer_timelines_and_pickers_from_series() {
    let dir = scratch("series");
    build_store(&dir);
    // Cuts on the series' 10-second ticks (12:30:20 falls inside timestamped samples).
    let cases: Vec<(ProfileType, &str, Option<&str>, Measure)> = vec![
        (ProfileType::Cpu, "", Some("span_name"), Measure::Amount),
        (ProfileType::Cpu, "", Some("span_name"), Measure::Count),
        (ProfileType::Cpu, "", Some("thread.pool"), Measure::Amount),
        (
            ProfileType::Cpu,
            "",
            Some("service.version"),
            Measure::Amount,
        ),
        (
            ProfileType::Cpu,
            "span_name!=GET /b,from=2025-01-31T12:30:20Z",
            Some("span_name"),
            Measure::Amount,
        ),
        (
            ProfileType::Cpu,
            "from=2025-01-31T12:10:00Z,to=2025-01-31T12:30:20Z",
            Some("service.instance.id"),
            Measure::Count,
        ),
        (ProfileType::Alloc, "", Some("service.name"), Measure::Count),
        (ProfileType::Alloc, "", None, Measure::Amount),
    ];
    let merge = |c: &(ProfileType, &str, Option<&str>, Measure), series: bool| {
        let sel = selector(c.1);
        let mut source =
            ColumnarSource::open(&dir, Box::new(|p, e| panic!("{}: {e}", p.display())))
                .unwrap()
                .narrow_to(&sel);
        if series {
            source = source.use_series(c.2);
        }
        let spec = Spec::new(Some(c.0), &sel).view(c.3, false).by(c.2);
        query::merge(&source, spec).unwrap().0
    };
    let keys: Vec<String> = ["service.version", "span_name", "thread.pool"]
        .map(str::to_owned)
        .to_vec();
    let present = |series: bool| {
        let mut source = ColumnarSource::open(&dir, Box::new(|_, _| {})).unwrap();
        if series {
            source = source.use_series(None);
        }
        query::present(&source, &keys, 100)
    };
    let before: Vec<Merged> = cases.iter().map(|c| merge(c, false)).collect();
    let values = present(false);
    assert!(values.0.iter().all(|v| !v.is_empty()), "{values:?}");
    compact(&dir, T0 + 150 * MINUTE, 0).unwrap();
    for (c, a) in cases.iter().zip(&before) {
        let b = merge(c, true);
        assert!(a.total() > 0.0, "{c:?}: selects nothing");
        assert_eq!(series_answer(a), series_answer(&b), "{c:?}");
        // The GC thread's role frame names its group when the key is a span label.
        if c.2 == Some("span_name") {
            assert!(
                b.groups.iter().any(|g| g == "[GC]"),
                "{c:?}: {:?}",
                b.groups
            );
        }
        // Read from the series: no stack other than a role's.
        assert!(b.stacks.iter().all(|s| s.frames.len() <= 1), "{c:?}");
    }
    assert_eq!(present(true), values);
    // Grouped by what the series drops (a thread's name): read from the rows.
    let by_thread = (ProfileType::Cpu, "", Some("thread.name"), Measure::Amount);
    let threads = merge(&by_thread, true);
    assert!(
        threads.groups.iter().any(|g| g == "exec-1"),
        "{:?}",
        threads.groups
    );
    assert!(threads.stacks.iter().any(|s| s.frames.len() > 1));
    // A focus is decided on frames, which the series drop: read from the rows, a timeline of
    // a focused selection is the focused merge's.
    let focused_timeline = |series: bool| {
        let mut sel = selector("");
        sel.focus
            .include
            .push(otelprof_store::focus::Glob::parse("app.Work.step1").unwrap());
        let mut source = ColumnarSource::open(&dir, Box::new(|_, _| {}))
            .unwrap()
            .narrow_to(&sel);
        if series {
            source = source.use_series(Some("span_name"));
        }
        let spec = Spec::new(Some(ProfileType::Cpu), &sel).by(Some("span_name"));
        series_answer(&query::merge(&source, spec).unwrap().0)
    };
    let focused = focused_timeline(false);
    let groups: Vec<&str> = focused.0.iter().map(|g| g.0.as_str()).collect();
    assert!(
        groups.contains(&"GET /b") && !groups.contains(&"GET /a"),
        "{focused:?}"
    );
    assert_eq!(focused_timeline(true), focused);
    // A store compacted before series existed gets them on the next pass, without being
    // compacted again.
    let mut removed = 0;
    for part in ColumnarSource::open(&dir, Box::new(|_, _| {}))
        .unwrap()
        .partitions
    {
        for e in std::fs::read_dir(&part.dir).unwrap() {
            let path = e.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("series-")
            {
                std::fs::remove_file(path).unwrap();
                removed += 1;
            }
        }
    }
    assert_eq!(removed, 4);
    assert_eq!(compact(&dir, T0 + 151 * MINUTE, 0).unwrap().len(), 4);
    assert!(compact(&dir, T0 + 152 * MINUTE, 0).unwrap().is_empty());
    for (c, a) in cases.iter().zip(&before) {
        assert_eq!(series_answer(a), series_answer(&merge(c, true)), "{c:?}");
    }
    // The series has no trace links: a trace is answered from the sample rows.
    let traced = selector("trace_id=0000000000000000000000000000abc1");
    let spec = Spec::new(Some(ProfileType::Cpu), &traced);
    let rows = query::merge(
        &ColumnarSource::open(&dir, Box::new(|_, _| {}))
            .unwrap()
            .narrow_to(&traced),
        spec.clone(),
    )
    .unwrap()
    .0;
    let series = query::merge(
        &ColumnarSource::open(&dir, Box::new(|_, _| {}))
            .unwrap()
            .narrow_to(&traced)
            .use_series(None),
        spec,
    )
    .unwrap()
    .0;
    assert!(rows.total() > 0.0);
    assert_eq!(canonical(&rows), canonical(&series));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupted_compaction_leaves_every_hour_readable_and_counted_once() {
    let cases = rollup_cases();
    for steps in 0..otelprof_store::columnar::compact::STEPS {
        let dir = scratch(&format!("crash{steps}"));
        build_store(&dir);
        let answers = |rollups: bool| -> Vec<Merged> {
            cases
                .iter()
                .map(|c| {
                    let sel = selector(c.1);
                    let spec = Spec::new(Some(c.0), &sel).view(c.3, false).by(c.2);
                    columnar_merge(&dir, &sel, spec, rollups)
                })
                .collect()
        };
        let before = answers(false);
        let root = dir.join("columnar");
        for part in ColumnarSource::open(&dir, Box::new(|_, _| {}))
            .unwrap()
            .partitions
        {
            // The process dies after `steps` changes: no cleanup runs.
            let _ = otelprof_store::columnar::compact::compact_partition(
                &root,
                &part.dir,
                T0 + 150 * MINUTE,
                steps,
            )
            .unwrap();
        }
        for (rollups, after) in [(false, answers(false)), (true, answers(true))] {
            for (c, (a, b)) in cases.iter().zip(before.iter().zip(&after)) {
                let what = format!("after {steps} steps, rollups {rollups}: {c:?}");
                same_answer(a, b, &what);
                let sel = selector(c.1);
                if !rollups && sel.from.is_none() && sel.to.is_none() {
                    assert_eq!(a.profiles_seen, b.profiles_seen, "{what}");
                }
                assert_eq!(a.profiles_used, b.profiles_used, "{what}");
            }
        }
        // A restart: the writer clears `.tmp/`, compaction runs again and finishes.
        drop(ColumnarWriter::open(&dir).unwrap());
        assert_eq!(compact(&dir, T0 + 150 * MINUTE, 0).unwrap().len(), 4);
        for (c, (a, b)) in cases.iter().zip(before.iter().zip(&answers(true))) {
            same_answer(a, b, &format!("after {steps} steps and a rerun: {c:?}"));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Per span: value and count (in thousandths), endpoints, first and last timestamps, and
/// the window of its profiles; with the merge's total, instances and profiles used.
type SpansAnswer = (
    Vec<(
        String,
        i64,
        i64,
        Vec<String>,
        Option<i64>,
        Option<i64>,
        Option<(i64, i64)>,
    )>,
    i64,
    Vec<String>,
    usize,
);

fn spans_answer(m: &Merged) -> SpansAnswer {
    let mut rows: Vec<_> = m
        .spans
        .iter()
        .map(|(link, s)| {
            (
                format!("{}/{}", link.trace_id_hex(), link.span_id_hex()),
                (s.value * 1000.0).round() as i64,
                (s.count * 1000.0).round() as i64,
                sorted(&s.endpoints),
                s.first,
                s.last,
                s.window,
            )
        })
        .collect();
    rows.sort();
    (
        rows,
        (m.total() * 1000.0).round() as i64,
        sorted(&m.instances),
        m.profiles_used,
    )
}

#[test]
fn compacted_hours_answer_the_list_of_traces_from_spans() {
    let dir = scratch("spans");
    build_store(&dir);
    let cases: Vec<(ProfileType, &str)> = vec![
        (ProfileType::Cpu, ""),
        (ProfileType::Cpu, "span_name=GET /a"),
        (ProfileType::Cpu, "service.version=2.0"),
        (ProfileType::Cpu, "thread.pool=exec-N"),
        (
            ProfileType::Cpu,
            "trace_id=0000000000000000000000000000abc1",
        ),
        (ProfileType::Cpu, "to=2025-01-31T13:00:00Z"),
        (ProfileType::Alloc, ""),
    ];
    let merge = |c: &(ProfileType, &str), spans: bool| {
        let sel = selector(c.1);
        let mut source =
            ColumnarSource::open(&dir, Box::new(|p, e| panic!("{}: {e}", p.display())))
                .unwrap()
                .narrow_to(&sel);
        if spans {
            source = source.use_spans(None);
        }
        let spec = Spec::new(Some(c.0), &sel).spans();
        let merged = query::merge(&source, spec).unwrap().0;
        (merged, source.derived_reads())
    };
    let before: Vec<Merged> = cases.iter().map(|c| merge(c, false).0).collect();
    assert!(before[0].spans.len() > 6, "{:?}", before[0].spans.len());
    assert!(
        before[0].spans.values().any(|s| s.first.is_some()),
        "no span has timestamps"
    );
    compact(&dir, T0 + 150 * MINUTE, 0).unwrap();
    for (c, a) in cases.iter().zip(&before) {
        let (b, derived) = merge(c, true);
        assert!(derived > 0, "{c:?}: not answered from spans");
        assert!(a.total() > 0.0, "{c:?}: selects nothing");
        assert_eq!(spans_answer(a), spans_answer(&b), "{c:?}");
        assert!(b.stacks.iter().all(|s| s.frames.len() <= 1), "{c:?}");
    }
    // Per-thread names are not in spans: such a question reads the rows.
    let (_, derived) = merge(&(ProfileType::Cpu, "thread.name=exec-1"), true);
    assert_eq!(derived, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A diff's noise estimate of a 1 h side cuts it in slices of whole 6-minute slots (here 8 of
/// the hour's 51 minutes of profiles): on a compacted hour they come from its slot rollup and
/// add up as the sample rows' do.
#[test]
fn slices_of_whole_slots_come_from_the_slot_rollup() {
    use otelprof_store::query::slices::{merge_slices, SliceSpec};
    let dir = scratch("slots");
    build_store(&dir);
    let sel = selector("from=2025-01-31T12:00:00Z,to=2025-01-31T13:00:00Z,service.name=shop");
    let side = |source: &StoreSource| {
        let (m, _) = query::merge(source, Spec::new(Some(ProfileType::Cpu), &sel)).unwrap();
        SliceSpec {
            ty: ProfileType::Cpu,
            measure: Measure::Amount,
            lines: false,
            selector: sel.clone(),
            window: m.window.unwrap(),
            slices: 8,
        }
    };
    let open = || {
        StoreSource::open(std::slice::from_ref(&dir), Box::new(|_, _| {}))
            .unwrap()
            .narrow_to(&sel)
    };
    let totals = |source: &StoreSource| -> Vec<i64> {
        let spec = side(source);
        assert!(spec.whole_slots() && !spec.whole_hours());
        let sliced = merge_slices(source, std::slice::from_ref(&spec)).unwrap();
        sliced.slices[0]
            .iter()
            .map(|m| (m.total() * 1000.0).round() as i64)
            .collect()
    };
    let rows = totals(&open());
    assert!(rows.iter().filter(|t| **t > 0).count() >= 5, "{rows:?}");
    compact(&dir, T0 + 150 * MINUTE, 0).unwrap();
    assert_eq!(totals(&open()), rows, "compacted, rows");
    let slots = ColumnarSource::open(&dir, Box::new(|_, _| {}))
        .unwrap()
        .narrow_to(&sel)
        .use_slots(None);
    let spec = {
        let (m, _) = query::merge(&slots, Spec::new(Some(ProfileType::Cpu), &sel)).unwrap();
        SliceSpec {
            ty: ProfileType::Cpu,
            measure: Measure::Amount,
            lines: false,
            selector: sel.clone(),
            window: m.window.unwrap(),
            slices: 8,
        }
    };
    let sliced = merge_slices(&slots, std::slice::from_ref(&spec)).unwrap();
    let from_slots: Vec<i64> = sliced.slices[0]
        .iter()
        .map(|m| (m.total() * 1000.0).round() as i64)
        .collect();
    assert_eq!(from_slots, rows, "from the slot rollup");
    assert!(slots.derived_reads() > 0, "the slot rollup answered");

    // One pass for the merge and the slices: a guess from the selection's range alone does
    // not cut like the merge (the hour's profiles fill 51 minutes of it), one from the
    // merge's window does, and gives the same merge and slices as two passes.
    use otelprof_store::query::slices::merge_many_and_slices;
    let spec_of = |window| SliceSpec {
        window,
        ..spec.clone()
    };
    let from_range = spec_of((sel.from.unwrap(), sel.to.unwrap()));
    assert!(!from_range.cuts_like(&spec));
    let from_window = spec_of(spec.window);
    assert!(from_window.cuts_like(&spec));
    let (two_pass, _) = query::merge(&slots, Spec::new(Some(ProfileType::Cpu), &sel)).unwrap();
    let ([(one_pass, ty)], sliced) = merge_many_and_slices(
        &slots,
        &[Spec::new(Some(ProfileType::Cpu), &sel)],
        std::slice::from_ref(&from_window),
    )
    .unwrap();
    assert_eq!(ty, ProfileType::Cpu);
    assert_eq!(one_pass.total(), two_pass.total());
    assert_eq!(one_pass.profiles_used, two_pass.profiles_used);
    assert_eq!(one_pass.window, two_pass.window);
    let one_pass_slices: Vec<i64> = sliced.slices[0]
        .iter()
        .map(|m| (m.total() * 1000.0).round() as i64)
        .collect();
    assert_eq!(one_pass_slices, rows, "one pass");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `serve` reads the stacks of the newest partitions once after it starts: every partition
/// with stacks, and nothing of a directory that holds no columnar store.
#[test]
fn the_newest_partitions_stacks_are_read_ahead() {
    let dir = scratch("warm");
    build_store(&dir);
    let partitions = ColumnarSource::open(&dir, Box::new(|_, _| {}))
        .unwrap()
        .partitions
        .len();
    assert!(partitions >= 2, "{partitions}");
    assert_eq!(otelprof_store::columnar::warm_stacks(&dir), partitions);
    let empty = scratch("warm-empty");
    assert_eq!(otelprof_store::columnar::warm_stacks(&empty), 0);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}
