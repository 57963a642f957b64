//! A small store of OTLP files and its columnar form, written from the same decoded requests:
//! what the columnar tests compare.
// Test code (clippy.toml allows these in #[test]s; these helpers are outside them).
#![allow(clippy::unwrap_used, clippy::panic, dead_code)]

use std::path::{Path, PathBuf};

use opentelemetry::KeyValue;
use otel_bridge::otlp::{EncodeOptions, ProfileId};
use otel_bridge::{FrameKind, Link, Profile, ProfileBuilder};
use otelprof_store::columnar::ColumnarWriter;
use otelprof_store::Merged;

pub const T0: i64 = 1_738_324_800_000_000_000; // 2025-01-31T12:00:00Z
pub const MINUTE: i64 = 60_000_000_000;

pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("otelprof-col-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CPU profile of minute `m` of instance `i`: three endpoints, nested frames, an inlined
/// and an unsymbolized location, trace links on some samples, timestamps on others, and a GC
/// thread's role frame.
pub fn cpu_profile(i: usize, m: i64) -> Profile {
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        10_000_000,
    );
    let main = b.function("app.Main.run", "Main.java", 1);
    let handler = b.function("app.Http.handle", "Http.java", 10);
    let fns: Vec<_> = (0..6)
        .map(|k| b.function(&format!("app.Work.step{k}"), "Work.java", 100))
        .collect();
    let lm = b.location(main, 5, FrameKind::Jvm);
    let lh = b.location(handler, 12, FrameKind::Jvm);
    for (k, f) in fns.iter().enumerate() {
        let endpoint = ["GET /a", "GET /b", "POST /c"][k % 3];
        let ep = b.str_label("span_name", endpoint);
        let th = b.str_label("thread.name", &format!("exec-{}", k % 2));
        let l1 = b.location(*f, 100 + k as i64, FrameKind::Jvm);
        let l2 = b.location(*f, 200 + k as i64, FrameKind::Jvm);
        let n = (i as i64 + 1) * (k as i64 + 2) + m % 3;
        let link = Link::from_hex(
            &format!("{:032x}", 0xabc0 + k as u128 + 16 * i as u128),
            &format!("{:016x}", 0x10 + k as u64),
        );
        b.add_linked_sample(&[l1, lh, lm], &[ep, th], link, &[n, n * 10_000_000], &[]);
        b.add_sample(&[l2, l1, lh, lm], &[ep], &[2, 20_000_000]);
        // Timestamps within the minute, so a time cut falls inside samples.
        let ts: Vec<i64> = (0..4)
            .map(|t| T0 + m * MINUTE + t * 15_000_000_000)
            .collect();
        // The first of them in a span, so its first and last timestamps are kept.
        let timed_link = (k == 0).then(|| {
            Link::from_hex(
                &format!("{:032x}", 0xdef0 + i as u128),
                &format!("{:016x}", 0x20 + m as u64),
            )
        });
        b.add_linked_sample(
            &[l2, lm],
            &[th],
            timed_link.flatten(),
            &[4, 40_000_000],
            &ts,
        );
    }
    // A thread the agent does not walk: one frame naming its role, no span.
    let gc = b.function("[GC]", "", 0);
    let lgc = b.location(gc, 0, FrameKind::Native);
    let gc_thread = b.str_label("thread.name", "GC Thread#0");
    b.add_sample(&[lgc], &[gc_thread], &[2, 20_000_000]);
    // Native and kernel code under Java: their file is the binary they are in.
    let libc = b.mapping(
        0x7100_0000..0x7200_0000,
        0,
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "",
    );
    let kernel = b.mapping(0xffff_0000_0000_0000..u64::MAX, 0, "[kernel.kallsyms]", "");
    let read = b.function("read", "", 0);
    let ksys_read = b.function("ksys_read", "", 0);
    let l_read = b.code_location(read, FrameKind::Native, 0x7100_0100, libc);
    let l_ksys = b.code_location(ksys_read, FrameKind::Kernel, 0xffff_0000_0000_1000, kernel);
    b.add_sample(&[l_ksys, l_read, lh, lm], &[], &[1, 10_000_000]);
    let native = b.location(main, 0, FrameKind::Native);
    b.add_sample(&[native, lm], &[], &[1, 10_000_000]);
    let mut p = b.build(T0 + m * MINUTE, MINUTE);
    // The native location becomes an address without symbols.
    let d = std::sync::Arc::make_mut(&mut p.dictionary);
    if let Some(loc) = d.locations.last_mut() {
        loc.lines = Default::default();
        loc.address = 0x7f00_1234;
    }
    p
}

pub fn alloc_profile(m: i64) -> Profile {
    let mut b = ProfileBuilder::new(
        &[("alloc_objects", "count"), ("alloc_space", "bytes")],
        ("alloc_space", "bytes"),
        524_288,
    );
    let f = b.function("app.Cache.put", "Cache.java", 1);
    let g = b.function("java.util.HashMap.resize", "HashMap.java", 1);
    let lf = b.location(f, 3, FrameKind::Jvm);
    let lg = b.location(g, 7, FrameKind::Jvm);
    b.add_sample(&[lg, lf], &[], &[3 + m, 4096 * (3 + m)]);
    b.add_sample(&[lf], &[], &[1, 512]);
    b.build(T0 + m * MINUTE, MINUTE)
}

pub fn resource(i: usize) -> opentelemetry_sdk::Resource {
    opentelemetry_sdk::Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", if i == 2 { "billing" } else { "shop" }),
            KeyValue::new("service.version", if i == 0 { "1.0" } else { "2.0" }),
            KeyValue::new("service.instance.id", format!("inst-{i}")),
        ])
        .build()
}

/// A store of OTLP files (three JVMs, two services, 90 minutes over two hours) and its
/// columnar form written from the same decoded requests.
pub fn build_store(dir: &Path) {
    let otlp = dir.join("profiles/2025-01-31");
    std::fs::create_dir_all(&otlp).unwrap();
    let writer = ColumnarWriter::open(dir).unwrap();
    let mut n = 0u8;
    for m in (0..90).step_by(10) {
        for i in 0..3 {
            let mut profiles = vec![cpu_profile(i, m)];
            if i == 0 && m == 20 {
                // A minute without samples still counts as a profile seen.
                profiles.push(
                    ProfileBuilder::new(
                        &[("samples", "count"), ("cpu", "nanoseconds")],
                        ("cpu", "nanoseconds"),
                        10_000_000,
                    )
                    .build(T0 + m * MINUTE + 1, MINUTE),
                );
            }
            if i == 1 {
                profiles.push(alloc_profile(m));
            }
            for p in profiles {
                n += 1;
                let bytes = otel_bridge::otlp::encode_to_vec(
                    &p,
                    &resource(i),
                    ProfileId::from_random([n; 16]),
                    &EncodeOptions {
                        timestamps: true,
                        ..EncodeOptions::default()
                    },
                )
                .unwrap();
                std::fs::write(otlp.join(format!("{n:04}.otlp.pb")), &bytes).unwrap();
                let decoded = otel_bridge::otlp::decode(&bytes).unwrap();
                writer.write(&decoded, T0 + m * MINUTE).unwrap();
            }
        }
    }
}

/// The merged table in a form that does not depend on the order profiles were met in.
pub fn canonical(m: &Merged) -> Vec<(String, Vec<String>, i64, i64)> {
    let mut rows: Vec<_> = m
        .stacks
        .iter()
        .map(|s| {
            (
                m.group(s.group).to_owned(),
                s.frames
                    .iter()
                    .map(|f| m.frame_label(*f).into_owned())
                    .collect(),
                (s.value * 1000.0).round() as i64,
                (s.count * 1000.0).round() as i64,
            )
        })
        .filter(|r| r.2 != 0 || r.3 != 0)
        .collect();
    rows.sort();
    rows
}
