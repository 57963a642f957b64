//! Model → pprof protobuf (see the [module docs](super) for the mapping).

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use super::{proto, LINK_SPAN_ID, LINK_TRACE_ID};
use crate::model::{Label, LabelValue, Profile, StrId, ValueType};

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

fn str_index(id: StrId) -> i64 {
    i64::from(id.0)
}

fn to_pb(p: &Profile) -> proto::Profile {
    let value_type = |vt: &ValueType| proto::ValueType {
        r#type: str_index(vt.ty),
        unit: str_index(vt.unit),
    };
    let mut string_table: Vec<Vec<u8>> =
        p.strings().iter().map(|s| s.as_bytes().to_vec()).collect();
    if string_table.is_empty() {
        string_table.push(Vec::new());
    }
    // Links become the string labels `trace_id` / `span_id` (lowercase hex, Pyroscope's
    // names); their strings are appended to the table here, not kept in the model.
    let mut extra = ExtraStrings::new(p.strings(), &mut string_table);
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
                location_id: p.stack(s.stack).iter().map(|l| u64::from(l.0)).collect(),
                value: s.values.clone(),
                label,
            }
        })
        .collect();
    proto::Profile {
        sample_type: p.sample_types.iter().map(value_type).collect(),
        sample,
        mapping: p
            .mappings()
            .iter()
            .enumerate()
            .skip(1)
            .map(|(id, m)| proto::Mapping {
                id: id as u64,
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                filename: str_index(m.filename),
                build_id: str_index(m.build_id),
                // The agent names native frames itself: readers need not symbolise again.
                has_functions: true,
                has_filenames: false,
                has_line_numbers: false,
                has_inline_frames: false,
            })
            .collect(),
        location: p
            .locations()
            .iter()
            .enumerate()
            .skip(1)
            .map(|(id, loc)| proto::Location {
                id: id as u64,
                mapping_id: u64::from(loc.mapping.0),
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
            .functions()
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
