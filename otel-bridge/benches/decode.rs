//! The production OTLP decoder (`otlp::decode`, and the receiver's `otlp::check_request`)
//! against the prost-based reference decoder (`otlp::reference::decode`), on one realistic
//! request, in the same run.
//!
//! `cargo bench -p otel-bridge --bench decode`
//!
//! Criterion times each decoder on its own. On a shared machine, other work that starts
//! between two of criterion's measurements moves one figure and not the other; so the run ends
//! with the ratio measured in alternating rounds (fast, reference, fast, …), whose median is
//! what the decoder's doc comment states.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use opentelemetry::KeyValue;
use otel_bridge::otlp::{self, EncodeOptions, ProfileId};
use otel_bridge::{FrameKind, Link, LocationId, Profile, ProfileBuilder};
use otelprof_primitives::rng::SplitMix64 as Rng;

const STACKS: usize = 2_000;
const FUNCTIONS: usize = 2_400;
const THREADS: usize = 32;
const ENDPOINTS: usize = 24;
const LINKS: usize = 400;
const PERIOD: i64 = 10_000_000;

/// A period of a busy service: 2,000 distinct stacks of 20 to 40 frames under a few shared
/// roots (thread pools, a web framework), 2,400 functions in 150 files, thread names, endpoints
/// on most samples and trace links on some, and two allocation types beside CPU, so that the
/// request holds three OTLP profiles sharing one dictionary.
fn profile() -> Profile {
    let mut rng = Rng(0x07e1_9f0f);
    let mut b = ProfileBuilder::new(
        &[
            ("samples", "count"),
            ("cpu", "nanoseconds"),
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
        ],
        ("cpu", "nanoseconds"),
        PERIOD,
    );
    // Two or three call sites (lines) per function.
    let locations: Vec<Vec<LocationId>> = (0..FUNCTIONS)
        .map(|i| {
            let (package, class) = (i % 40, i % 150);
            let f = b.function(
                &format!("com.shop.p{package}.Class{class}.method{i}"),
                &format!("Class{class}.java"),
                10 + (i % 500) as i64,
            );
            let kind = if i % 97 == 0 {
                FrameKind::Native
            } else {
                FrameKind::Jvm
            };
            (0..2 + i % 2)
                .map(|l| b.location(f, 12 + (i % 500) as i64 + 7 * l as i64, kind))
                .collect()
        })
        .collect();
    let frame = |rng: &mut Rng, from: usize, to: usize| {
        let f = &locations[from + rng.index(to - from)];
        f[rng.index(f.len())]
    };
    // Roots: eight thread-pool and framework entry chains of ten frames each.
    let roots: Vec<Vec<LocationId>> = (0..8)
        .map(|r| (0..10).map(|i| locations[r * 10 + i][0]).collect())
        .collect();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| b.str_label("thread_name", &format!("http-nio-8080-exec-{t}")))
        .collect();
    let endpoints: Vec<_> = (0..ENDPOINTS)
        .map(|e| b.str_label("span_name", &format!("GET /api/v1/resource{e}/{{id}}")))
        .collect();
    let links: Vec<Link> = (0..LINKS)
        .map(|_| {
            let mut l = Link::default();
            l.trace_id
                .iter_mut()
                .for_each(|x| *x = rng.next_u64() as u8);
            l.span_id
                .iter_mut()
                .for_each(|x| *x = rng.next_u64() as u8 | 1);
            l
        })
        .collect();
    for _ in 0..STACKS {
        let depth = 20 + rng.index(21);
        let mut stack = roots[rng.index(roots.len())].clone();
        while stack.len() < depth {
            stack.push(frame(&mut rng, 80, FUNCTIONS));
        }
        stack.reverse(); // leaf first
                         // One to three samples per stack: different threads, endpoints, traces.
        for _ in 0..1 + rng.index(3) {
            let mut labels = vec![threads[rng.index(THREADS)]];
            if rng.index(10) < 7 {
                labels.push(endpoints[rng.index(ENDPOINTS)]);
            }
            let link = (rng.index(10) < 4).then(|| links[rng.index(LINKS)]);
            let n = 1 + rng.index(20) as i64;
            let objects = rng.index(4) as i64;
            b.add_linked_sample(
                &stack,
                &labels,
                link,
                &[n, n * PERIOD, objects, objects * 48],
                &[],
            );
        }
    }
    b.build(1_795_317_300_000_000_000, 60_000_000_000)
}

fn request() -> Vec<u8> {
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", "shop"),
            KeyValue::new("service.version", "1.5"),
            KeyValue::new("host.name", "box-1"),
            KeyValue::new("process.pid", 4242),
        ])
        .build();
    let p = profile();
    let bytes = otlp::encode_to_vec(
        &p,
        &resource,
        ProfileId::from_random([7; 16]),
        &EncodeOptions::default(),
    )
    .unwrap_or_default();
    let r = otlp::reference::decode(&bytes).unwrap_or_default();
    let stacks: std::collections::HashSet<_> = p.samples.iter().map(|s| s.stack).collect();
    let frames: usize = p.samples.iter().map(|s| p.stack(s.stack).len()).sum();
    println!(
        "request: {} bytes, {} OTLP profiles, {} samples, {} distinct stacks of {:.1} frames on \
         average, {} strings, {} functions, {} locations",
        bytes.len(),
        r.len(),
        r.iter().map(|d| d.profile.samples.len()).sum::<usize>(),
        stacks.len(),
        frames as f64 / p.samples.len().max(1) as f64,
        p.strings().len(),
        p.functions().len(),
        p.locations().len(),
    );
    bytes
}

fn fast(bytes: &[u8]) -> usize {
    otlp::decode(bytes).map_or(0, |v| v.len())
}

fn reference(bytes: &[u8]) -> usize {
    otlp::reference::decode(bytes).map_or(0, |v| v.len())
}

fn check(bytes: &[u8]) -> usize {
    otlp::check_request(bytes).map_or(0, |c| c.samples)
}

/// Times `n` calls of `f`.
fn time(n: usize, bytes: &[u8], f: fn(&[u8]) -> usize) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        black_box(f(black_box(bytes)));
    }
    start.elapsed()
}

/// The reference's time over the fast decoder's (and over the check's) in alternating rounds
/// of about 0.2 s each: median, and the lowest and highest round.
fn alternating_ratio(bytes: &[u8]) {
    let per_call = |f: fn(&[u8]) -> usize| time(3, bytes, f) / 3;
    let n = |f| (Duration::from_millis(200).as_nanos() / per_call(f).as_nanos().max(1)).max(1);
    let (n_fast, n_ref, n_check) = (n(fast) as usize, n(reference) as usize, n(check) as usize);
    let (mut over_fast, mut over_check) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        let f = time(n_fast, bytes, fast).as_secs_f64() / n_fast as f64;
        let r = time(n_ref, bytes, reference).as_secs_f64() / n_ref as f64;
        let c = time(n_check, bytes, check).as_secs_f64() / n_check as f64;
        over_fast.push(r / f);
        over_check.push(r / c);
    }
    for (what, v) in [
        ("fast decode", &mut over_fast),
        ("check_request", &mut over_check),
    ] {
        v.sort_by(f64::total_cmp);
        println!(
            "reference / {what}: {:.1}x (median of {} alternating rounds; lowest {:.1}x, highest {:.1}x)",
            v[v.len() / 2],
            v.len(),
            v[0],
            v[v.len() - 1]
        );
    }
}

fn main() {
    let bytes = request();
    // The three decoders must agree that the request is valid before their times mean anything.
    assert!(fast(&bytes) == 3 && reference(&bytes) == 3 && check(&bytes) > 0);
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("otlp_decode");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("fast", |b| b.iter(|| fast(black_box(&bytes))));
    g.bench_function("reference", |b| b.iter(|| reference(black_box(&bytes))));
    g.bench_function("check_request", |b| b.iter(|| check(black_box(&bytes))));
    g.finish();
    c.final_summary();
    // `cargo test --benches` runs each benchmark once, without `--bench`: no ratio then.
    if std::env::args().any(|a| a == "--bench") {
        alternating_ratio(&bytes);
    }
}
