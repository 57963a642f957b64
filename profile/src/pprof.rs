//! pprof (`perftools.profiles.Profile`) encoding and decoding.
//!
//! The wire types are declared by hand in the private `proto` module, with the field numbers of
//! Google's `proto/profile.proto`.
//!
//! Encoding is a direct copy: a model index is a valid pprof id (index 0 is the zero value in
//! both), so `Function.id`, `Location.id` and string indices are the model's indices and entry
//! 0 of each table is not emitted (pprof's `string_table[0] == ""` is emitted, as the spec asks).
//! No `Mapping` is emitted: Java frames have none, and `go tool pprof` does not need one.
//!
//! Decoding accepts gzip (what pprof files on disk are) or raw protobuf, treats the input as
//! untrusted (every id and index is checked, inflation is bounded) and maps arbitrary pprof ids
//! to dense model indices. It never panics.
//!
//! What pprof cannot carry: [`FrameKind`] (every decoded location is [`FrameKind::Jvm`]), and a
//! label that is neither a string nor a number (`Label{key}` alone, which is how
//! `LabelValue::Num{value: 0, unit: ""}` encodes) decodes as the empty string label.

mod proto;

use std::collections::HashMap;
use std::fmt;
use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::gzip;
use crate::model::{
    FrameKind, Function, FunctionId, Label, LabelValue, Line, Lines, Location, LocationId, Profile,
    Sample, StrId, ValueType,
};

/// Largest profile [`decode`] inflates from gzip.
pub use crate::gzip::MAX_INFLATED_BYTES;

/// Uncompressed pprof protobuf bytes of `profile`.
pub fn encode(profile: &Profile) -> Vec<u8> {
    to_pb(profile).encode_to_vec()
}

/// `profile` as a gzip-compressed pprof file, the form `go tool pprof` and pprof consumers
/// expect on disk.
pub fn encode_gzip(profile: &Profile) -> Vec<u8> {
    let raw = encode(profile);
    let mut gz = GzEncoder::new(
        Vec::with_capacity(raw.len() / 4 + 64),
        Compression::default(),
    );
    match gz.write_all(&raw).and_then(|()| gz.finish()) {
        Ok(bytes) => bytes,
        // The sink is a Vec, which never fails a write, so this is unreachable in practice. If
        // it ever happened, the uncompressed encoding is still a valid pprof file: every pprof
        // reader (and `decode`) accepts both.
        Err(_) => raw,
    }
}

/// pprof label keys that carry a sample's [`Link`](crate::Link).
pub const LINK_TRACE_ID: &str = "trace_id";
pub const LINK_SPAN_ID: &str = "span_id";

/// Strings appended to an encoded string table, deduplicated against the model's.
struct ExtraStrings<'a> {
    table: &'a mut Vec<Vec<u8>>,
    index: std::collections::HashMap<String, i64>,
}

impl<'a> ExtraStrings<'a> {
    fn new(model: &[String], table: &'a mut Vec<Vec<u8>>) -> Self {
        let index = model
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i as i64))
            .collect();
        ExtraStrings { table, index }
    }

    fn index(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.as_bytes().to_vec());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// Turns a `trace_id` + `span_id` label pair holding valid hex ids back into a link.
fn take_link(labels: &mut Vec<Label>, strings: &[String]) -> Option<crate::Link> {
    let text = |id: StrId| strings.get(id.0 as usize).map(String::as_str).unwrap_or("");
    let find = |labels: &[Label], key: &str| {
        labels
            .iter()
            .position(|l| text(l.key) == key && matches!(l.value, LabelValue::Str(_)))
    };
    let (t, s) = (find(labels, LINK_TRACE_ID)?, find(labels, LINK_SPAN_ID)?);
    let value = |i: usize| match labels.get(i).map(|l| l.value) {
        Some(LabelValue::Str(v)) => text(v),
        _ => "",
    };
    let link = crate::Link::from_hex(value(t), value(s))?;
    let (first, second) = (t.max(s), t.min(s));
    labels.remove(first);
    labels.remove(second);
    Some(link)
}

fn str_index(id: StrId) -> i64 {
    i64::from(id.0)
}

fn to_pb(p: &Profile) -> proto::Profile {
    let value_type = |vt: &ValueType| proto::ValueType {
        r#type: str_index(vt.ty),
        unit: str_index(vt.unit),
    };
    let mut string_table: Vec<Vec<u8>> = p.strings.iter().map(|s| s.as_bytes().to_vec()).collect();
    if string_table.is_empty() {
        string_table.push(Vec::new());
    }
    // Links become the string labels `trace_id` / `span_id` (lowercase hex, Pyroscope's
    // names); their strings are appended to the table here, not kept in the model.
    let mut extra = ExtraStrings::new(&p.strings, &mut string_table);
    let sample = p
        .samples
        .iter()
        .map(|s| {
            let mut label: Vec<proto::Label> = s.labels.iter().map(label_to_pb).collect();
            if let Some(link) = s.link {
                for (key, value) in [
                    (LINK_TRACE_ID, link.trace_id_hex()),
                    (LINK_SPAN_ID, link.span_id_hex()),
                ] {
                    label.push(proto::Label {
                        key: extra.index(key),
                        str: extra.index(&value),
                        num: 0,
                        num_unit: 0,
                    });
                }
            }
            proto::Sample {
                location_id: s.locations.iter().map(|l| u64::from(l.0)).collect(),
                value: s.values.clone(),
                label,
            }
        })
        .collect();
    proto::Profile {
        sample_type: p.sample_types.iter().map(value_type).collect(),
        sample,
        mapping: Vec::new(),
        location: p
            .locations
            .iter()
            .enumerate()
            .skip(1)
            .map(|(id, loc)| proto::Location {
                id: id as u64,
                mapping_id: 0,
                address: loc.address,
                line: loc
                    .lines
                    .iter()
                    .map(|line| proto::Line {
                        function_id: u64::from(line.function.0),
                        line: line.line,
                        column: 0,
                    })
                    .collect(),
                is_folded: false,
            })
            .collect(),
        function: p
            .functions
            .iter()
            .enumerate()
            .skip(1)
            .map(|(id, f)| proto::Function {
                id: id as u64,
                name: str_index(f.name),
                system_name: str_index(f.system_name),
                filename: str_index(f.filename),
                start_line: f.start_line,
            })
            .collect(),
        string_table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: p.time_nanos,
        duration_nanos: p.duration_nanos,
        period_type: Some(value_type(&p.period_type)),
        period: p.period,
        comment: p.comments.iter().map(|&c| str_index(c)).collect(),
        default_sample_type: p.sample_types.last().map_or(0, |vt| str_index(vt.ty)),
    }
}

fn label_to_pb(label: &Label) -> proto::Label {
    match label.value {
        LabelValue::Str(s) => proto::Label {
            key: str_index(label.key),
            str: str_index(s),
            ..Default::default()
        },
        LabelValue::Num { value, unit } => proto::Label {
            key: str_index(label.key),
            num: value,
            num_unit: str_index(unit),
            ..Default::default()
        },
    }
}

/// The pprof tables that other messages refer to by id or index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    String,
    Function,
    Location,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Table::String => "string",
            Table::Function => "function",
            Table::Location => "location",
        })
    }
}

/// Why bytes are not a usable pprof profile. Every variant means the same to the caller: this
/// input is rejected as a whole (a half-decoded profile would skew every number built on it).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("bad gzip stream")]
    Gzip(#[source] std::io::Error),
    #[error("profile inflates to more than {limit} bytes (a gzip bomb, or not a profile)")]
    TooLarge { limit: usize },
    #[error("not a pprof protobuf")]
    Protobuf(#[from] prost::DecodeError),
    #[error("string_table[0] must be \"\", found {found:?}")]
    FirstStringNotEmpty { found: String },
    #[error("{referrer} refers to string {index}, but string_table has {len} entries")]
    StringOutOfRange {
        referrer: String,
        index: i64,
        len: usize,
    },
    #[error("{referrer} refers to {table} id {id}, which is not defined")]
    UnknownId {
        referrer: String,
        table: Table,
        id: u64,
    },
    #[error("{table} id {id} is defined more than once")]
    DuplicateId { table: Table, id: u64 },
    #[error("a {table} has id 0, which pprof reserves for \"none\"")]
    ZeroId { table: Table },
    #[error("sample {sample} has {values} values, but the profile has {types} sample types")]
    ValueCountMismatch {
        sample: usize,
        values: usize,
        types: usize,
    },
    #[error("the {table} table has more entries than the model can index")]
    TableTooLarge { table: Table },
}

impl From<gzip::InflateError> for DecodeError {
    fn from(e: gzip::InflateError) -> DecodeError {
        match e {
            gzip::InflateError::Gzip(e) => DecodeError::Gzip(e),
            gzip::InflateError::TooLarge { limit } => DecodeError::TooLarge { limit },
        }
    }
}

/// Decodes a pprof profile, gzip-compressed (magic `1f 8b`) or raw protobuf.
pub fn decode(bytes: &[u8]) -> Result<Profile, DecodeError> {
    decode_with_limit(bytes, MAX_INFLATED_BYTES)
}

fn decode_with_limit(bytes: &[u8], limit: usize) -> Result<Profile, DecodeError> {
    let raw = gzip::inflate_bounded(bytes, limit)?;
    from_pb(proto::Profile::decode(&*raw)?)
}

/// Maps pprof's arbitrary non-zero ids to dense model indices (position in the message + 1).
struct IdMap {
    table: Table,
    ids: HashMap<u64, u32>,
}

impl IdMap {
    fn build(table: Table, ids: impl ExactSizeIterator<Item = u64>) -> Result<Self, DecodeError> {
        let mut map = HashMap::with_capacity(ids.len());
        for (position, id) in ids.enumerate() {
            if id == 0 {
                return Err(DecodeError::ZeroId { table });
            }
            let index = position
                .checked_add(1)
                .and_then(|i| u32::try_from(i).ok())
                .ok_or(DecodeError::TableTooLarge { table })?;
            if map.insert(id, index).is_some() {
                return Err(DecodeError::DuplicateId { table, id });
            }
        }
        Ok(IdMap { table, ids: map })
    }

    fn get(&self, id: u64, referrer: impl FnOnce() -> String) -> Result<u32, DecodeError> {
        self.ids
            .get(&id)
            .copied()
            .ok_or_else(|| DecodeError::UnknownId {
                referrer: referrer(),
                table: self.table,
                id,
            })
    }
}

struct Strings {
    len: usize,
}

impl Strings {
    fn id(&self, index: i64, referrer: impl FnOnce() -> String) -> Result<StrId, DecodeError> {
        usize::try_from(index)
            .ok()
            .filter(|&i| i < self.len)
            .and_then(|i| u32::try_from(i).ok())
            .map(StrId)
            .ok_or_else(|| DecodeError::StringOutOfRange {
                referrer: referrer(),
                index,
                len: self.len,
            })
    }

    fn value_type(&self, vt: &proto::ValueType, what: &str) -> Result<ValueType, DecodeError> {
        Ok(ValueType {
            ty: self.id(vt.r#type, || format!("{what} type"))?,
            unit: self.id(vt.unit, || format!("{what} unit"))?,
        })
    }
}

fn from_pb(p: proto::Profile) -> Result<Profile, DecodeError> {
    let mut strings: Vec<String> = p
        .string_table
        .into_iter()
        .map(|b| {
            String::from_utf8(b)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        })
        .collect();
    match strings.first() {
        None => strings.push(String::new()),
        Some(first) if !first.is_empty() => {
            return Err(DecodeError::FirstStringNotEmpty {
                found: first.clone(),
            })
        }
        Some(_) => {}
    }
    if u32::try_from(strings.len()).is_err() {
        return Err(DecodeError::TableTooLarge {
            table: Table::String,
        });
    }
    let st = Strings { len: strings.len() };

    let sample_types = p
        .sample_type
        .iter()
        .enumerate()
        .map(|(i, vt)| st.value_type(vt, &format!("sample_type {i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let period_type = match &p.period_type {
        Some(vt) => st.value_type(vt, "period_type")?,
        None => ValueType::default(),
    };

    let function_ids = IdMap::build(Table::Function, p.function.iter().map(|f| f.id))?;
    let mut functions = Vec::with_capacity(p.function.len() + 1);
    functions.push(Function::default());
    for f in &p.function {
        let referrer = |field: &'static str| move || format!("function id {} {field}", f.id);
        functions.push(Function {
            name: st.id(f.name, referrer("name"))?,
            system_name: st.id(f.system_name, referrer("system_name"))?,
            filename: st.id(f.filename, referrer("filename"))?,
            start_line: f.start_line,
        });
    }

    let location_ids = IdMap::build(Table::Location, p.location.iter().map(|l| l.id))?;
    let mut locations = Vec::with_capacity(p.location.len() + 1);
    locations.push(Location::default());
    for loc in &p.location {
        let lines = loc
            .line
            .iter()
            .enumerate()
            .map(|(i, line)| {
                // function_id 0 is pprof's "no function" (an unsymbolized line).
                let function = if line.function_id == 0 {
                    FunctionId(0)
                } else {
                    FunctionId(function_ids.get(line.function_id, || {
                        format!("location id {} line {i}", loc.id)
                    })?)
                };
                Ok(Line {
                    function,
                    line: line.line,
                })
            })
            .collect::<Result<Lines, DecodeError>>()?;
        locations.push(Location {
            lines,
            kind: FrameKind::Jvm,
            address: loc.address,
        });
    }

    let mut samples = Vec::with_capacity(p.sample.len());
    for (i, s) in p.sample.into_iter().enumerate() {
        if s.value.len() != sample_types.len() {
            return Err(DecodeError::ValueCountMismatch {
                sample: i,
                values: s.value.len(),
                types: sample_types.len(),
            });
        }
        let locations = s
            .location_id
            .iter()
            .map(|&id| Ok(LocationId(location_ids.get(id, || format!("sample {i}"))?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let mut labels = s
            .label
            .iter()
            .map(|l| label_from_pb(l, &st, i))
            .collect::<Result<Vec<_>, _>>()?;
        labels.sort_unstable();
        labels.dedup();
        let link = take_link(&mut labels, &strings);
        samples.push(Sample {
            locations,
            values: s.value,
            labels,
            link,
            timestamps: Vec::new(),
        });
    }

    let comments = p
        .comment
        .iter()
        .enumerate()
        .map(|(i, &c)| st.id(c, || format!("comment {i}")))
        .collect::<Result<Vec<_>, _>>()?;

    Ok(Profile {
        strings,
        sample_types,
        period_type,
        period: p.period,
        time_nanos: p.time_nanos,
        duration_nanos: p.duration_nanos,
        functions,
        locations,
        samples,
        comments,
    })
}

fn label_from_pb(l: &proto::Label, st: &Strings, sample: usize) -> Result<Label, DecodeError> {
    let key = st.id(l.key, || format!("sample {sample} label key"))?;
    // profile.proto: "at most one of str and num must be present". A label with neither
    // decodes as the empty string, proto3's reading of an unset field.
    let value = if l.str != 0 || (l.num == 0 && l.num_unit == 0) {
        LabelValue::Str(st.id(l.str, || format!("sample {sample} label value"))?)
    } else {
        LabelValue::Num {
            value: l.num,
            unit: st.id(l.num_unit, || format!("sample {sample} label num_unit"))?,
        }
    };
    Ok(Label { key, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProfileBuilder;

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
        s.locations
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
            u64::from(p.samples[1].locations[0].0)
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
        assert_eq!(s.locations, vec![LocationId(2), LocationId(1)]);
        assert_eq!(stack_names(&decoded, s), vec!["leaf", "root"]);
        assert_eq!(decoded.locations[2].address, 0x1234);
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
        assert_eq!(p.strings, vec![String::new()]);
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
        assert_eq!(decoded.strings[1], "f\u{fffd}");
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
