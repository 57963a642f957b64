//! The OTLP decoder against the protobuf encoding rules
//! (<https://protobuf.dev/programming-guides/encoding/>), one case per rule, as the official
//! parser (upb, behind Google's protobuf for Python) applies them. Each case was first found by
//! the differential test against that parser (`tests/tests/hostile/conformance`), which needs
//! Python; these run with `cargo test -p otel-bridge`.
//!
//! The requests are written byte by byte from a small valid one, so that each case changes
//! exactly one thing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use otel_bridge::otlp::{self, ErrorLayer};
use otel_bridge::{LabelValue, Profile};

// ---------------------------------------------------------------------------------------------
// Writing protobuf by hand.

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

fn tag(field: u32, wire: u8) -> Vec<u8> {
    varint(u64::from(field) << 3 | u64::from(wire))
}

/// A varint field.
fn num(field: u32, v: u64) -> Vec<u8> {
    [tag(field, VARINT), varint(v)].concat()
}

/// A length-delimited field.
fn ld(field: u32, payload: &[u8]) -> Vec<u8> {
    [
        tag(field, LEN),
        varint(payload.len() as u64),
        payload.to_vec(),
    ]
    .concat()
}

/// A packed repeated varint field.
fn packed(field: u32, values: &[u64]) -> Vec<u8> {
    let payload: Vec<u8> = values.iter().flat_map(|v| varint(*v)).collect();
    ld(field, &payload)
}

/// Bytes added at one place of [`request`], each appended to the message it names.
#[derive(Clone, Default)]
struct Extra {
    request: Vec<u8>,
    resource_profiles: Vec<u8>,
    resource: Vec<u8>,
    resource_value: Vec<u8>,
    scope_profiles: Vec<u8>,
    profile: Vec<u8>,
    sample_type: Vec<u8>,
    sample: Vec<u8>,
    dictionary: Vec<u8>,
    function: Vec<u8>,
    location: Vec<u8>,
    line: Vec<u8>,
    stack: Vec<u8>,
    attribute_value: Vec<u8>,
    link: Vec<u8>,
}

const STRINGS: [&str; 9] = [
    "",
    "samples",
    "count",
    "app.Main.main",
    "Main.java",
    "thread.name",
    "worker-1",
    "cpu",
    "nanoseconds",
];

/// The dictionary of [`request`]: one function, location, stack, thread-name attribute and link
/// after the zero entries.
fn dictionary(x: &Extra) -> Vec<u8> {
    let mut d = Vec::new();
    for s in STRINGS {
        d.extend(ld(5, s.as_bytes()));
    }
    d.extend(ld(1, &[])); // mapping_table[0]
    d.extend(ld(3, &[]));
    d.extend(ld(3, &[num(1, 3), num(3, 4), x.function.clone()].concat()));
    d.extend(ld(2, &[]));
    let line = [num(1, 1), num(2, 7), x.line.clone()].concat();
    d.extend(ld(2, &[ld(3, &line), x.location.clone()].concat()));
    d.extend(ld(7, &[]));
    d.extend(ld(7, &[packed(1, &[1]), x.stack.clone()].concat()));
    d.extend(ld(6, &[]));
    let value = [ld(1, b"worker-1"), x.attribute_value.clone()].concat();
    d.extend(ld(6, &[num(1, 5), ld(2, &value)].concat()));
    d.extend(ld(4, &[]));
    d.extend(ld(
        4,
        &[ld(1, &[7; 16]), ld(2, &[8; 8]), x.link.clone()].concat(),
    ));
    d.extend(&x.dictionary);
    d
}

/// A small valid request: one resource (`service.name`), one scope, one CPU profile with one
/// sample of 3 on the one stack, labelled with the thread name and linked to a trace.
fn request(x: &Extra) -> Vec<u8> {
    let sample = [
        num(1, 1),
        packed(2, &[1]),
        num(3, 1),
        packed(4, &[3]),
        x.sample.clone(),
    ]
    .concat();
    let profile = [
        ld(1, &[num(1, 1), num(2, 2), x.sample_type.clone()].concat()),
        ld(2, &sample),
        [
            tag(3, FIXED64),
            1_700_000_000_000_000_000u64.to_le_bytes().to_vec(),
        ]
        .concat(),
        num(4, 10_000_000_000),
        ld(5, &[num(1, 7), num(2, 8)].concat()),
        num(6, 10_000_000),
        ld(7, &[1; 16]),
        x.profile.clone(),
    ]
    .concat();
    let scope_profiles = [
        ld(1, &ld(1, b"otelprof")),
        ld(2, &profile),
        x.scope_profiles.clone(),
    ]
    .concat();
    let value = [ld(1, b"shop"), x.resource_value.clone()].concat();
    let resource = [
        ld(1, &[ld(1, b"service.name"), ld(2, &value)].concat()),
        x.resource.clone(),
    ]
    .concat();
    let resource_profiles = [
        ld(1, &resource),
        ld(2, &scope_profiles),
        x.resource_profiles.clone(),
    ]
    .concat();
    [
        ld(1, &resource_profiles),
        ld(2, &dictionary(x)),
        x.request.clone(),
    ]
    .concat()
}

fn accepted(bytes: &[u8]) -> (Vec<opentelemetry::KeyValue>, Profile) {
    let checked = otlp::check_request(bytes);
    let decoded = otlp::decode(bytes);
    match (checked, decoded) {
        (Ok(_), Ok(mut d)) => {
            assert_eq!(d.len(), 1);
            d.remove(0)
        }
        (c, d) => panic!(
            "rejected: check_request says {:?}, decode says {:?}",
            c.err().map(|e| e.to_string()),
            d.err().map(|e| e.to_string())
        ),
    }
}

/// Rejected by both modes of the decoder as protobuf, not as OTLP.
fn rejected(bytes: &[u8]) -> String {
    for result in [
        otlp::check_request(bytes).map(|_| ()),
        otlp::decode(bytes).map(|_| ()),
    ] {
        let e = result.expect_err("accepted");
        assert_eq!(e.layer(), ErrorLayer::Encoding, "{e}");
    }
    otlp::check_request(bytes).unwrap_err().to_string()
}

/// One sample, read back: (stack frames as function names, value, labels as text, linked).
fn the_sample(p: &Profile) -> (Vec<String>, i64, Vec<String>, bool) {
    assert_eq!(p.samples.len(), 1);
    let s = &p.samples[0];
    let frames = p
        .stack(s.stack)
        .iter()
        .flat_map(|l| p.location_function_names(*l).map(str::to_owned))
        .collect();
    let labels = s
        .labels
        .iter()
        .map(|l| match l.value {
            LabelValue::Str(v) => format!("{}={}", p.str(l.key), p.str(v)),
            LabelValue::Num { value, .. } => format!("{}={value}", p.str(l.key)),
        })
        .collect();
    (frames, s.values[0], labels, s.link.is_some())
}

fn plain() -> (Vec<String>, i64, Vec<String>, bool) {
    (
        vec!["app.Main.main".to_owned()],
        3,
        vec!["thread_name=worker-1".to_owned()],
        true,
    )
}

#[test]
fn the_request_these_cases_start_from_is_valid() {
    let (resource, p) = accepted(&request(&Extra::default()));
    assert_eq!(resource.len(), 1);
    assert_eq!(the_sample(&p), plain());
}

// ---------------------------------------------------------------------------------------------
// Accepted: what protobuf allows.

#[test]
fn a_dictionary_split_over_two_occurrences_is_merged() {
    // The encoding guide: a message field that occurs twice is merged, and repeated fields
    // (the tables) concatenate. The second occurrence here holds one more string.
    let x = Extra {
        request: ld(2, &ld(5, b"extra")),
        ..Extra::default()
    };
    let (_, p) = accepted(&request(&x));
    assert_eq!(the_sample(&p), plain());
    assert_eq!(p.strings()[STRINGS.len()], "extra");
    // Split where the tables are: strings in the first, everything else in the second.
    let whole = dictionary(&Extra::default());
    let strings_end: usize = STRINGS.iter().map(|s| ld(5, s.as_bytes()).len()).sum();
    let bytes = request(&Extra::default());
    let split = [
        bytes[..bytes.len() - ld(2, &whole).len()].to_vec(),
        ld(2, &whole[..strings_end]),
        ld(2, &whole[strings_end..]),
    ]
    .concat();
    let (_, p) = accepted(&split);
    assert_eq!(the_sample(&p), plain());
}

#[test]
fn a_resource_split_over_two_occurrences_is_merged() {
    let x = Extra {
        resource_profiles: ld(
            1,
            &ld(1, &[ld(1, b"host.name"), ld(2, &ld(1, b"box-1"))].concat()),
        ),
        ..Extra::default()
    };
    let (resource, _) = accepted(&request(&x));
    let keys: Vec<&str> = resource.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["service.name", "host.name"]);
}

#[test]
fn a_value_type_split_over_two_occurrences_is_merged() {
    // sample_type {type: "samples"} then {unit: "count"}: one value type samples/count (the
    // second occurrence does not reset the type to 0).
    let x = Extra {
        profile: [ld(1, &num(1, 1)), ld(1, &num(2, 2))].concat(),
        ..Extra::default()
    };
    let (_, p) = accepted(&request(&x));
    let st = p.sample_types[0];
    assert_eq!((p.str(st.ty), p.str(st.unit)), ("samples", "count"));
}

#[test]
fn an_attribute_value_survives_unknown_fields_after_it() {
    let x = Extra {
        attribute_value: num(99, 1),
        resource_value: [tag(98, FIXED32), vec![0; 4]].concat(),
        ..Extra::default()
    };
    let (resource, p) = accepted(&request(&x));
    assert_eq!(the_sample(&p), plain());
    assert_eq!(resource.len(), 1);
}

#[test]
fn of_a_scalar_written_twice_the_last_counts_and_only_it_is_checked() {
    // name_strindex 99 (out of range) then 3; a profile id of 3 bytes then one of 16.
    let x = Extra {
        function: [num(1, 99), num(1, 3)].concat(),
        profile: [ld(7, &[1, 2, 3]), ld(7, &[2; 16])].concat(),
        ..Extra::default()
    };
    let (_, p) = accepted(&request(&x));
    assert_eq!(the_sample(&p), plain());
}

#[test]
fn groups_are_skipped_as_unknown_fields() {
    // An unknown group holding a varint and a nested group, in a sample; the scope written as a
    // group (a message field with the group wire type is an unknown field).
    let group = [
        tag(9, START_GROUP),
        num(1, 5),
        tag(10, START_GROUP),
        tag(10, END_GROUP),
        tag(9, END_GROUP),
    ]
    .concat();
    let scope_as_group = [tag(1, START_GROUP), num(3, 1), tag(1, END_GROUP)].concat();
    let x = Extra {
        sample: group.clone(),
        scope_profiles: scope_as_group,
        request: group,
        ..Extra::default()
    };
    let (_, p) = accepted(&request(&x));
    assert_eq!(the_sample(&p), plain());
}

#[test]
fn a_known_field_with_another_wire_type_is_an_unknown_field() {
    // attribute_indices as fixed32, the link index as fixed64, the resource as a varint: each
    // is kept aside by protobuf parsers, not rejected, and the value it would have had is not
    // read.
    let x = Extra {
        sample: [
            tag(2, FIXED32),
            vec![1, 0, 0, 0],
            tag(3, FIXED64),
            vec![0; 8],
        ]
        .concat(),
        resource_profiles: num(1, 5),
        ..Extra::default()
    };
    let (resource, p) = accepted(&request(&x));
    assert_eq!(the_sample(&p), plain());
    assert_eq!(resource.len(), 1);
}

#[test]
fn repeated_numbers_are_read_packed_or_not() {
    // values 3 (packed) then 4 and 5 unpacked: a sample of three values summed; the stack's
    // location 1 again, unpacked.
    let x = Extra {
        sample: [num(4, 4), num(4, 5)].concat(),
        stack: num(1, 1),
        ..Extra::default()
    };
    let (_, p) = accepted(&request(&x));
    let (frames, value, _, _) = the_sample(&p);
    assert_eq!(frames, ["app.Main.main", "app.Main.main"]);
    assert_eq!(value, 12);
}

#[test]
fn bytes_fields_may_hold_anything() {
    // Not UTF-8 in a link's trace id, a profile's original payload and an attribute's bytes
    // value: only `string` fields must be UTF-8.
    let x = Extra {
        link: ld(1, &[0xff; 16]),
        profile: ld(10, &[0xc0, 0x80]),
        resource_value: ld(7, &[0xed, 0xa0, 0x80]),
        ..Extra::default()
    };
    accepted(&request(&x));
}

#[test]
fn encodings_at_the_length_limits_are_accepted() {
    // A tag and a length of 5 bytes, a varint of 10 whose bits past 64 are dropped.
    let x = Extra {
        sample: [
            vec![0x98, 0x80, 0x80, 0x80, 0x00, 1], // field 3 (link_index) = 1
            vec![0x8a, 0x80, 0x80, 0x80, 0x00],    // field 1 (unknown here: LEN) of ...
            vec![0x80, 0x80, 0x80, 0x80, 0x00],    // ... length 0
            [vec![0x48], vec![0xff; 9], vec![0x7f]].concat(), // field 9, 10-byte varint
        ]
        .concat(),
        ..Extra::default()
    };
    let (_, p) = accepted(&request(&x));
    assert_eq!(the_sample(&p), plain());
}

#[test]
fn attribute_values_nest_100_deep() {
    // request 0 > resource_profiles 1 > resource 2 > key value 3 > value 4, then 48 arrays of
    // values: the innermost value is at depth 100, the limit.
    let mut value = ld(1, b"deep");
    for _ in 0..48 {
        value = ld(5, &ld(1, &value));
    }
    let x = Extra {
        resource: ld(1, &[ld(1, b"deep"), ld(2, &value)].concat()),
        ..Extra::default()
    };
    accepted(&request(&x));
}

#[test]
fn broken_indices_in_tables_nothing_refers_to_are_not_checked() {
    // A request without profiles: OTLP's rules have nothing to apply to, but the encoding is
    // protobuf's (see rejected_in_tables_nothing_refers_to below).
    let dict = [ld(5, b""), ld(3, &num(1, 99))].concat();
    assert_eq!(
        otlp::check_request(&ld(2, &dict)).unwrap(),
        otlp::Checked::default()
    );
}

// ---------------------------------------------------------------------------------------------
// Rejected: what protobuf forbids, wherever it is, as the official parser does.

#[test]
fn field_number_0_is_rejected() {
    for x in [
        Extra {
            sample: num(0, 1),
            ..Extra::default()
        },
        Extra {
            request: ld(0, b""),
            ..Extra::default()
        },
    ] {
        assert!(rejected(&request(&x)).contains("field number 0"));
    }
}

#[test]
fn wire_types_6_and_7_are_rejected() {
    for wire in [6, 7] {
        let x = Extra {
            location: tag(9, wire),
            ..Extra::default()
        };
        assert!(rejected(&request(&x)).contains("wire type 6 or 7"));
    }
}

#[test]
fn unbalanced_groups_are_rejected() {
    for bad in [
        // An end-group tag with no group open.
        tag(9, END_GROUP),
        // A group closed by another field's end-group tag.
        [tag(9, START_GROUP), tag(8, END_GROUP)].concat(),
        // A group never closed (its message ends first).
        [tag(9, START_GROUP), num(1, 1)].concat(),
    ] {
        let x = Extra {
            sample: bad,
            ..Extra::default()
        };
        rejected(&request(&x));
    }
}

#[test]
fn overlong_tags_lengths_and_varints_are_rejected() {
    for bad in [
        // A tag of 6 bytes (field 9, varint 0).
        vec![0xc8, 0x80, 0x80, 0x80, 0x80, 0x00, 0],
        // A tag over 32 bits.
        vec![0x80, 0x80, 0x80, 0x80, 0x10, 0],
        // A length of 6 bytes (field 9, LEN 0).
        vec![0x4a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
        // A varint of 11 bytes (field 9).
        [vec![0x48], vec![0xff; 10], vec![0x01]].concat(),
    ] {
        let x = Extra {
            line: bad,
            ..Extra::default()
        };
        rejected(&request(&x));
    }
}

#[test]
fn attribute_values_nested_past_100_are_rejected() {
    // One level more than attribute_values_nest_100_deep; also an unknown group at depth 101.
    let mut value = ld(1, b"deep");
    for _ in 0..49 {
        value = ld(5, &ld(1, &value));
    }
    let mut group_at_101 = [tag(9, START_GROUP), tag(9, END_GROUP)].concat();
    for _ in 0..48 {
        group_at_101 = ld(5, &ld(1, &group_at_101));
    }
    for v in [value, group_at_101] {
        let x = Extra {
            resource: ld(1, &[ld(1, b"deep"), ld(2, &v)].concat()),
            ..Extra::default()
        };
        assert!(rejected(&request(&x)).contains("nested more than 100 deep"));
    }
}

#[test]
fn invalid_utf8_in_any_string_field_is_rejected() {
    // The string table, a resource key, the scope's name, a schema URL, a profile's original
    // payload format, a string inside an array value, an entity reference's type; an over-long
    // NUL, a surrogate, a stray continuation byte.
    let bad: &[u8] = &[b'a', 0xc0, 0x80];
    let in_array = ld(5, &ld(1, &ld(1, &[0xed, 0xa0, 0x80])));
    for x in [
        Extra {
            dictionary: ld(5, bad),
            ..Extra::default()
        },
        Extra {
            resource: ld(1, &ld(1, bad)),
            ..Extra::default()
        },
        Extra {
            scope_profiles: ld(1, &ld(1, bad)),
            ..Extra::default()
        },
        Extra {
            resource_profiles: ld(3, &[0x80]),
            ..Extra::default()
        },
        Extra {
            profile: ld(9, bad),
            ..Extra::default()
        },
        Extra {
            resource: ld(1, &[ld(1, b"k"), ld(2, &in_array)].concat()),
            ..Extra::default()
        },
        Extra {
            resource: ld(3, &ld(2, bad)),
            ..Extra::default()
        },
    ] {
        assert_eq!(rejected(&request(&x)), "a string field is not UTF-8");
    }
}

#[test]
fn malformed_contents_of_fields_the_model_does_not_keep_are_rejected() {
    for x in [
        // A mapping whose varint is cut off.
        Extra {
            dictionary: ld(1, &[tag(1, VARINT), vec![0x80]].concat()),
            ..Extra::default()
        },
        // A profile's packed attribute indices ending inside a varint.
        Extra {
            profile: ld(11, &[0x80]),
            ..Extra::default()
        },
        // A line's column of 11 bytes.
        Extra {
            line: [tag(3, VARINT), vec![0xff; 10], vec![0x01]].concat(),
            ..Extra::default()
        },
        // Packed timestamps whose length is not a multiple of 8.
        Extra {
            sample: ld(5, &[0; 12]),
            ..Extra::default()
        },
    ] {
        rejected(&request(&x));
    }
}

#[test]
fn rejected_in_tables_nothing_refers_to() {
    // Without profiles the tables are not checked against OTLP's rules, but their encoding is
    // read, as the official parser reads it: a function whose varint is cut off.
    let dict = [ld(5, b""), ld(3, &[tag(1, VARINT), vec![0x80]].concat())].concat();
    rejected(&ld(2, &dict));
}
