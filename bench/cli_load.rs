//! Load generator for the `otelprof receive` / `top` / `diff` benchmark (bench/cli_speed.py).
//!
//! Makes `--profiles` OTLP profile requests shaped like a busy JVM service's 10-second CPU
//! profiles (about `--stacks` distinct stacks of 20 to 60 frames over ~700 Java methods, 8
//! threads, 6 endpoints, a fifth of the samples linked to sampled traces), encodes them all
//! first, then sends them over OTLP/gRPC (gzip) to `--grpc` with `--concurrency` requests in
//! flight and reports the rate as one JSON line. Deterministic: a seed per profile.
//!
//! With `--gzip 0` the requests are encoded to protobuf bytes up front and sent through a
//! pass-through codec, so the rate measures the receiver, not this client's encoder (which
//! shares the machine's cores with it). With gzip, tonic compresses each request as it sends
//! it, on the client's cores.
//!
//!     cargo run --release -p otelprof-cli --example cli_load -- \
//!         --grpc 127.0.0.1:4317 --profiles 360 --version 1.0 --start 1700000000

use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use otel_bridge::otlp::{EncodeOptions, ExportProfilesServiceRequest, ProfileId};
use otel_bridge::{FrameKind, Link, Profile, ProfileBuilder};

/// One export, as a message (tonic encodes and compresses it when sending) or as protobuf bytes
/// encoded up front.
enum Request {
    Message(ExportProfilesServiceRequest),
    Bytes(bytes::Bytes),
}

fn export_path() -> http::uri::PathAndQuery {
    http::uri::PathAndQuery::from_static(
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
    )
}

/// A gRPC codec that sends bytes as they are and returns the response's bytes.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = bytes::Bytes;
    type Decode = bytes::Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = bytes::Bytes;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Self::Item,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), Self::Error> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = bytes::Bytes;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Self::Item>, Self::Error> {
        let n = bytes::Buf::remaining(src);
        Ok(Some(bytes::Buf::copy_to_bytes(src, n)))
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const PACKAGES: [&str; 12] = [
    "com.shop.web",
    "com.shop.cart",
    "com.shop.catalog",
    "com.shop.pricing",
    "com.shop.payment",
    "com.shop.db",
    "io.netty.channel",
    "io.netty.handler.codec.http",
    "java.util",
    "java.util.concurrent",
    "com.fasterxml.jackson.databind",
    "org.postgresql.core",
];
/// The method the second side spends more time in.
const REGRESSED: usize = 333;
const ENDPOINTS: [&str; 6] = [
    "GET /products/{id}",
    "GET /cart",
    "POST /checkout",
    "GET /search",
    "POST /login",
    "GET /orders/{id}",
];

/// The method names of the simulated service.
fn methods() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rng = Rng(7);
    for i in 0..700 {
        let pkg = PACKAGES[i % PACKAGES.len()];
        let class = format!("Class{}", rng.below(60));
        let method = format!("method{}", rng.below(25));
        out.push((format!("{pkg}.{class}.{method}"), format!("{class}.java")));
    }
    out
}

/// One 10-second CPU profile; `regressed` makes one method hotter (the second side).
fn profile(
    seed: u64,
    stacks: usize,
    start_ns: i64,
    regressed: bool,
    methods: &[(String, String)],
) -> Profile {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let period = 10_000_000i64;
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        period,
    );
    let funcs: Vec<_> = methods.iter().map(|(m, f)| b.function(m, f, 10)).collect();
    let threads: Vec<_> = (0..8)
        .map(|i| b.str_label("thread_name", &format!("http-worker-{i}")))
        .collect();
    let endpoints: Vec<_> = ENDPOINTS
        .iter()
        .map(|e| b.str_label("span_name", e))
        .collect();
    // Stacks share prefixes like real ones: a few roots, endpoint-specific middles, varied leaves.
    let mut stack_rng = Rng(42);
    for s in 0..stacks {
        let depth = 20 + stack_rng.below(41) as usize;
        let endpoint = s % ENDPOINTS.len();
        let mut frames = Vec::with_capacity(depth);
        for d in 0..depth {
            let f = if d < 8 {
                (d * 3) % 40
            } else if d < 16 {
                40 + endpoint * 30 + (d + s / 97) % 30
            } else {
                220 + stack_rng.below(480) as usize
            };
            let line = 1 + (d as i64 % 50);
            frames.push(b.location(funcs[f], line, FrameKind::Jvm));
        }
        let mut leaf_first: Vec<_> = frames.into_iter().rev().collect();
        if regressed && s % 10 == 0 {
            let hot = b.location(funcs[REGRESSED], 5, FrameKind::Jvm);
            leaf_first.insert(0, hot);
        }
        let weight = 1 + rng.below(3) as i64 + if regressed && s % 10 == 0 { 2 } else { 0 };
        let thread = threads[rng.below(8) as usize];
        let link = (rng.below(5) == 0).then(|| {
            let mut t = [0u8; 16];
            t[..8].copy_from_slice(&rng.next().to_be_bytes());
            t[8..].copy_from_slice(&(rng.next() | 1).to_be_bytes());
            Link {
                trace_id: t,
                span_id: (rng.next() | 1).to_be_bytes(),
            }
        });
        b.add_linked_sample(
            &leaf_first,
            &[thread, endpoints[endpoint]],
            link,
            &[weight, weight * period],
            &[],
        );
    }
    b.build(start_ns, 10_000_000_000)
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let target = arg(&args, "--grpc", "127.0.0.1:4317");
    let n: usize = arg(&args, "--profiles", "360").parse()?;
    let stacks: usize = arg(&args, "--stacks", "2000").parse()?;
    let concurrency: usize = arg(&args, "--concurrency", "8").parse()?;
    let version = arg(&args, "--version", "1.0");
    let start: i64 = arg(&args, "--start", "1700000000").parse()?;
    let regressed = version != "1.0";
    let gzip = arg(&args, "--gzip", "1") != "0";
    let resource = opentelemetry_sdk::Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", "bench-shop"),
            KeyValue::new("service.version", version.clone()),
            KeyValue::new("service.instance.id", format!("bench-{version}")),
        ])
        .build();
    let methods = methods();
    let t0 = Instant::now();
    let mut requests: Vec<Request> = Vec::with_capacity(n);
    let mut bytes = 0usize;
    for i in 0..n {
        let p = profile(
            i as u64 + if regressed { 1 << 32 } else { 0 },
            stacks,
            (start + 10 * i as i64) * 1_000_000_000,
            regressed,
            &methods,
        );
        let req = otel_bridge::otlp::encode(
            &p,
            &resource,
            ProfileId::from_random([(i % 251) as u8 + 1; 16]),
            &EncodeOptions::default(),
        )?;
        bytes += prost::Message::encoded_len(&req);
        requests.push(if gzip {
            Request::Message(req)
        } else {
            Request::Bytes(bytes::Bytes::from(prost::Message::encode_to_vec(&req)))
        });
    }
    let encode_s = t0.elapsed().as_secs_f64();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (elapsed, failures) = runtime.block_on(async move {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{target}"))?
            .timeout(Duration::from_secs(30))
            .connect()
            .await?;
        let queue = std::sync::Arc::new(tokio::sync::Mutex::new(requests));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let queue = queue.clone();
            let mut client =
                ProfilesServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20);
            if gzip {
                client = client.send_compressed(tonic::codec::CompressionEncoding::Gzip);
            }
            let mut raw = tonic::client::Grpc::new(channel.clone());
            tasks.push(tokio::spawn(async move {
                let mut failures = 0usize;
                loop {
                    let Some(req) = queue.lock().await.pop() else {
                        break;
                    };
                    let ok = match req {
                        Request::Message(req) => client.export(req).await.is_ok(),
                        Request::Bytes(b) => {
                            raw.ready().await.is_ok()
                                && raw
                                    .unary(tonic::Request::new(b), export_path(), RawCodec)
                                    .await
                                    .is_ok()
                        }
                    };
                    if !ok {
                        failures += 1;
                    }
                }
                failures
            }));
        }
        let mut failures = 0;
        for t in tasks {
            failures += t.await.unwrap_or(1);
        }
        Ok::<_, Box<dyn std::error::Error>>((started.elapsed().as_secs_f64(), failures))
    })?;
    println!(
        "{{\"profiles\":{n},\"stacks\":{stacks},\"concurrency\":{concurrency},\"gzip\":{gzip},\"encode_s\":{encode_s:.3},\"send_s\":{elapsed:.3},\"exports_per_s\":{:.1},\"mib_raw\":{:.2},\"failures\":{failures},\"regressed\":\"{}\"}}",
        n as f64 / elapsed,
        bytes as f64 / (1 << 20) as f64,
        methods[REGRESSED].0
    );
    if failures > 0 {
        std::process::exit(1);
    }
    Ok(())
}
