//! pprof (`perftools.profiles.Profile`) encoding and decoding.
//!
//! The wire types are declared by hand in the private `proto` module, with the field numbers of
//! Google's `proto/profile.proto` (<https://github.com/google/pprof/blob/main/proto/profile.proto>).
//!
//! Encoding is a direct copy: a model index is a valid pprof id (index 0 is the zero value in
//! both), so `Function.id`, `Location.id` and string indices are the model's indices and entry
//! 0 of each table is not emitted (pprof's `string_table[0] == ""` is emitted, as the spec asks).
//! Native and kernel locations carry their address and a `Mapping` (range, file offset, file
//! name, build id, `has_functions` since they are named already); Java frames have none.
//!
//! Decoding accepts gzip (what pprof files on disk are) or raw protobuf, treats the input as
//! untrusted (every id and index is checked, inflation is bounded) and maps arbitrary pprof ids
//! to dense model indices. It never panics.
//!
//! What pprof cannot carry: [`FrameKind`](crate::FrameKind), which decoding infers from the
//! mapping (none: [`FrameKind::Jvm`](crate::FrameKind::Jvm); `[kernel.kallsyms]`:
//! [`FrameKind::Kernel`](crate::FrameKind::Kernel); any other: native; placeholders come
//! back as Java frames), and a label that is neither a string nor a
//! number (`Label{key}` alone, which is how `LabelValue::Num{value: 0, unit: ""}` encodes)
//! decodes as the empty string label.

mod decode;
mod encode;
mod proto;

pub use decode::{decode, DecodeError, Table};
pub use encode::{encode, encode_gzip};

/// Largest profile [`decode`] inflates from gzip.
pub use crate::gzip::MAX_INFLATED_BYTES;

/// pprof label keys that carry a sample's [`Link`](crate::Link).
pub const LINK_TRACE_ID: &str = "trace_id";
pub const LINK_SPAN_ID: &str = "span_id";

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::GzEncoder;
    use flate2::Compression;
    use prost::Message;

    use super::decode::decode_with_limit;
    use super::*;
    use crate::gzip;
    use crate::model::{
        FrameKind, Label, LabelValue, LocationId, Profile, ProfileBuilder, Sample, StrId,
    };

    #[test]
    fn links_travel_as_trace_and_span_labels() {
        let mut b = ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 10);
        let f = b.function("a.B.c", "B.java", 3);
        let l = b.location(f, 7, crate::FrameKind::Jvm);
        let thread = b.str_label("thread_name", "main");
        let link =
            crate::Link::from_hex("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331").unwrap();
        b.add_linked_sample(&[l], &[thread], Some(link), &[2], &[]);
        b.add_linked_sample(&[l], &[thread], None, &[1], &[]);
        // A label that only looks like a link (bad hex) stays a label.
        let bogus = b.str_label("trace_id", "not-hex");
        b.add_sample(&[l], &[bogus], &[1]);
        let p = b.build(0, 1);
        let back = decode(&encode(&p)).unwrap();
        assert_eq!(back.samples.len(), 3);
        assert_eq!(back.samples[0].link, Some(link));
        assert_eq!(
            back.label_str(&back.samples[0], "thread_name"),
            Some("main")
        );
        assert_eq!(back.samples[0].labels.len(), 1);
        assert_eq!(back.samples[1].link, None);
        assert_eq!(back.samples[2].link, None);
        assert_eq!(
            back.label_str(&back.samples[2], "trace_id"),
            Some("not-hex")
        );
    }
    use proptest::prelude::*;

    /// A small CPU profile with everything the agent emits: two threads, a span label, a
    /// numeric label, a recursive stack and a comment.
    fn small_cpu_profile() -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10_000_000,
        );
        let main = b.function("com.example.Shop.main", "Shop.java", 10);
        let checkout = b.function("com.example.Shop.checkout", "Shop.java", 40);
        let price = b.function("com.example.Pricing.price", "Pricing.java", 7);
        let lambda = b.function("com.example.Shop$$Lambda.apply", "", 0);
        let l_main = b.location(main, 12, FrameKind::Jvm);
        let l_checkout = b.location(checkout, 44, FrameKind::Jvm);
        let l_price = b.location(price, 9, FrameKind::Jvm);
        let l_price2 = b.location(price, 11, FrameKind::Jvm);
        let l_lambda = b.location(lambda, 0, FrameKind::Jvm);
        let t_main = b.str_label("thread_name", "main");
        let t_worker = b.str_label("thread_name", "worker-1");
        let span = b.str_label("span_name", "GET /owners/{id}");
        let trace = b.str_label("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
        let bytes = b.intern("bytes");
        let key = b.intern("alloc_size");
        let num = Label {
            key,
            value: LabelValue::Num {
                value: 4096,
                unit: bytes,
            },
        };
        b.add_sample(&[l_checkout, l_main], &[t_main], &[3, 30_000_000]);
        b.add_sample(
            &[l_price, l_price2, l_lambda, l_checkout, l_main],
            &[t_worker, span, trace],
            &[5, 50_000_000],
        );
        b.add_sample(&[l_price, l_main], &[t_worker, num], &[1, 10_000_000]);
        b.add_comment("dropped_samples=0");
        b.build(1_700_000_000_000_000_000, 10_000_000_000)
    }

    fn stack_names(p: &Profile, s: &Sample) -> Vec<String> {
        p.stack(s.stack)
            .iter()
            .flat_map(|&l| p.location_function_names(l).map(str::to_owned))
            .collect()
    }

    fn labels_as_text(p: &Profile, s: &Sample) -> Vec<String> {
        s.labels
            .iter()
            .map(|l| match l.value {
                LabelValue::Str(v) => format!("{}={}", p.str(l.key), p.str(v)),
                LabelValue::Num { value, unit } => {
                    format!("{}={value}{}", p.str(l.key), p.str(unit))
                }
            })
            .collect()
    }

    #[test]
    fn round_trip_keeps_names_values_and_labels() {
        let original = small_cpu_profile();
        for bytes in [encode(&original), encode_gzip(&original)] {
            let decoded = decode(&bytes).unwrap();
            assert_eq!(decoded.samples.len(), original.samples.len());
            for (a, b) in original.samples.iter().zip(&decoded.samples) {
                assert_eq!(stack_names(&original, a), stack_names(&decoded, b));
                assert_eq!(a.values, b.values);
                assert_eq!(labels_as_text(&original, a), labels_as_text(&decoded, b));
            }
            assert_eq!(decoded.sample_type_index("cpu"), Some(1));
            assert_eq!(decoded.str(decoded.comments[0]), "dropped_samples=0");
            // Dense model ids encode as-is, so the whole profile survives unchanged.
            assert_eq!(decoded, original);
        }
    }

    #[test]
    fn native_and_kernel_frames_keep_their_mappings_and_kinds() {
        let mut b = ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 10);
        let java = b.function("a.B.c", "B.java", 3);
        let jvm = b.function("StringTable::intern", "", 0);
        let write = b.function("ksys_write", "", 0);
        let libjvm = b.mapping(0x7000..0x9000, 0x1000, "/usr/lib/libjvm.so", "97da31b2");
        let kernel = b.mapping(
            0xffff_ffff_8000_0000..u64::MAX,
            0,
            crate::model::KERNEL_MAPPING,
            "",
        );
        let stack = [
            b.code_location(write, FrameKind::Kernel, 0xffff_ffff_8100_0000, kernel),
            b.code_location(jvm, FrameKind::Native, 0x7123, libjvm),
            b.location(java, 7, FrameKind::Jvm),
        ];
        b.add_sample(&stack, &[], &[3]);
        let original = b.build(0, 1);
        let pb = proto::Profile::decode(encode(&original).as_slice()).unwrap();
        assert_eq!(pb.mapping.len(), 2);
        assert!(pb.mapping.iter().all(|m| m.has_functions && m.id != 0));
        assert_eq!(
            pb.string_table[pb.mapping[0].build_id as usize],
            b"97da31b2"
        );
        let decoded = decode(&encode_gzip(&original)).unwrap();
        assert_eq!(decoded, original);
        let kinds: Vec<FrameKind> = decoded
            .stack(decoded.samples[0].stack)
            .iter()
            .map(|&l| decoded.location(l).unwrap().kind)
            .collect();
        assert_eq!(
            kinds,
            [FrameKind::Kernel, FrameKind::Native, FrameKind::Jvm]
        );
    }

    #[test]
    fn gzip_output_has_magic_and_default_sample_type_is_last() {
        let p = small_cpu_profile();
        let gz = encode_gzip(&p);
        assert_eq!(gz[..2], gzip::MAGIC);
        let pb = proto::Profile::decode(encode(&p).as_slice()).unwrap();
        assert_eq!(pb.string_table[pb.default_sample_type as usize], b"cpu");
        assert!(pb.mapping.is_empty());
        // Leaf first, as the model.
        assert_eq!(pb.sample[1].location_id.len(), 5);
        assert_eq!(
            pb.sample[1].location_id[0],
            u64::from(p.stack(p.samples[1].stack)[0].0)
        );
    }

    #[test]
    fn encoding_matches_golden_file() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/small_cpu.pb");
        let actual = encode(&small_cpu_profile());
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden")).unwrap();
            std::fs::write(path, &actual).unwrap();
        }
        let expected = std::fs::read(path)
            .expect("golden file missing: run with UPDATE_GOLDEN=1 to create it");
        assert!(
            actual == expected,
            "pprof encoding changed; if intended, rerun with UPDATE_GOLDEN=1 and review \
             `go tool pprof -traces {path}`"
        );
    }

    /// The same profile written by Go's own encoder (`go tool pprof -proto small_cpu.pb`,
    /// gunzipped): decodes to the same stacks, values and labels.
    #[test]
    fn decodes_go_pprof_reencoding() {
        let go = include_bytes!("../tests/golden/small_cpu.go-reencoded.pb");
        let decoded = decode(go).unwrap();
        let original = small_cpu_profile();
        let mut want: Vec<_> = original
            .samples
            .iter()
            .map(|s| {
                (
                    stack_names(&original, s),
                    s.values.clone(),
                    labels_as_text(&original, s),
                )
            })
            .collect();
        let mut got: Vec<_> = decoded
            .samples
            .iter()
            .map(|s| {
                (
                    stack_names(&decoded, s),
                    s.values.clone(),
                    labels_as_text(&decoded, s),
                )
            })
            .collect();
        want.sort();
        got.sort();
        assert_eq!(got, want);
        assert_eq!(decoded.period, original.period);
        assert_eq!(decoded.time_nanos, original.time_nanos);
    }

    #[test]
    fn sparse_ids_map_to_dense_indices() {
        let st = |s: &str| s.as_bytes().to_vec();
        let p = proto::Profile {
            sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
            sample: vec![proto::Sample {
                location_id: vec![0xdead_beef, 7],
                value: vec![42],
                label: vec![proto::Label {
                    key: 4,
                    str: 5,
                    ..Default::default()
                }],
            }],
            location: vec![
                proto::Location {
                    id: 7,
                    line: vec![proto::Line {
                        function_id: u64::MAX,
                        line: 3,
                        column: 0,
                    }],
                    ..Default::default()
                },
                proto::Location {
                    id: 0xdead_beef,
                    address: 0x1234,
                    line: vec![proto::Line {
                        function_id: 99,
                        line: 1,
                        column: 0,
                    }],
                    ..Default::default()
                },
            ],
            function: vec![
                proto::Function {
                    id: 99,
                    name: 3,
                    ..Default::default()
                },
                proto::Function {
                    id: u64::MAX,
                    name: 6,
                    ..Default::default()
                },
            ],
            string_table: vec![
                st(""),
                st("cpu"),
                st("nanoseconds"),
                st("leaf"),
                st("k"),
                st("v"),
                st("root"),
            ],
            ..Default::default()
        };
        let decoded = decode(&p.encode_to_vec()).unwrap();
        let s = &decoded.samples[0];
        assert_eq!(decoded.stack(s.stack), [LocationId(2), LocationId(1)]);
        assert_eq!(stack_names(&decoded, s), vec!["leaf", "root"]);
        assert_eq!(decoded.locations()[2].address, 0x1234);
        assert_eq!(labels_as_text(&decoded, s), vec!["k=v"]);
    }

    fn expect_err(p: proto::Profile) -> String {
        decode(&p.encode_to_vec()).unwrap_err().to_string()
    }

    fn base() -> proto::Profile {
        proto::Profile {
            string_table: vec![Vec::new(), b"f".to_vec()],
            function: vec![proto::Function {
                id: 1,
                name: 1,
                ..Default::default()
            }],
            location: vec![proto::Location {
                id: 1,
                line: vec![proto::Line {
                    function_id: 1,
                    line: 0,
                    column: 0,
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn errors_name_the_table_and_the_id() {
        let mut p = base();
        p.sample.push(proto::Sample {
            location_id: vec![1, 5],
            ..Default::default()
        });
        assert_eq!(
            expect_err(p),
            "sample 0 refers to location id 5, which is not defined"
        );

        let mut p = base();
        p.location[0].line[0].function_id = 8;
        assert_eq!(
            expect_err(p),
            "location id 1 line 0 refers to function id 8, which is not defined"
        );

        let mut p = base();
        p.function[0].filename = 2;
        assert_eq!(
            expect_err(p),
            "function id 1 filename refers to string 2, but string_table has 2 entries"
        );

        let mut p = base();
        p.function.push(p.function[0]);
        assert_eq!(expect_err(p), "function id 1 is defined more than once");

        let mut p = base();
        p.location[0].id = 0;
        assert_eq!(
            expect_err(p),
            "a location has id 0, which pprof reserves for \"none\""
        );

        let mut p = base();
        p.string_table[0] = b"x".to_vec();
        assert_eq!(expect_err(p), "string_table[0] must be \"\", found \"x\"");

        let mut p = base();
        p.sample.push(proto::Sample {
            value: vec![1],
            ..Default::default()
        });
        assert_eq!(
            expect_err(p),
            "sample 0 has 1 values, but the profile has 0 sample types"
        );

        let mut p = base();
        p.comment.push(-1);
        assert_eq!(
            expect_err(p),
            "comment 0 refers to string -1, but string_table has 2 entries"
        );

        let gzip = decode(&[0x1f, 0x8b, 0, 1, 2]).unwrap_err();
        assert_eq!(gzip.to_string(), "bad gzip stream");
        assert!(std::error::Error::source(&gzip).is_some());
        let protobuf = decode(&[0xff; 9]).unwrap_err();
        assert_eq!(protobuf.to_string(), "not a pprof protobuf");
        assert!(std::error::Error::source(&protobuf).is_some());
    }

    #[test]
    fn empty_input_is_an_empty_profile() {
        // Every proto3 field has a default, so zero bytes are a valid (empty) message.
        let p = decode(&[]).unwrap();
        assert_eq!(p.strings(), [String::new()]);
        assert!(p.samples.is_empty());
    }

    #[test]
    fn inflation_is_bounded() {
        let p = small_cpu_profile();
        let raw_len = encode(&p).len();
        let gz = encode_gzip(&p);
        assert!(decode_with_limit(&gz, raw_len).is_ok());
        match decode_with_limit(&gz, raw_len - 1) {
            Err(DecodeError::TooLarge { limit }) => assert_eq!(limit, raw_len - 1),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn invalid_utf8_strings_decode_lossily() {
        let mut p = base();
        p.string_table[1] = vec![b'f', 0xff];
        let decoded = decode(&p.encode_to_vec()).unwrap();
        assert_eq!(decoded.strings()[1], "f\u{fffd}");
    }

    fn arbitrary_profile() -> impl Strategy<Value = Profile> {
        let name = "[a-z]{1,3}(\\.[A-Z][a-z]{0,3}){1,2}";
        let stack = prop::collection::vec((0usize..6, 0i64..50), 0..8);
        let label = (0usize..3, "[a-z0-9 ]{1,4}", prop::option::of(1i64..1000));
        let sample = (
            stack,
            prop::collection::vec(label, 0..3),
            prop::collection::vec(any::<i64>(), 2),
        );
        (
            prop::collection::vec(name, 6),
            prop::collection::vec(sample, 0..10),
            any::<i64>(),
        )
            .prop_map(|(names, samples, time)| {
                let mut b = ProfileBuilder::new(
                    &[("samples", "count"), ("cpu", "nanoseconds")],
                    ("cpu", "nanoseconds"),
                    10,
                );
                let functions: Vec<_> = names.iter().map(|n| b.function(n, "F.java", 1)).collect();
                for (stack, labels, values) in samples {
                    let stack: Vec<_> = stack
                        .into_iter()
                        .map(|(f, line)| b.location(functions[f], line, FrameKind::Jvm))
                        .collect();
                    let labels: Vec<_> = labels
                        .into_iter()
                        .map(|(k, v, num)| {
                            let key = ["thread_name", "span_name", "size"][k];
                            match num {
                                None => b.str_label(key, &v),
                                Some(n) => Label {
                                    key: b.intern(key),
                                    value: LabelValue::Num {
                                        value: n,
                                        unit: StrId(0),
                                    },
                                },
                            }
                        })
                        .collect();
                    b.add_sample(&stack, &labels, &values);
                }
                b.build(time, 1)
            })
    }

    /// A valid encoding to mutate: every message kind present, gzip-able.
    fn valid_encoding() -> Vec<u8> {
        encode(&small_cpu_profile())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn mutated_encodings_never_panic(
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in prop::option::of(any::<prop::sample::Index>()),
            gzip in any::<bool>(),
        ) {
            let mut bytes = valid_encoding();
            for (at, byte) in flips {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len()));
            }
            if gzip {
                let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
                gz.write_all(&bytes).unwrap();
                bytes = gz.finish().unwrap();
            }
            let _ = decode(&bytes);
        }

        #[test]
        fn mutated_gzip_never_panics(
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut bytes = encode_gzip(&small_cpu_profile());
            for (at, byte) in flips {
                // Keep the magic so the gzip path is the one exercised.
                let i = 2 + at.index(bytes.len() - 2);
                bytes[i] = byte;
            }
            let _ = decode(&bytes);
        }

        #[test]
        fn builder_profiles_round_trip_exactly(p in arbitrary_profile()) {
            prop_assert_eq!(decode(&encode_gzip(&p)).unwrap(), p);
        }
    }
}
