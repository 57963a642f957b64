//! What the encoder's link and bounds options do to a request (`otlp::bounds`,
//! `otlp::pyroscope::BOUNDS`, `EncodeOptions::links`): read back with the prost types and the
//! production decoder, on profiles shaped like the agent's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use otel_bridge::otlp::{
    self, proto as pb, pyroscope, Bounds, EncodeOptions, ExportProfilesServiceRequest, LinkTarget,
    ProfileId,
};
use otel_bridge::{FrameKind, Link, Profile, ProfileBuilder};

const INTERVAL: i64 = 10_000_000;
const T0: i64 = 1_795_317_300_000_000_000;
const ROOT: &str = "00000000000000aa";

fn encode(p: &Profile, options: &EncodeOptions) -> ExportProfilesServiceRequest {
    let resource = Resource::builder_empty()
        .with_attributes([KeyValue::new("service.name", "shop")])
        .build();
    let id = ProfileId::new(*b"otelprof-test-id").unwrap();
    otlp::encode(p, &resource, id, options).unwrap()
}

fn profiles(r: &ExportProfilesServiceRequest) -> &[pb::Profile] {
    &r.resource_profiles[0].scope_profiles[0].profiles
}

fn attribute_keys(r: &ExportProfilesServiceRequest) -> BTreeSet<String> {
    let d = r.dictionary.as_ref().unwrap();
    profiles(r)
        .iter()
        .flat_map(|p| &p.samples)
        .flat_map(|s| &s.attribute_indices)
        .map(|&a| d.string_table[d.attribute_table[a as usize].key_strindex as usize].clone())
        .collect()
}

/// A request's samples: spans of two children of one local root, every thread label the agent
/// sets, and one stack `depth` frames deep (leaf `leaf`).
fn request(depth: usize) -> Profile {
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        INTERVAL,
    );
    let leaf = b.function("shop.Cart.leaf", "Cart.java", 10);
    let recurse = b.function("shop.Cart.recurse", "Cart.java", 20);
    let main = b.function("shop.Main.main", "Main.java", 3);
    let mut stack = vec![b.location(leaf, 11, FrameKind::Jvm)];
    let inner = b.location(recurse, 21, FrameKind::Jvm);
    stack.extend(std::iter::repeat_n(inner, depth - 2));
    stack.push(b.location(main, 4, FrameKind::Jvm));
    let labels = [
        b.str_label("thread_name", "exec-7"),
        b.str_label("thread_id", "107"),
        b.str_label("thread_pool", "exec-N"),
        b.str_label("span_name", "GET /cart"),
        b.str_label("local_root_span_id", ROOT),
    ];
    for child in [0xb1u8, 0xb2] {
        let link = Link {
            trace_id: [7; 16],
            span_id: [0, 0, 0, 0, 0, 0, 0, child],
        };
        b.add_linked_sample(&stack, &labels, Some(link), &[1, INTERVAL], &[T0]);
    }
    b.build(T0, 10_000_000_000)
}

#[test]
fn links_name_the_span_by_default_and_the_local_root_when_asked() {
    let p = request(3);
    let spans = |r: &ExportProfilesServiceRequest| -> Vec<String> {
        let d = r.dictionary.as_ref().unwrap();
        profiles(r)[0]
            .samples
            .iter()
            .map(|s| hex::encode(&d.link_table[s.link_index as usize].span_id))
            .collect()
    };
    let r = encode(&p, &EncodeOptions::default());
    assert_eq!(spans(&r), ["00000000000000b1", "00000000000000b2"]);
    let options = EncodeOptions {
        links: LinkTarget::LocalRoot,
        ..Default::default()
    };
    let r = encode(&p, &options);
    // Both children's samples now name the root, and merge into one sample.
    assert_eq!(spans(&r), [ROOT]);
    assert_eq!(profiles(&r)[0].samples[0].values, [2]);
    let d = r.dictionary.as_ref().unwrap();
    assert_eq!(d.link_table[1].trace_id, [7; 16]);
}

#[test]
fn a_link_without_its_trace_id_keeps_the_span_and_decodes() {
    let options = EncodeOptions {
        links: LinkTarget::LocalRoot,
        no_link_trace_id: true,
        ..Default::default()
    };
    let bytes = prost::Message::encode_to_vec(&encode(&request(3), &options));
    let r = ExportProfilesServiceRequest::decode_from(&bytes);
    let d = r.dictionary.as_ref().unwrap();
    assert_eq!(d.link_table.len(), 2);
    assert!(d.link_table[1].trace_id.is_empty());
    assert_eq!(hex::encode(&d.link_table[1].span_id), ROOT);
    // otelprof's own receiver reads it as the span alone (an all-zero trace id).
    let decoded = otlp::decode(&bytes).unwrap();
    let link = decoded[0].1.samples[0].link.unwrap();
    assert_eq!(
        (link.trace_id, link.span_id_hex()),
        ([0; 16], ROOT.to_owned())
    );
    // Encoded again the same way, it stays a link; with trace ids on, an all-zero trace id
    // is no link.
    let again = encode(&decoded[0].1, &options);
    assert_eq!(again.dictionary.as_ref().unwrap().link_table.len(), 2);
    let with_traces = encode(&decoded[0].1, &EncodeOptions::default());
    assert_eq!(with_traces.dictionary.as_ref().unwrap().link_table.len(), 1);
}

trait DecodeFrom {
    fn decode_from(bytes: &[u8]) -> Self;
}

impl DecodeFrom for ExportProfilesServiceRequest {
    fn decode_from(bytes: &[u8]) -> Self {
        prost::Message::decode(bytes).unwrap()
    }
}

#[test]
fn pyroscope_bounds_send_the_endpoint_alone_of_the_sample_attributes() {
    let r = encode(&request(3), &EncodeOptions::default());
    assert_eq!(
        attribute_keys(&r),
        BTreeSet::from([
            "span_name".into(),
            "thread.name".into(),
            "thread.pool".into()
        ])
    );
    let options = EncodeOptions {
        bounds: pyroscope::BOUNDS,
        ..Default::default()
    };
    let r = encode(&request(3), &options);
    assert_eq!(attribute_keys(&r), BTreeSet::from(["span_name".into()]));
}

/// Stack of sample `i` of profile `n`, as function names, leaf first.
fn stack_names(r: &ExportProfilesServiceRequest, n: usize, i: usize) -> Vec<String> {
    let d = r.dictionary.as_ref().unwrap();
    let s = &profiles(r)[n].samples[i];
    d.stack_table[s.stack_index as usize]
        .location_indices
        .iter()
        .map(|&l| {
            let f = d.location_table[l as usize].lines[0].function_index;
            d.string_table[d.function_table[f as usize].name_strindex as usize].clone()
        })
        .collect()
}

#[test]
fn deep_stacks_keep_their_leaf_and_end_in_a_truncated_frame() {
    let options = EncodeOptions {
        bounds: pyroscope::BOUNDS,
        ..Default::default()
    };
    for (depth, sent) in [(1_000, 1_000), (1_001, 1_000), (5_000, 1_000), (999, 999)] {
        let r = encode(&request(depth), &options);
        let names = stack_names(&r, 0, 0);
        assert_eq!(names.len(), sent, "{depth}");
        assert_eq!(names[0], "shop.Cart.leaf", "{depth}");
        let root = if depth > 1_000 {
            "[truncated]"
        } else {
            "shop.Main.main"
        };
        assert_eq!(names[sent - 1], root, "{depth}");
        // The cut frame is a pseudo-frame, as the agent's own.
        let decoded = otlp::decode(&prost::Message::encode_to_vec(&r)).unwrap();
        let p = &decoded[0].1;
        let leaf_first = p.stack(p.samples[0].stack);
        let last = p.location(*leaf_first.last().unwrap()).unwrap();
        assert_eq!(last.kind == FrameKind::Pseudo, depth > 1_000, "{depth}");
    }
}

/// `n` samples, each with a stack of its own of `depth` frames.
fn many_stacks(n: usize, depth: usize) -> Profile {
    let mut b = ProfileBuilder::new(
        &[("wall", "nanoseconds")],
        ("wall", "nanoseconds"),
        INTERVAL,
    );
    let frames: Vec<_> = (0..64)
        .map(|i| {
            let f = b.function(&format!("shop.Frames.f{i:02}"), "Frames.java", 1);
            b.location(f, i + 1, FrameKind::Jvm)
        })
        .collect();
    let name = b.str_label("thread_name", "worker");
    for i in 0..n {
        // Digits of i in base 64 make every stack distinct.
        let stack: Vec<_> = (0..depth)
            .map(|d| frames[(i >> (6 * (d % 3))) % 64])
            .collect();
        b.add_linked_sample(&stack, &[name], None, &[1 + i as i64], &[]);
    }
    b.build(T0, 10_000_000_000)
}

/// `p` encoded in parts within `options`' bounds, each part a request.
fn encode_parts(p: &Profile, options: &EncodeOptions) -> Vec<ExportProfilesServiceRequest> {
    let resource = Resource::builder_empty()
        .with_attributes([KeyValue::new("service.name", "shop")])
        .build();
    let mut n = 0u8;
    let mut next_id = || {
        n += 1;
        ProfileId::new([n; 16]).unwrap()
    };
    otlp::encode_bounded(p, &resource, options, &mut next_id).unwrap()
}

#[test]
fn a_profile_over_the_sample_bound_is_sent_in_parts_of_the_same_type() {
    let n = 40_000;
    let p = many_stacks(n, 3);
    let parts = encode_parts(&p, &EncodeOptions::default());
    assert_eq!(parts.len(), 1);
    assert_eq!(profiles(&parts[0])[0].samples.len(), n);
    let options = EncodeOptions {
        bounds: pyroscope::BOUNDS,
        ..Default::default()
    };
    let parts = encode_parts(&p, &options);
    let sizes: Vec<usize> = parts.iter().map(|r| profiles(r)[0].samples.len()).collect();
    assert_eq!(sizes, [16_000, 16_000, 8_000]);
    let first = &profiles(&parts[0])[0];
    let mut ids = BTreeSet::new();
    for r in &parts {
        let part = &profiles(r)[0];
        assert_eq!(profiles(r).len(), 1);
        ids.insert(part.profile_id.clone());
        assert_eq!(
            (&part.sample_type, &part.period_type, part.period),
            (&first.sample_type, &first.period_type, first.period)
        );
        assert_eq!(
            (part.time_unix_nano, part.duration_nano),
            (first.time_unix_nano, first.duration_nano)
        );
        // Each part's dictionary holds only what its own samples use.
        let d = r.dictionary.as_ref().unwrap();
        assert!(d.stack_table.len() <= part.samples.len() + 1);
    }
    assert_eq!(ids.len(), 3, "each part has an id of its own");
    // Nothing lost or counted twice.
    let total: i64 = parts
        .iter()
        .flat_map(|r| &profiles(r)[0].samples)
        .map(|s| s.values[0])
        .sum();
    assert_eq!(total, (1..=n as i64).sum::<i64>());
    for r in &parts {
        assert_eq!(
            otlp::decode(&prost::Message::encode_to_vec(r))
                .unwrap()
                .len(),
            1
        );
    }
}

#[test]
fn a_profile_over_the_byte_bound_is_split_too() {
    // 5,000 samples of 400 frames: 2 MB and more as pprof (400 location ids each), far
    // below the sample bound but over the byte bound.
    let p = many_stacks(5_000, 400);
    let bounds = pyroscope::BOUNDS;
    let parts = encode_parts(
        &p,
        &EncodeOptions {
            bounds,
            ..Default::default()
        },
    );
    assert!(parts.len() >= 2, "{} parts", parts.len());
    for r in &parts {
        let d = r.dictionary.as_ref().unwrap();
        // What a converted pprof of this part holds, counted from the request: each
        // sample's location ids, one byte at least each, bound it from below.
        let ids: usize = profiles(r)[0]
            .samples
            .iter()
            .map(|s| d.stack_table[s.stack_index as usize].location_indices.len())
            .sum();
        assert!(ids <= bounds.max_profile_bytes, "{ids}");
        assert!(prost::Message::encoded_len(r) < pyroscope::BURST_BYTES);
    }
    let sent: usize = parts.iter().map(|r| profiles(r)[0].samples.len()).sum();
    assert_eq!(sent, 5_000);
}

#[test]
fn alloc_profiles_split_alike_for_both_sample_types() {
    let mut b = ProfileBuilder::new(
        &[("alloc_objects", "count"), ("alloc_space", "bytes")],
        ("memory", "bytes"),
        1,
    );
    let frames: Vec<_> = (0..200)
        .map(|i| {
            let f = b.function(&format!("shop.A.f{i}"), "A.java", 1);
            b.location(f, 1, FrameKind::Jvm)
        })
        .collect();
    for i in 0..20_000usize {
        let stack = [frames[i % 200], frames[(i / 200) % 200]];
        b.add_linked_sample(&stack, &[], None, &[1, 48], &[]);
    }
    let p = b.build(T0, 1);
    let options = EncodeOptions {
        bounds: pyroscope::BOUNDS,
        ..Default::default()
    };
    let parts = encode_parts(&p, &options);
    assert_eq!(parts.len(), 2);
    for r in &parts {
        let types: Vec<usize> = profiles(r).iter().map(|p| p.samples.len()).collect();
        assert_eq!(types.len(), 2);
        assert!(types
            .iter()
            .all(|n| *n <= pyroscope::MAX_SAMPLES && *n == types[0]));
    }
}

#[test]
fn no_bounds_send_everything_as_before() {
    let p = request(5_000);
    let r = encode(
        &p,
        &EncodeOptions {
            bounds: Bounds::NONE,
            ..Default::default()
        },
    );
    assert_eq!(stack_names(&r, 0, 0).len(), 5_000);
}
