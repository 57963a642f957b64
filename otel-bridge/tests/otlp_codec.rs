//! The OTLP encoder against the rules of `docs/output-format.md` ("OTLP profiles"), as the
//! `otlp` module docs (`src/otlp.rs`) list them with their sources in profiles.proto
//! (<https://github.com/open-telemetry/opentelemetry-proto/blob/v1.10.0/opentelemetry/proto/profiles/v1development/profiles.proto>);
//! round trips through the reference decoder, a golden encoding, property tests (arbitrary
//! input never panics the decoder; arbitrary models survive a round trip), and the production
//! decoder against the reference (same model on the corpus and on generated requests).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use otel_bridge::otlp::{
    self, proto as pb, EncodeOptions, ExportProfilesServiceRequest, ProfileId,
};
use otel_bridge::{FrameKind, LabelValue, Link, Profile, ProfileBuilder};
use proptest::prelude::*;
use prost::Message;

const INTERVAL: i64 = 10_000_000;
const T0: i64 = 1_795_317_300_000_000_000;

fn resource() -> Resource {
    Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", "shop"),
            KeyValue::new("service.version", "1.5"),
            KeyValue::new("process.pid", 4242),
        ])
        .build()
}

fn id() -> ProfileId {
    ProfileId::new(*b"otelprof-test-id").unwrap()
}

fn link(n: u8) -> Link {
    Link {
        trace_id: [n; 16],
        span_id: [n; 8],
    }
}

/// A CPU profile shaped like the agent's: two sample types, thread labels, a span, a
/// pseudo-frame, timestamps, and two threads with the same name (which merge once
/// `thread.id` is dropped).
fn agent_like() -> Profile {
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        INTERVAL,
    );
    let spin = b.function("shop.Cart.spin", "Cart.java", 20);
    let checkout = b.function("shop.Cart.checkout", "Cart.java", 40);
    let run = b.function("java.lang.Thread.run", "Thread.java", 833);
    let gc = b.function("[GC_active]", "", 0);
    let l_spin = b.location(spin, 23, FrameKind::Jvm);
    let l_checkout = b.location(checkout, 44, FrameKind::Jvm);
    let l_run = b.location(run, 840, FrameKind::Jvm);
    let l_gc = b.location(gc, 0, FrameKind::Pseudo);
    let stack = [l_spin, l_checkout, l_run];
    let w0 = [
        b.str_label("thread_name", "worker"),
        b.str_label("thread_id", "101"),
    ];
    let w1 = [
        b.str_label("thread_name", "worker"),
        b.str_label("thread_id", "102"),
    ];
    let span = b.str_label("span_name", "GET /cart/{id}");
    let lrs = b.str_label("local_root_span_id", "0101010101010101");
    b.add_linked_sample(&stack, &w0, None, &[3, 3 * INTERVAL], &[T0 + 1, T0 + 2]);
    b.add_linked_sample(&stack, &w1, None, &[2, 2 * INTERVAL], &[T0 + 3, T0 + 4]);
    b.add_linked_sample(
        &stack,
        &[w0[0], w0[1], span, lrs],
        Some(link(1)),
        &[1, INTERVAL],
        &[T0 + 5],
    );
    b.add_linked_sample(
        &[l_gc],
        &w1,
        None,
        &[4, 4 * INTERVAL],
        &[T0 + 6, T0 + 7, T0 + 8, T0 + 9],
    );
    b.add_comment("otelprof agent: samples=10");
    b.build(T0, 60_000_000_000)
}

fn encode(p: &Profile, options: &EncodeOptions) -> ExportProfilesServiceRequest {
    otlp::encode(p, &resource(), id(), options).unwrap()
}

fn str_of(d: &pb::ProfilesDictionary, i: i32) -> &str {
    &d.string_table[i as usize]
}

fn attr_str(d: &pb::ProfilesDictionary, a: &pb::KeyValueAndUnit) -> (String, String) {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    let v = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(V::StringValue(s)) => s.clone(),
        Some(V::IntValue(i)) => format!("int:{i}"),
        Some(V::BoolValue(b)) => format!("bool:{b}"),
        other => panic!("unexpected attribute value {other:?}"),
    };
    (str_of(d, a.key_strindex).to_owned(), v)
}

/// Every structural rule of `docs/output-format.md` that can be checked on one request.
fn check_rules(r: &ExportProfilesServiceRequest) {
    let d = r.dictionary.as_ref().expect("dictionary");
    // Zero values at index 0 of every table.
    assert_eq!(d.string_table[0], "");
    assert_eq!(d.mapping_table[0], pb::Mapping::default());
    assert_eq!(d.location_table[0], pb::Location::default());
    assert_eq!(d.function_table[0], pb::Function::default());
    assert_eq!(d.link_table[0], pb::Link::default());
    assert_eq!(d.attribute_table[0], pb::KeyValueAndUnit::default());
    assert_eq!(d.stack_table[0], pb::Stack::default());
    let in_range = |i: i32, len: usize| i >= 0 && (i as usize) < len;
    let strings = d.string_table.len();
    // No duplicates in the tables the encoder interns.
    assert_eq!(
        d.string_table.iter().collect::<BTreeSet<_>>().len(),
        strings
    );
    assert_eq!(
        d.stack_table
            .iter()
            .map(|s| &s.location_indices)
            .collect::<BTreeSet<_>>()
            .len(),
        d.stack_table.len()
    );
    for f in &d.function_table[1..] {
        for i in [f.name_strindex, f.system_name_strindex, f.filename_strindex] {
            assert!(in_range(i, strings));
        }
        assert!(!str_of(d, f.name_strindex).is_empty());
        assert!(!str_of(d, f.system_name_strindex).is_empty());
    }
    for l in &d.location_table[1..] {
        assert!(in_range(l.mapping_index, d.mapping_table.len()));
        assert!(!l.lines.is_empty());
        for line in &l.lines {
            assert!(in_range(line.function_index, d.function_table.len()));
            assert!(line.function_index > 0);
        }
        let types: Vec<_> = l
            .attribute_indices
            .iter()
            .map(|&a| attr_str(d, &d.attribute_table[a as usize]))
            .filter(|(k, _)| k == "profile.frame.type")
            .collect();
        assert_eq!(
            types.len(),
            1,
            "exactly one profile.frame.type per location"
        );
        assert!(["jvm", "native", "kernel"].contains(&types[0].1.as_str()));
    }
    for a in &d.attribute_table[1..] {
        assert!(in_range(a.key_strindex, strings));
        assert!(in_range(a.unit_strindex, strings));
    }
    for s in &d.stack_table {
        for &l in &s.location_indices {
            assert!(in_range(l, d.location_table.len()) && l > 0);
        }
    }
    for l in &d.link_table[1..] {
        assert_eq!(l.trace_id.len(), 16);
        assert_eq!(l.span_id.len(), 8);
    }
    for rp in &r.resource_profiles {
        let res = rp.resource.as_ref().unwrap();
        let keys: BTreeSet<_> = res.attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys.len(), res.attributes.len(), "unique resource keys");
        for sp in &rp.scope_profiles {
            assert_eq!(sp.scope.as_ref().unwrap().name, "otelprof");
            for p in &sp.profiles {
                assert_eq!(p.profile_id.len(), 16);
                assert_ne!(p.profile_id, vec![0; 16]);
                let st = p.sample_type.unwrap();
                assert!(in_range(st.type_strindex, strings) && in_range(st.unit_strindex, strings));
                let mut identities = BTreeSet::new();
                let end = p.time_unix_nano + p.duration_nano;
                for s in &p.samples {
                    assert!(in_range(s.stack_index, d.stack_table.len()));
                    assert!(in_range(s.link_index, d.link_table.len()));
                    assert!(
                        s.values.len() == 1
                            || (s.values.is_empty() && !s.timestamps_unix_nano.is_empty()),
                        "one value per sample, or timestamps only: {s:?}"
                    );
                    for &t in &s.timestamps_unix_nano {
                        assert!(
                            t >= p.time_unix_nano && t < end,
                            "timestamp outside the profile"
                        );
                    }
                    let mut keys = BTreeSet::new();
                    for &a in &s.attribute_indices {
                        assert!(in_range(a, d.attribute_table.len()) && a > 0);
                        assert!(
                            keys.insert(d.attribute_table[a as usize].key_strindex),
                            "unique keys"
                        );
                    }
                    let mut attrs = s.attribute_indices.clone();
                    attrs.sort_unstable();
                    assert!(
                        identities.insert((s.stack_index, attrs, s.link_index)),
                        "identical samples must be merged"
                    );
                }
            }
        }
    }
}

#[test]
fn agent_like_profile_follows_every_rule() {
    let p = agent_like();
    let r = encode(&p, &EncodeOptions::default());
    check_rules(&r);
    let d = r.dictionary.as_ref().unwrap();
    let profiles = &r.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(profiles.len(), 1, "cpu/nanoseconds is derived, not sent");
    let prof = &profiles[0];
    let st = prof.sample_type.unwrap();
    let pt = prof.period_type.unwrap();
    assert_eq!(
        (str_of(d, st.type_strindex), str_of(d, st.unit_strindex)),
        ("samples", "count")
    );
    assert_eq!(
        (str_of(d, pt.type_strindex), str_of(d, pt.unit_strindex)),
        ("cpu", "nanoseconds")
    );
    assert_eq!(prof.period, INTERVAL);
    assert_eq!(prof.time_unix_nano, T0 as u64);
    assert_eq!(prof.duration_nano, 60_000_000_000);
    assert_eq!(prof.profile_id, b"otelprof-test-id".to_vec());
    // Threads 101 and 102 share a name: without thread.id their samples merge (3 + 2).
    let values: Vec<i64> = prof.samples.iter().map(|s| s.values[0]).collect();
    assert_eq!(values, vec![5, 1, 4]);
    assert!(prof
        .samples
        .iter()
        .all(|s| s.timestamps_unix_nano.is_empty()));
    // Leaf first, with file and line.
    let stack = &d.stack_table[prof.samples[0].stack_index as usize];
    let leaf = &d.location_table[stack.location_indices[0] as usize];
    let f = &d.function_table[leaf.lines[0].function_index as usize];
    assert_eq!(str_of(d, f.name_strindex), "shop.Cart.spin");
    assert_eq!(str_of(d, f.filename_strindex), "Cart.java");
    assert_eq!(f.start_line, 20);
    assert_eq!(leaf.lines[0].line, 23);
    // Sample attributes: thread.name always, span_name when present, no ids by default.
    let attrs = |s: &pb::Sample| -> BTreeMap<String, String> {
        s.attribute_indices
            .iter()
            .map(|&a| attr_str(d, &d.attribute_table[a as usize]))
            .collect()
    };
    assert_eq!(
        attrs(&prof.samples[0]),
        BTreeMap::from([("thread.name".into(), "worker".into())])
    );
    assert_eq!(
        attrs(&prof.samples[1]),
        BTreeMap::from([
            ("thread.name".into(), "worker".into()),
            ("span_name".into(), "GET /cart/{id}".into()),
        ])
    );
    let l = &d.link_table[prof.samples[1].link_index as usize];
    assert_eq!(
        (l.trace_id.clone(), l.span_id.clone()),
        (vec![1; 16], vec![1; 8])
    );
    assert_eq!(prof.samples[0].link_index, 0);
    // The pseudo-frame is a jvm frame marked as pseudo.
    let gc_stack = &d.stack_table[prof.samples[2].stack_index as usize];
    let gc = &d.location_table[gc_stack.location_indices[0] as usize];
    let gc_attrs: BTreeMap<_, _> = gc
        .attribute_indices
        .iter()
        .map(|&a| attr_str(d, &d.attribute_table[a as usize]))
        .collect();
    assert_eq!(gc_attrs["profile.frame.type"], "jvm");
    assert_eq!(gc_attrs["otelprof.frame.pseudo"], "bool:true");
    // Nothing the user did not ask for: no ids as attributes, no comment text.
    assert!(!d.string_table.iter().any(|s| s.contains("otelprof agent")
        || s == "thread.id"
        || s == "local_root_span_id"
        || s == "0101010101010101"));
}

#[test]
fn ids_are_sent_only_when_asked_for() {
    let p = agent_like();
    let options = EncodeOptions {
        thread_id: true,
        local_root_span_id: true,
        ..Default::default()
    };
    let r = encode(&p, &options);
    check_rules(&r);
    let d = r.dictionary.as_ref().unwrap();
    let prof = &r.resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!(
        prof.samples.len(),
        4,
        "thread.id keeps the two threads apart"
    );
    let all: BTreeSet<(String, String)> = d.attribute_table[1..]
        .iter()
        .map(|a| attr_str(d, a))
        .collect();
    assert!(all.contains(&("thread.id".into(), "int:101".into())));
    assert!(all.contains(&("local_root_span_id".into(), "0101010101010101".into())));
}

#[test]
fn timestamps_option_sends_one_timestamp_per_interval() {
    let p = agent_like();
    let r = encode(
        &p,
        &EncodeOptions {
            timestamps: true,
            ..Default::default()
        },
    );
    check_rules(&r);
    let prof = &r.resource_profiles[0].scope_profiles[0].profiles[0];
    for s in &prof.samples {
        assert!(s.values.is_empty());
    }
    let counts: Vec<usize> = prof
        .samples
        .iter()
        .map(|s| s.timestamps_unix_nano.len())
        .collect();
    assert_eq!(counts, vec![5, 1, 4]);
    // 3 intervals over 2 signals: the surplus goes to the earliest signal.
    assert_eq!(
        prof.samples[0].timestamps_unix_nano,
        vec![
            T0 as u64 + 1,
            T0 as u64 + 1,
            T0 as u64 + 2,
            T0 as u64 + 3,
            T0 as u64 + 4
        ]
    );
    let back = otlp::reference::decode(&r.encode_to_vec()).unwrap();
    let values: Vec<i64> = back[0]
        .profile
        .samples
        .iter()
        .map(|s| s.values[0])
        .collect();
    assert_eq!(values, vec![5, 1, 4]);
}

/// A view of a model profile that does not depend on table order: per sample identity,
/// summed values (and sorted timestamps).
type Canon =
    BTreeMap<(Vec<String>, BTreeSet<(String, String)>, Option<Link>), (Vec<i64>, Vec<i64>)>;

fn canonical(p: &Profile, drop: &[&str]) -> Canon {
    canonical_keeping(p, drop, false)
}

fn canonical_keeping(p: &Profile, drop: &[&str], timestamps: bool) -> Canon {
    let mut out: Canon = BTreeMap::new();
    for s in &p.samples {
        let stack = p
            .stack(s.stack)
            .iter()
            .map(|&l| {
                let loc = p.location(l).unwrap();
                loc.lines
                    .iter()
                    .map(|line| {
                        let f = p.function(line.function).unwrap();
                        format!(
                            "{}@{}:{}({})#{}:{:?}",
                            p.str(f.name),
                            p.str(f.filename),
                            f.start_line,
                            p.str(f.system_name),
                            line.line,
                            loc.kind
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect();
        let labels = s
            .labels
            .iter()
            .filter(|l| !drop.contains(&p.str(l.key)))
            .map(|l| {
                let v = match l.value {
                    LabelValue::Str(v) => p.str(v).to_owned(),
                    LabelValue::Num { value, unit } => format!("{value}{}", p.str(unit)),
                };
                (p.str(l.key).to_owned(), v)
            })
            .collect();
        let e = out
            .entry((stack, labels, s.link))
            .or_insert_with(|| (vec![0; s.values.len()], vec![]));
        for (a, v) in e.0.iter_mut().zip(&s.values) {
            *a += v;
        }
        e.1.extend(&s.timestamps);
        e.1.sort_unstable();
    }
    if !timestamps {
        for v in out.values_mut() {
            v.1.clear(); // compared separately where the shape keeps them
        }
    }
    out
}

fn types(p: &Profile) -> Vec<(String, String)> {
    p.sample_types
        .iter()
        .map(|vt| (p.str(vt.ty).to_owned(), p.str(vt.unit).to_owned()))
        .collect()
}

#[test]
fn round_trip_restores_the_model() {
    let p = agent_like();
    let all = EncodeOptions {
        thread_id: true,
        local_root_span_id: true,
        ..Default::default()
    };
    let back = otlp::reference::decode(&encode(&p, &all).encode_to_vec()).unwrap();
    assert_eq!(back.len(), 1);
    let d = &back[0];
    assert_eq!(d.profile_id, Some(*b"otelprof-test-id"));
    assert_eq!(d.scope_name, "otelprof");
    assert!(d.resource.contains(&KeyValue::new("service.name", "shop")));
    assert!(d.resource.contains(&KeyValue::new("process.pid", 4242)));
    let q = &d.profile;
    assert_eq!(
        types(q),
        types(&p),
        "the derived cpu/nanoseconds type is restored"
    );
    assert_eq!(
        (q.period, q.time_nanos, q.duration_nanos),
        (p.period, p.time_nanos, p.duration_nanos)
    );
    assert_eq!(canonical(q, &[]), canonical(&p, &[]));
    assert_eq!(q.strings()[0], "");

    // Default options: the ids are gone and what they kept apart is merged.
    let back =
        otlp::reference::decode(&encode(&p, &EncodeOptions::default()).encode_to_vec()).unwrap();
    let dropped = ["thread_id", "local_root_span_id"];
    assert_eq!(
        canonical(&back[0].profile, &dropped),
        canonical(&p, &dropped)
    );
    // gzip input is accepted too.
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&encode(&p, &all).encode_to_vec()).unwrap();
        e.finish().unwrap()
    };
    assert_eq!(
        canonical(&otlp::reference::decode(&gz).unwrap()[0].profile, &[]),
        canonical(&p, &[])
    );
}

#[test]
fn several_sample_types_become_several_profiles() {
    let mut b = ProfileBuilder::new(
        &[("alloc_objects", "count"), ("alloc_space", "bytes")],
        ("space", "bytes"),
        524_288,
    );
    let f = b.function("a.B.c", "B.java", 1);
    let l = b.location(f, 2, FrameKind::Jvm);
    b.add_sample(&[l], &[], &[2, 1024]);
    let p = b.build(T0, 1);
    let r = encode(&p, &EncodeOptions::default());
    check_rules(&r);
    let profiles = &r.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(profiles.len(), 2);
    assert_ne!(profiles[0].profile_id, profiles[1].profile_id);
    assert_eq!(profiles[1].samples[0].values, vec![1024]);
    let back = otlp::reference::decode(&r.encode_to_vec()).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(
        types(&back[1].profile),
        vec![("alloc_space".into(), "bytes".into())]
    );
}

/// The encoding of [`agent_like`] is pinned: a change in bytes must be a deliberate one.
/// Regenerate with `OTELPROF_UPDATE_GOLDEN=1 cargo test -p otel-bridge --test otlp_codec`.
#[test]
fn golden_encoding() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bytes = encode(&agent_like(), &EncodeOptions::default()).encode_to_vec();
    let text = format!("{:#?}\n", encode(&agent_like(), &EncodeOptions::default()));
    let (pb_path, txt_path) = (dir.join("cpu.otlp.pb"), dir.join("cpu.otlp.txt"));
    if std::env::var_os("OTELPROF_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&pb_path, &bytes).unwrap();
        std::fs::write(&txt_path, &text).unwrap();
    }
    let golden_text = std::fs::read_to_string(&txt_path).expect("golden text missing");
    assert_eq!(
        text,
        golden_text,
        "encoding changed; see {}",
        txt_path.display()
    );
    assert_eq!(
        bytes,
        std::fs::read(&pb_path).unwrap(),
        "encoded bytes changed"
    );
}

#[test]
fn malformed_inputs_are_rejected_not_trusted() {
    let p = agent_like();
    let good = encode(&p, &EncodeOptions::default());
    let mut r = good.clone();
    r.dictionary.as_mut().unwrap().string_table[0] = "x".into();
    assert!(matches!(
        otlp::reference::decode(&r.encode_to_vec()),
        Err(otlp::DecodeError::FirstStringNotEmpty(_))
    ));
    let mut r = good.clone();
    r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = 999;
    assert!(matches!(
        otlp::reference::decode(&r.encode_to_vec()),
        Err(otlp::DecodeError::OutOfRange { .. })
    ));
    let mut r = good.clone();
    r.dictionary.as_mut().unwrap().link_table[1].trace_id.pop();
    assert!(matches!(
        otlp::reference::decode(&r.encode_to_vec()),
        Err(otlp::DecodeError::BadIdLength { .. })
    ));
    let mut r = good.clone();
    r.resource_profiles[0].scope_profiles[0].profiles[0].profile_id = vec![1; 3];
    assert!(matches!(
        otlp::reference::decode(&r.encode_to_vec()),
        Err(otlp::DecodeError::BadProfileId(3))
    ));
    let mut r = good;
    let s = &mut r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0];
    s.values = vec![1, 2];
    s.timestamps_unix_nano = vec![1];
    assert!(matches!(
        otlp::reference::decode(&r.encode_to_vec()),
        Err(otlp::DecodeError::ValueCountMismatch { .. })
    ));
    assert!(otlp::reference::decode(&[0x1f, 0x8b, 0, 0]).is_err());
    assert!(otlp::reference::decode(&[]).unwrap().is_empty());
}

/// A random CPU-shaped model: a few functions, locations of every kind, samples with random
/// stacks, labels, links and weights.
fn arb_profile() -> impl Strategy<Value = Profile> {
    let sample = (
        prop::collection::vec(0usize..12, 0..8),
        0usize..4,
        prop::option::of(0u8..3),
        1i64..50,
        0usize..3,
    );
    (prop::collection::vec(sample, 0..40), 1i64..1_000_000).prop_map(|(samples, period)| {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            period,
        );
        let kinds = [
            FrameKind::Jvm,
            FrameKind::Native,
            FrameKind::Kernel,
            FrameKind::Pseudo,
        ];
        let locations: Vec<_> = (0..12)
            .map(|i| {
                let f = b.function(
                    &format!("p.C{}.m{}", i % 5, i),
                    &format!("C{}.java", i % 5),
                    i as i64,
                );
                b.location(f, 1 + i as i64 % 3, kinds[i % 4])
            })
            .collect();
        for (stack, thread, link, weight, span) in samples {
            let stack: Vec<_> = stack.iter().map(|&i| locations[i]).collect();
            let mut labels = vec![
                b.str_label("thread_name", &format!("t{}", thread % 2)),
                b.str_label("thread_id", &format!("{}", 100 + thread)),
            ];
            if span > 0 {
                labels.push(b.str_label("span_name", &format!("GET /{span}")));
            }
            let link = link.map(|n| Link {
                trace_id: [n + 1; 16],
                span_id: [n + 7; 8],
            });
            b.add_linked_sample(&stack, &labels, link, &[weight, weight * period], &[]);
        }
        b.build(T0, 1_000_000_000)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = otlp::reference::decode(&bytes);
    }

    #[test]
    fn mutated_encodings_never_panic(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode(&agent_like(), &EncodeOptions { thread_id: true, ..Default::default() }).encode_to_vec();
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = otlp::reference::decode(&bytes);
        let n = cut.index(bytes.len());
        let _ = otlp::reference::decode(&bytes[..n]);
    }

    #[test]
    fn arbitrary_models_round_trip(p in arb_profile()) {
        let options = EncodeOptions { thread_id: true, local_root_span_id: true, ..Default::default() };
        let r = encode(&p, &options);
        check_rules(&r);
        let back = otlp::reference::decode(&r.encode_to_vec()).unwrap();
        prop_assert_eq!(back.len(), 1);
        prop_assert_eq!(canonical(&back[0].profile, &[]), canonical(&p, &[]));
    }
}

// The production decoder (`otlp::decode`) against the reference (`otlp::reference::decode`).

/// An allocation profile: two sample types, so two OTLP profiles sharing one dictionary.
fn alloc_like() -> Profile {
    let mut b = ProfileBuilder::new(
        &[("alloc_objects", "count"), ("alloc_space", "bytes")],
        ("space", "bytes"),
        524_288,
    );
    let f = b.function("a.B.c", "B.java", 1);
    let g = b.function("a.B.d", "B.java", 9);
    let (l, m) = (
        b.location(f, 2, FrameKind::Jvm),
        b.location(g, 11, FrameKind::Native),
    );
    let t = b.str_label("thread_name", "main");
    b.add_sample(&[l, m], &[t], &[2, 1024]);
    b.add_sample(&[m], &[], &[1, 64]);
    b.build(T0, 1)
}

/// A wall-clock profile whose samples carry the thread state.
fn wall_like() -> Profile {
    let mut b = ProfileBuilder::new(
        &[("samples", "count"), ("wall", "nanoseconds")],
        ("wall", "nanoseconds"),
        50_000_000,
    );
    let f = b.function("java.lang.Object.wait", "Object.java", 300);
    let l = b.location(f, 338, FrameKind::Jvm);
    for (state, n) in [("WAITING", 3), ("BLOCKED", 1)] {
        let labels = [
            b.str_label("thread_name", "pool-1"),
            b.str_label("thread_state", state),
        ];
        b.add_linked_sample(&[l], &labels, Some(link(2)), &[n, n * 50_000_000], &[]);
    }
    b.build(T0, 60_000_000_000)
}

/// Reads `thread.state` as `thread_state`: the one attribute renaming the production decoder
/// does not undo (readers match the OTLP spelling; see `label_key_for_attribute` in
/// `src/otlp/decode.rs`), and the only way the two models may differ.
fn spelled_as_reference(c: Canon) -> Canon {
    c.into_iter()
        .map(|((stack, labels, link), v)| {
            let labels = labels
                .into_iter()
                .map(|(k, v)| match k.as_str() {
                    "thread.state" => ("thread_state".to_owned(), v),
                    _ => (k, v),
                })
                .collect();
            ((stack, labels, link), v)
        })
        .collect()
}

/// Both decoders' models of one request are the same: resources, sample and period types,
/// period, times, and the samples with their timestamps, compared by identity (the production
/// decoder keeps the dictionary's tables as they are, without merging equal entries).
fn assert_same_models(
    fast: &[(Vec<KeyValue>, Profile)],
    reference: &[otlp::reference::DecodedProfile],
) {
    assert_eq!(fast.len(), reference.len());
    for ((resource, f), r) in fast.iter().zip(reference) {
        let q = &r.profile;
        assert_eq!(resource, &r.resource);
        assert_eq!(types(f), types(q));
        let period_type = |p: &Profile| {
            (
                p.str(p.period_type.ty).to_owned(),
                p.str(p.period_type.unit).to_owned(),
            )
        };
        assert_eq!(period_type(f), period_type(q));
        assert_eq!(
            (f.period, f.time_nanos, f.duration_nanos),
            (q.period, q.time_nanos, q.duration_nanos)
        );
        assert_eq!(
            spelled_as_reference(canonical_keeping(f, &[], true)),
            canonical_keeping(q, &[], true)
        );
    }
}

fn assert_decoders_agree(bytes: &[u8]) {
    let fast = otlp::decode(bytes).unwrap();
    let reference = otlp::reference::decode(bytes).unwrap();
    assert_same_models(&fast, &reference);
}

#[test]
fn production_decoder_matches_the_reference_on_the_corpus() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cpu.otlp.pb");
    let mut corpus = vec![std::fs::read(golden).unwrap()];
    let all = EncodeOptions {
        timestamps: true,
        thread_id: true,
        local_root_span_id: true,
        ..Default::default()
    };
    for options in [
        EncodeOptions::default(),
        EncodeOptions {
            timestamps: true,
            ..Default::default()
        },
        all,
    ] {
        corpus.push(encode(&agent_like(), &options).encode_to_vec());
    }
    corpus.push(encode(&alloc_like(), &all).encode_to_vec());
    corpus.push(encode(&wall_like(), &all).encode_to_vec());
    for (i, bytes) in corpus.iter().enumerate() {
        assert!(!otlp::decode(bytes).unwrap().is_empty(), "corpus entry {i}");
        assert_decoders_agree(bytes);
    }
    // The wall profile's states arrive under both spellings, as documented.
    let fast = &otlp::decode(corpus.last().unwrap()).unwrap()[0].1;
    assert!(fast.samples[0]
        .labels
        .iter()
        .any(|l| fast.str(l.key) == "thread.state"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn production_decoder_matches_the_reference_on_arbitrary_models(
        p in arb_profile(),
        timestamps in any::<bool>(),
    ) {
        let options = EncodeOptions { timestamps, thread_id: true, local_root_span_id: true, ..Default::default() };
        assert_decoders_agree(&encode(&p, &options).encode_to_vec());
    }

    /// Where both decoders accept mutated bytes, they read the same model. (Their verdicts may
    /// differ: the production decoder checks every dictionary entry and reads a link without
    /// ids as no link; the reference checks only what samples refer to, and also checks
    /// mappings and the wire types of every field.)
    #[test]
    fn where_both_decoders_accept_mutated_bytes_they_agree(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let all = EncodeOptions { timestamps: true, thread_id: true, local_root_span_id: true, ..Default::default() };
        let mut bytes = encode(&agent_like(), &all).encode_to_vec();
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let n = cut.index(bytes.len());
        for b in [&bytes[..], &bytes[..n]] {
            if let (Ok(fast), Ok(reference)) = (otlp::decode(b), otlp::reference::decode(b)) {
                assert_same_models(&fast, &reference);
            }
        }
    }
}
