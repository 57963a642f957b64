//! pprof protobuf (raw or gzip) → model, treating the input as untrusted (see the
//! [module docs](super)).

use std::collections::HashMap;
use std::fmt;

use prost::Message;

use super::{proto, LINK_SPAN_ID, LINK_TRACE_ID, MAX_INFLATED_BYTES};
use crate::gzip;
use crate::model::{
    Dictionary, FrameKind, Function, FunctionId, Label, LabelValue, Line, Lines, Location,
    LocationId, Mapping, MappingId, Profile, Sample, StackId, Stacks, StrId, ValueType,
};
use crate::otlp::Limits;

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

/// The pprof tables that other messages refer to by id or index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    String,
    Function,
    Location,
    Mapping,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Table::String => "string",
            Table::Function => "function",
            Table::Location => "location",
            Table::Mapping => "mapping",
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
    #[error("sample {sample} has a stack of {depth} locations, over the limit of {limit}")]
    StackTooDeep {
        sample: usize,
        depth: usize,
        limit: usize,
    },
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

pub(super) fn decode_with_limit(bytes: &[u8], limit: usize) -> Result<Profile, DecodeError> {
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
    let strings = string_table(p.string_table)?;
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
    let (function_ids, functions) = functions(&p.function, &st)?;
    let (mapping_ids, mappings) = mappings(&p.mapping, &st)?;
    let (location_ids, locations) = locations(
        &p.location,
        &function_ids,
        &mapping_ids,
        &mappings,
        &strings,
    )?;
    let (samples, stacks) = samples(p.sample, &location_ids, &st, &strings, sample_types.len())?;
    let comments = p
        .comment
        .iter()
        .enumerate()
        .map(|(i, &c)| st.id(c, || format!("comment {i}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Profile {
        dictionary: std::sync::Arc::new(Dictionary {
            strings,
            functions,
            locations,
            stacks,
            mappings,
        }),
        sample_types,
        period_type,
        period: p.period,
        time_nanos: p.time_nanos,
        duration_nanos: p.duration_nanos,
        samples,
        comments,
    })
}

/// The string table, as text (invalid UTF-8 replaced); its first string must be empty.
fn string_table(table: Vec<Vec<u8>>) -> Result<Vec<String>, DecodeError> {
    let mut strings: Vec<String> = table
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
    Ok(strings)
}

/// The model's functions (index 0 the zero function), and pprof's function ids to them.
fn functions(
    table: &[proto::Function],
    st: &Strings,
) -> Result<(IdMap, Vec<Function>), DecodeError> {
    let ids = IdMap::build(Table::Function, table.iter().map(|f| f.id))?;
    let mut functions = Vec::with_capacity(table.len() + 1);
    functions.push(Function::default());
    for f in table {
        let referrer = |field: &'static str| move || format!("function id {} {field}", f.id);
        functions.push(Function {
            name: st.id(f.name, referrer("name"))?,
            system_name: st.id(f.system_name, referrer("system_name"))?,
            filename: st.id(f.filename, referrer("filename"))?,
            start_line: f.start_line,
        });
    }
    Ok((ids, functions))
}

/// The model's mappings (index 0 the zero mapping), and pprof's mapping ids to them.
fn mappings(table: &[proto::Mapping], st: &Strings) -> Result<(IdMap, Vec<Mapping>), DecodeError> {
    let ids = IdMap::build(Table::Mapping, table.iter().map(|m| m.id))?;
    let mut mappings = Vec::with_capacity(table.len() + 1);
    mappings.push(Mapping::default());
    for m in table {
        let referrer = |field: &'static str| move || format!("mapping id {} {field}", m.id);
        mappings.push(Mapping {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename: st.id(m.filename, referrer("filename"))?,
            build_id: st.id(m.build_id, referrer("build_id"))?,
        });
    }
    Ok((ids, mappings))
}

/// What a location is, from its mapping: pprof has no frame kind, but Java frames have no
/// mapping, and kernel code is mapped as `[kernel.kallsyms]` (the name perf and pprof use).
fn kind_of(mapping: MappingId, mappings: &[Mapping], strings: &[String]) -> FrameKind {
    if mapping.0 == 0 {
        return FrameKind::Jvm;
    }
    let name = mappings
        .get(mapping.0 as usize)
        .and_then(|m| strings.get(m.filename.0 as usize))
        .map_or("", String::as_str);
    if name == crate::model::KERNEL_MAPPING {
        FrameKind::Kernel
    } else {
        FrameKind::Native
    }
}

/// The model's locations (index 0 the zero location), and pprof's location ids to them.
fn locations(
    table: &[proto::Location],
    function_ids: &IdMap,
    mapping_ids: &IdMap,
    mappings: &[Mapping],
    strings: &[String],
) -> Result<(IdMap, Vec<Location>), DecodeError> {
    let ids = IdMap::build(Table::Location, table.iter().map(|l| l.id))?;
    let mut locations = Vec::with_capacity(table.len() + 1);
    locations.push(Location::default());
    for loc in table {
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
        // mapping_id 0 is pprof's "no mapping".
        let mapping = if loc.mapping_id == 0 {
            MappingId(0)
        } else {
            MappingId(mapping_ids.get(loc.mapping_id, || format!("location id {}", loc.id))?)
        };
        locations.push(Location {
            lines,
            kind: kind_of(mapping, mappings, strings),
            address: loc.address,
            mapping,
        });
    }
    Ok((ids, locations))
}

/// The model's samples and the distinct stacks they use: pprof lists a sample's locations in
/// the sample; the model keeps each distinct stack once.
fn samples(
    table: Vec<proto::Sample>,
    location_ids: &IdMap,
    st: &Strings,
    strings: &[String],
    types: usize,
) -> Result<(Vec<Sample>, Stacks), DecodeError> {
    let mut samples = Vec::with_capacity(table.len());
    let mut stacks = Stacks::default();
    let mut stack_ids: HashMap<Vec<LocationId>, StackId> =
        HashMap::from([(Vec::new(), StackId(0))]);
    let limit = Limits::DEFAULT.stack_depth;
    for (i, s) in table.into_iter().enumerate() {
        if s.location_id.len() > limit {
            return Err(DecodeError::StackTooDeep {
                sample: i,
                depth: s.location_id.len(),
                limit,
            });
        }
        if s.value.len() != types {
            return Err(DecodeError::ValueCountMismatch {
                sample: i,
                values: s.value.len(),
                types,
            });
        }
        let locations = s
            .location_id
            .iter()
            .map(|&id| Ok(LocationId(location_ids.get(id, || format!("sample {i}"))?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let stack = match stack_ids.get(&locations) {
            Some(&id) => id,
            None => {
                let id = stacks.push(&locations);
                stack_ids.insert(locations, id);
                id
            }
        };
        let mut labels = s
            .label
            .iter()
            .map(|l| label_from_pb(l, st, i))
            .collect::<Result<Vec<_>, _>>()?;
        labels.sort_unstable();
        labels.dedup();
        let link = take_link(&mut labels, strings);
        samples.push(Sample {
            stack,
            values: s.value,
            labels,
            link,
            timestamps: Vec::new(),
        });
    }
    Ok((samples, stacks))
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
