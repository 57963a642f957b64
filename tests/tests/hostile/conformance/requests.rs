//! The valid requests every case starts from: realistic profiles through the crate's encoder,
//! and variants protobuf must read the same.

use otel_bridge::otlp::{self, EncodeOptions, ProfileId};
use otel_bridge::resource::{build_resource, ProcessFacts, ResourceInputs};
use otel_bridge::{FrameKind, Link, LocationId, Profile, ProfileBuilder};

use super::rng::Rng;
use super::tree::{kind, parse, unpack, Body, Field, Kind, Msg};

/// A period of a small service: `stacks` stacks of 3 to 12 frames (JVM, native and kernel, and
/// a pseudo-frame), thread names and states, endpoints on most samples, thread ids on some,
/// trace links on some, a timestamp per observation; `types` sample types (each beyond the CPU
/// pair becomes its own OTLP profile).
pub fn realistic_profile(seed: u64, stacks: usize, types: &[(&str, &str)]) -> Profile {
    let mut rng = Rng::new(seed);
    let period = 10_000_000;
    let mut b = ProfileBuilder::new(types, ("cpu", "nanoseconds"), period);
    let locations: Vec<LocationId> = (0..40)
        .map(|i| {
            let f = b.function(
                &format!("com.shop.p{}.Class{}.method{i}", i % 5, i % 12),
                &format!("Class{}.java", i % 12),
                10 + i as i64,
            );
            let kind = match i % 13 {
                0 => FrameKind::Native,
                1 => FrameKind::Kernel,
                _ => FrameKind::Jvm,
            };
            b.location(f, 12 + i as i64 * 3, kind)
        })
        .collect();
    let gc = b.function("[GC_active]", "", 0);
    let gc = b.location(gc, 0, FrameKind::Pseudo);
    let threads: Vec<_> = (0..4)
        .map(|t| b.str_label("thread_name", &format!("http-nio-8080-exec-{t}")))
        .collect();
    let states: Vec<_> = ["RUNNABLE", "BLOCKED"]
        .iter()
        .map(|s| b.str_label("thread_state", s))
        .collect();
    let endpoints: Vec<_> = (0..3)
        .map(|e| b.str_label("span_name", &format!("GET /api/v1/thing{e}/{{id}}")))
        .collect();
    let tid = b.str_label("thread_id", "1234");
    let links: Vec<Link> = (0..5)
        .map(|_| {
            let mut l = Link::default();
            l.trace_id.iter_mut().for_each(|x| *x = rng.next() as u8);
            l.span_id.iter_mut().for_each(|x| *x = rng.next() as u8 | 1);
            l
        })
        .collect();
    for s in 0..stacks {
        let stack: Vec<LocationId> = if s == 0 {
            vec![gc]
        } else {
            (0..3 + rng.below(10))
                .map(|_| *rng.pick(&locations))
                .collect()
        };
        for _ in 0..1 + rng.below(2) {
            let mut labels = vec![*rng.pick(&threads), *rng.pick(&states)];
            if rng.chance(70) {
                labels.push(*rng.pick(&endpoints));
            }
            if rng.chance(20) {
                labels.push(tid);
            }
            let link = rng.chance(40).then(|| *rng.pick(&links));
            let n = 1 + rng.below(5) as i64;
            let values: Vec<i64> = types
                .iter()
                .map(|(ty, _)| match *ty {
                    "samples" => n,
                    "cpu" => n * period,
                    "alloc_space" => n * 48,
                    _ => n,
                })
                .collect();
            let t0 = 1_795_317_300_000_000_000;
            let timestamps: Vec<i64> = (0..n).map(|k| t0 + k * period).collect();
            b.add_linked_sample(&stack, &labels, link, &values, &timestamps);
        }
    }
    b.build(1_795_317_300_000_000_000, 10_000_000_000)
}

pub fn encoded(p: &Profile, options: &EncodeOptions, id: u8) -> Vec<u8> {
    let facts = ProcessFacts {
        pid: 4242,
        host_name: Some("box-1".into()),
        executable_name: Some("java".into()),
        runtime_name: Some("OpenJDK Runtime Environment".into()),
        runtime_version: Some("17.0.12+7".into()),
        runtime_description: None,
        // An array value in the resource (AnyValue.array_value), which the decoder must
        // check without keeping.
        command_args: Some(vec!["java".into(), "-jar".into(), "shop.jar".into()]),
    };
    let (resource, _) = build_resource(&ResourceInputs {
        service_option: Some("shop"),
        otel_service_name: None,
        otel_resource_attributes: Some("service.version=1.5,deployment.environment.name=prod"),
        instance_id: "0b6a7c0e-8f4e-4a38-9d2e-5c1f0f6c2a11",
        process: &facts,
    });
    otlp::encode_to_vec(p, &resource, ProfileId::from_random([id; 16]), options).unwrap()
}

/// The valid requests every case starts from, parsed into message trees.
pub fn bases() -> Vec<(&'static str, Vec<Field>)> {
    let cpu = realistic_profile(1, 12, &[("samples", "count"), ("cpu", "nanoseconds")]);
    let many = realistic_profile(
        2,
        10,
        &[
            ("samples", "count"),
            ("cpu", "nanoseconds"),
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
        ],
    );
    let all = EncodeOptions {
        timestamps: true,
        thread_id: true,
        local_root_span_id: true,
        ..Default::default()
    };
    let cpu_plain = parse(&encoded(&cpu, &EncodeOptions::default(), 1), Msg::Request);
    let many_plain = parse(&encoded(&many, &EncodeOptions::default(), 2), Msg::Request);
    let cpu_timestamps = parse(&encoded(&cpu, &all, 3), Msg::Request);
    let many_timestamps = parse(&encoded(&many, &all, 4), Msg::Request);
    // Two requests back to back are one request whose repeated fields concatenate and whose
    // dictionaries merge (the second's indices then point into the first's entries).
    let mut concatenated = encoded(&many, &all, 5);
    concatenated.extend(encoded(&cpu, &EncodeOptions::default(), 6));
    vec![
        ("cpu", cpu_plain),
        ("cpu+timestamps", cpu_timestamps.clone()),
        ("3 profiles", many_plain.clone()),
        ("3 profiles+timestamps", many_timestamps.clone()),
        ("split dictionary", split_dictionary(&many_timestamps)),
        ("split dictionary (cpu)", split_dictionary(&cpu_timestamps)),
        ("unpacked", unpacked(&many_timestamps)),
        (
            "unpacked, split dictionary",
            unpacked(&split_dictionary(&many_plain)),
        ),
        ("concatenated", parse(&concatenated, Msg::Request)),
    ]
}

/// The request with its dictionary written as two occurrences of field 2, the tables cut in the
/// middle of the string table: protobuf merges them back into the same dictionary.
pub fn split_dictionary(request: &[Field]) -> Vec<Field> {
    let mut out = Vec::new();
    for f in request {
        match &f.body {
            Body::Msg(Msg::Dictionary, fields, _) => {
                let strings: Vec<usize> = (0..fields.len())
                    .filter(|i| fields[*i].number == 5)
                    .collect();
                let cut = strings[strings.len() / 2];
                for part in [&fields[..cut], &fields[cut..]] {
                    out.push(Field::new(2, Body::Msg(Msg::Dictionary, part.to_vec(), 0)));
                }
            }
            _ => out.push(f.clone()),
        }
    }
    out
}

/// The request with every packed repeated field written unpacked, one field per element
/// (protobuf parsers accept both).
pub fn unpacked(fields: &[Field]) -> Vec<Field> {
    let mut out = Vec::new();
    for f in fields {
        match &f.body {
            Body::Msg(m, inner, pad) => {
                let inner = unpacked(inner);
                let mut expanded = Vec::new();
                for g in inner {
                    match (kind(*m, g.number), &g.body) {
                        (Some(Kind::PackedVarint | Kind::PackedFixed64), Body::Len(b, _)) => {
                            expanded.extend(unpack(g.number, kind(*m, g.number), b))
                        }
                        _ => expanded.push(g),
                    }
                }
                out.push(Field::new(f.number, Body::Msg(*m, expanded, *pad)));
            }
            _ => out.push(f.clone()),
        }
    }
    out
}
