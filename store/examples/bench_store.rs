//! Generates a benchmark store, a day of a fleet: `--hours` (24) × `--instances` (10) JVMs of a
//! shop service at one profile a `--period` (60 s), i.e. 14,400 CPU profiles, each of about
//! `--stacks` (2,000) distinct stacks of 20 to 60 frames over ~700 Java methods, with six
//! endpoints (`span_name`), eight executor threads, a fifth of the samples linked to traces,
//! and a deploy of version 2.0 halfway through the day.
//!
//! Each profile is encoded as the agent's OTLP request (the otel-bridge encoder) and
//! stored as `otelprof receive` stores it (`OUT/profiles/<day>/…otlp.pb`); unless
//! `--otlp-only`, the request is then decoded, as the receiver checks it, and handed to the
//! columnar writer (`OUT/columnar/`), as the ingest path would. Deterministic: one seed per
//! profile. Prints one JSON line with the sizes of both forms.
//!
//!     cargo run --release -p otelprof-store --example bench_store -- --out /tmp/fleet
//!
//! It only generates the store; what to measure on it, and how, is in the `columnar` module doc.

use std::path::PathBuf;

use opentelemetry::KeyValue;
use otel_bridge::otlp::{EncodeOptions, ProfileId};
use otel_bridge::{FrameKind, Link, LocationId, Profile, ProfileBuilder};
use otelprof_primitives::rng::SplitMix64 as Rng;
use otelprof_store::columnar::ColumnarWriter;
use otelprof_store::{Signal, Store};

const ENDPOINTS: [&str; 6] = [
    "GET /products/{id}",
    "GET /cart",
    "POST /checkout",
    "GET /search",
    "GET /report",
    "POST /login",
];
/// Start of the generated day: 2025-01-31T00:00:00Z.
const DAY0: i64 = 1_738_281_600_000_000_000;

struct Args {
    out: PathBuf,
    hours: i64,
    instances: usize,
    stacks: usize,
    period_s: i64,
    otlp_only: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        out: PathBuf::from("target/bench-store"),
        hours: 24,
        instances: 10,
        stacks: 2000,
        period_s: 60,
        otlp_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--otlp-only" {
            a.otlp_only = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<i64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--out" => a.out = PathBuf::from(value),
            "--hours" => a.hours = num(&value)?.clamp(1, 24 * 31),
            "--instances" => a.instances = num(&value)?.clamp(1, 1000) as usize,
            "--stacks" => a.stacks = num(&value)?.clamp(1, 100_000) as usize,
            "--period" => a.period_s = num(&value)?.clamp(1, 3600),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

/// A fleet-wide pool of stacks (frame = method index and line, root first) with the endpoint
/// each serves: every profile draws its ~`stacks` from it, so profiles share most stacks as a
/// real service's do.
struct Pool {
    methods: Vec<(String, String)>,
    stacks: Vec<(usize, Vec<(usize, i64)>)>,
}

fn pool(stacks: usize) -> Pool {
    let packages = [
        "shop.web",
        "shop.catalog",
        "shop.cart",
        "shop.db",
        "java.util",
        "io.netty",
    ];
    let mut methods = vec![
        ("java.lang.Thread.run".to_owned(), "Thread.java".to_owned()),
        (
            "shop.web.Server.dispatch".to_owned(),
            "Server.java".to_owned(),
        ),
    ];
    let mut rng = Rng(7);
    for m in 0..700 {
        let pkg = packages[m % packages.len()];
        let class = format!("C{}", rng.below(120));
        methods.push((format!("{pkg}.{class}.m{m}"), format!("{class}.java")));
    }
    let mut out = Vec::with_capacity(stacks * 3 / 2);
    for s in 0..stacks * 3 / 2 {
        let endpoint = s % ENDPOINTS.len();
        let depth = 20 + rng.below(41) as usize;
        let mut frames = vec![(0, 120), (1, 48), (2 + endpoint * 7, 30)];
        while frames.len() < depth {
            // Callees cluster by endpoint, as code paths do.
            let m = 2 + (endpoint * 97 + rng.below(250) as usize) % 700;
            frames.push((m, 10 + rng.below(400) as i64));
        }
        out.push((endpoint, frames));
    }
    Pool {
        methods,
        stacks: out,
    }
}

fn profile(pool: &Pool, instance: usize, minute: i64, args: &Args) -> Profile {
    let period_ns = 10_000_000;
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        period_ns,
    );
    let mut rng = Rng((instance as u64) << 32 ^ minute as u64);
    let functions: Vec<_> = pool
        .methods
        .iter()
        .map(|(name, file)| b.function(name, file, 1))
        .collect();
    let endpoints: Vec<_> = ENDPOINTS
        .iter()
        .map(|e| b.str_label("span_name", e))
        .collect();
    let threads: Vec<_> = (0..8)
        .map(|t| b.str_label("thread.name", &format!("http-exec-{t}")))
        .collect();
    let mut frames: Vec<LocationId> = Vec::new();
    let window = args.period_s * 1_000_000_000;
    let start = DAY0 + minute * window;
    for _ in 0..args.stacks {
        // Skewed: low pool indices (hot paths) are drawn more often.
        let pick = (rng.below(pool.stacks.len() as u64) * rng.below(1000) / 999) as usize;
        let Some((endpoint, stack)) = pool.stacks.get(pick) else {
            continue;
        };
        frames.clear();
        for &(m, line) in stack.iter().rev() {
            frames.push(b.location(functions[m], line, FrameKind::Jvm));
        }
        let n = 1 + rng.below(20) as i64;
        let labels = [endpoints[*endpoint], threads[rng.below(8) as usize]];
        let link = (rng.below(5) == 0).then(|| {
            Link::from_hex(
                &format!("{:016x}{:016x}", instance as u64 + 1, rng.next_u64()),
                &format!("{:016x}", rng.next_u64() | 1),
            )
        });
        b.add_linked_sample(&frames, &labels, link.flatten(), &[n, n * period_ns], &[]);
    }
    b.build(start, window)
}

fn resource(instance: usize, minute: i64, per_day: i64) -> opentelemetry_sdk::Resource {
    let version = if minute * 2 < per_day { "1.0" } else { "2.0" };
    opentelemetry_sdk::Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", "shop"),
            KeyValue::new("service.version", version),
            KeyValue::new("deployment.environment.name", "prod"),
            KeyValue::new("service.instance.id", format!("shop-{instance:02}")),
            KeyValue::new("host.name", format!("node-{}", instance / 2)),
        ])
        .build()
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => todo.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let store = Store::open(&args.out)?;
    let columnar = if args.otlp_only {
        None
    } else {
        Some(ColumnarWriter::open(&args.out)?)
    };
    let pool = pool(args.stacks);
    let per_hour = 3600 / args.period_s;
    let periods = args.hours * per_hour;
    let per_day = 24 * per_hour;
    let mut n = 0u64;
    for minute in 0..periods {
        for instance in 0..args.instances {
            let p = profile(&pool, instance, minute, &args);
            n += 1;
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&n.to_le_bytes());
            let bytes = otel_bridge::otlp::encode_to_vec(
                &p,
                &resource(instance, minute, per_day),
                ProfileId::from_random(id),
                &EncodeOptions::default(),
            )?;
            let received = p.time_nanos + p.duration_nanos;
            store.put_raw(Signal::Profiles, &bytes, received)?;
            if let Some(w) = &columnar {
                let decoded = otel_bridge::otlp::decode(&bytes)?;
                w.write(&decoded, received)?;
            }
        }
    }
    println!(
        "{{\"profiles\": {n}, \"otlp_bytes\": {}, \"columnar_bytes\": {}}}",
        dir_bytes(&args.out.join(Signal::Profiles.dir())),
        dir_bytes(&args.out.join(otelprof_store::columnar::DIR))
    );
    Ok(())
}
