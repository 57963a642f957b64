//! The reference OTLP decoder: `ExportProfilesServiceRequest` / `ProfilesData` bytes → prost's
//! generated messages → model profiles, interning as it goes.
//!
//! Not a production path (compiled for tests and with the `reference-decoder` feature): the
//! tests hold the [fast decoder](super::decode) to this one's model, and the benchmark
//! (`cargo bench -p otel-bridge --bench decode`) measures it against this one. It also
//! returns what the model has no room for (scope, profile id), which the tests check.
//!
//! The input is untrusted (files, other producers): every index is checked, ids must have
//! their OTLP lengths, gzip inflation is bounded, and nothing here panics. A structural
//! error rejects the whole input, as Pyroscope does: a half-read profile would skew every
//! number built on it. Content the model cannot hold is dropped, not refused: array, map and
//! bytes attribute values, location attributes other than the frame type, mappings.

use std::collections::HashMap;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use prost::Message;

use super::encode::emitted_sample_types;
use super::proto as pb;
use super::{
    label_key_for_attribute, DecodeError, ExportProfilesServiceRequest, FRAME_TYPE, PSEUDO_FRAME,
};
use crate::gzip::{self, MAX_INFLATED_BYTES};
use crate::model::{
    Dictionary, FrameKind, Function, FunctionId, Label, LabelValue, Line, Lines, Link, Location,
    LocationId, Profile, Sample, StackId, StrId, ValueType,
};

/// One OTLP profile, as a model profile plus what the model has no room for.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedProfile {
    /// Resource attributes, in wire order.
    pub resource: Vec<opentelemetry::KeyValue>,
    pub scope_name: String,
    pub scope_version: String,
    /// `None` when the producer sent none.
    pub profile_id: Option<[u8; 16]>,
    pub profile: Profile,
}

/// Decodes an `ExportProfilesServiceRequest` or `ProfilesData` (same wire layout), raw or
/// gzip-compressed, into one [`DecodedProfile`] per OTLP profile. A `samples/count` profile
/// with a period gets the derived period-type values back (see the module docs of
/// [`super`]), so `decode(encode(model))` has the model's sample types.
pub fn decode(bytes: &[u8]) -> Result<Vec<DecodedProfile>, DecodeError> {
    let raw = gzip::inflate_bounded(bytes, MAX_INFLATED_BYTES)?;
    from_request(&ExportProfilesServiceRequest::decode(&*raw)?)
}

/// Decodes an already parsed request (e.g. one a gRPC server received).
pub fn from_request(
    request: &ExportProfilesServiceRequest,
) -> Result<Vec<DecodedProfile>, DecodeError> {
    let has_profiles = request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .any(|s| !s.profiles.is_empty());
    if !has_profiles {
        return Ok(Vec::new());
    }
    let dict = request
        .dictionary
        .as_ref()
        .ok_or(DecodeError::NoDictionary)?;
    if let Some(first) = dict.string_table.first() {
        if !first.is_empty() {
            return Err(DecodeError::FirstStringNotEmpty(first.clone()));
        }
    }
    let mut out = Vec::new();
    for rp in &request.resource_profiles {
        let resource: Vec<opentelemetry::KeyValue> = rp
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .filter_map(|kv| {
                let value = any_to_otel(kv.value.as_ref()?, dict)?;
                let key = if kv.key.is_empty() {
                    string(dict, kv.key_strindex, "a resource key")
                        .ok()?
                        .to_owned()
                } else {
                    kv.key.clone()
                };
                Some(opentelemetry::KeyValue::new(key, value))
            })
            .collect();
        for sp in &rp.scope_profiles {
            let (scope_name, scope_version) = sp
                .scope
                .as_ref()
                .map(|s| (s.name.clone(), s.version.clone()))
                .unwrap_or_default();
            for p in &sp.profiles {
                let profile_id = match p.profile_id.len() {
                    0 => None,
                    16 => {
                        let mut id = [0u8; 16];
                        id.copy_from_slice(&p.profile_id);
                        Some(id)
                    }
                    n => return Err(DecodeError::BadProfileId(n)),
                };
                out.push(DecodedProfile {
                    resource: resource.clone(),
                    scope_name: scope_name.clone(),
                    scope_version: scope_version.clone(),
                    profile_id,
                    profile: decode_profile(p, dict)?,
                });
            }
        }
    }
    Ok(out)
}

fn at<'a, T>(
    table: &'a [T],
    index: i32,
    referrer: &'static str,
    name: &'static str,
) -> Result<&'a T, DecodeError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| table.get(i))
        .ok_or(DecodeError::OutOfRange {
            referrer,
            table: name,
            index: i64::from(index),
            len: table.len(),
        })
}

fn string<'a>(
    dict: &'a pb::ProfilesDictionary,
    index: i32,
    referrer: &'static str,
) -> Result<&'a str, DecodeError> {
    if index == 0 && dict.string_table.is_empty() {
        return Ok("");
    }
    at(&dict.string_table, index, referrer, "string_table").map(String::as_str)
}

fn any_to_otel(v: &AnyValue, dict: &pb::ProfilesDictionary) -> Option<opentelemetry::Value> {
    use any_value::Value as V;
    Some(match v.value.as_ref()? {
        V::StringValue(s) => s.clone().into(),
        V::StringValueStrindex(i) => string(dict, *i, "a value").ok()?.to_owned().into(),
        V::BoolValue(b) => (*b).into(),
        V::IntValue(i) => (*i).into(),
        V::DoubleValue(f) => (*f).into(),
        V::ArrayValue(_) | V::KvlistValue(_) | V::BytesValue(_) => return None,
    })
}

/// What makes two samples one: stack, label set, link.
type SampleIdentity = (StackId, Vec<Label>, Option<Link>);

/// Builds a model profile directly (the model's builder only makes single-line locations),
/// interning as it goes.
struct ModelBuilder {
    profile: Profile,
    dictionary: Dictionary,
    stacks: HashMap<Vec<LocationId>, StackId>,
    strings: HashMap<String, StrId>,
    functions: HashMap<Function, FunctionId>,
    locations: HashMap<Location, LocationId>,
    samples: HashMap<SampleIdentity, usize>,
    /// OTLP location index → model location (memo).
    location_memo: HashMap<i32, LocationId>,
}

impl ModelBuilder {
    fn new() -> ModelBuilder {
        ModelBuilder {
            profile: Profile::default(),
            dictionary: Dictionary::default(),
            stacks: HashMap::from([(Vec::new(), StackId(0))]),
            strings: HashMap::from([(String::new(), StrId(0))]),
            functions: HashMap::new(),
            locations: HashMap::new(),
            samples: HashMap::new(),
            location_memo: HashMap::new(),
        }
    }

    fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        // Model ids are u32; an OTLP string table is bounded by the input size (< 4 GiB of
        // strings of at least 2 bytes on the wire), so this never saturates in practice.
        let id = StrId(u32::try_from(self.dictionary.strings.len()).unwrap_or(u32::MAX));
        self.dictionary.strings.push(s.to_owned());
        self.strings.insert(s.to_owned(), id);
        id
    }

    fn function(&mut self, f: Function) -> FunctionId {
        if let Some(&id) = self.functions.get(&f) {
            return id;
        }
        let id = FunctionId(u32::try_from(self.dictionary.functions.len()).unwrap_or(u32::MAX));
        self.dictionary.functions.push(f.clone());
        self.functions.insert(f, id);
        id
    }

    fn location(
        &mut self,
        index: i32,
        dict: &pb::ProfilesDictionary,
    ) -> Result<LocationId, DecodeError> {
        if let Some(&l) = self.location_memo.get(&index) {
            return Ok(l);
        }
        let loc = at(&dict.location_table, index, "a stack", "location_table")?;
        at(
            &dict.mapping_table,
            loc.mapping_index,
            "a location",
            "mapping_table",
        )
        .or_else(|e| {
            // mapping_index 0 with an empty table is the "no mapping" everybody means.
            if loc.mapping_index == 0 {
                Ok(&ZERO_MAPPING)
            } else {
                Err(e)
            }
        })?;
        let mut lines = Lines::with_capacity(loc.lines.len());
        for line in &loc.lines {
            let f = at(
                &dict.function_table,
                line.function_index,
                "a line",
                "function_table",
            )
            .or_else(|e| {
                if line.function_index == 0 {
                    Ok(&ZERO_FUNCTION)
                } else {
                    Err(e)
                }
            })?;
            let name = string(dict, f.name_strindex, "a function name")?;
            let system_name = string(dict, f.system_name_strindex, "a function system name")?;
            let filename = string(dict, f.filename_strindex, "a function filename")?;
            let function = Function {
                name: self.intern(name),
                system_name: self.intern(system_name),
                filename: self.intern(filename),
                start_line: f.start_line,
            };
            lines.push(Line {
                function: self.function(function),
                line: line.line,
            });
        }
        let mut kind = FrameKind::Jvm;
        let mut pseudo = false;
        for &a in &loc.attribute_indices {
            let attr = at(&dict.attribute_table, a, "a location", "attribute_table")?;
            let key = string(dict, attr.key_strindex, "an attribute key")?;
            let value = attr.value.as_ref().and_then(|v| any_to_otel(v, dict));
            match (key, value) {
                (FRAME_TYPE, Some(opentelemetry::Value::String(s))) => {
                    kind = match s.as_str() {
                        "native" => FrameKind::Native,
                        "kernel" => FrameKind::Kernel,
                        _ => FrameKind::Jvm,
                    }
                }
                (PSEUDO_FRAME, Some(opentelemetry::Value::Bool(b))) => pseudo = b,
                _ => {}
            }
        }
        if pseudo {
            kind = FrameKind::Pseudo;
        }
        let location = Location {
            lines,
            kind,
            address: loc.address,
        };
        let id = match self.locations.get(&location) {
            Some(&id) => id,
            None => {
                let id =
                    LocationId(u32::try_from(self.dictionary.locations.len()).unwrap_or(u32::MAX));
                self.dictionary.locations.push(location.clone());
                self.locations.insert(location, id);
                id
            }
        };
        self.location_memo.insert(index, id);
        Ok(id)
    }

    fn add(
        &mut self,
        stack: Vec<LocationId>,
        labels: Vec<Label>,
        link: Option<Link>,
        values: &[i64],
        timestamps: &[i64],
    ) {
        let stack = match self.stacks.get(&stack) {
            Some(&id) => id,
            None => {
                let id = self.dictionary.stacks.push(&stack);
                self.stacks.insert(stack, id);
                id
            }
        };
        let key = (stack, labels, link);
        let n = self.profile.sample_types.len();
        let i = match self.samples.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.profile.samples.len();
                self.profile.samples.push(Sample {
                    stack,
                    values: vec![0; n],
                    labels: key.1.clone(),
                    link,
                    timestamps: Vec::new(),
                });
                self.samples.insert(key, i);
                i
            }
        };
        if let Some(s) = self.profile.samples.get_mut(i) {
            for (acc, v) in s.values.iter_mut().zip(values) {
                *acc = acc.saturating_add(*v);
            }
            s.timestamps.extend_from_slice(timestamps);
        }
    }
}

static ZERO_MAPPING: pb::Mapping = pb::Mapping {
    memory_start: 0,
    memory_limit: 0,
    file_offset: 0,
    filename_strindex: 0,
    attribute_indices: Vec::new(),
};

static ZERO_FUNCTION: pb::Function = pb::Function {
    name_strindex: 0,
    system_name_strindex: 0,
    filename_strindex: 0,
    start_line: 0,
};

fn decode_profile(p: &pb::Profile, dict: &pb::ProfilesDictionary) -> Result<Profile, DecodeError> {
    let mut b = ModelBuilder::new();
    let vt = |b: &mut ModelBuilder, v: &pb::ValueType| -> Result<ValueType, DecodeError> {
        Ok(ValueType {
            ty: b.intern(string(dict, v.type_strindex, "a value type")?),
            unit: b.intern(string(dict, v.unit_strindex, "a value type")?),
        })
    };
    let sample_type = vt(
        &mut b,
        p.sample_type.as_ref().ok_or(DecodeError::NoSampleType)?,
    )?;
    let period_type = match &p.period_type {
        Some(v) => vt(&mut b, v)?,
        None => ValueType::default(),
    };
    b.profile.sample_types = vec![sample_type];
    b.profile.period_type = period_type;
    b.profile.period = p.period;
    // Put back the type the encoder leaves out (samples × period), if this is that shape.
    let mut probe = b.profile.clone();
    probe.dictionary = std::sync::Arc::new(b.dictionary.clone());
    probe.sample_types.push(period_type);
    let derive = emitted_sample_types(&probe) == [0] && probe.sample_types.len() == 2;
    if derive {
        b.profile.sample_types.push(period_type);
    }
    b.profile.time_nanos = i64::try_from(p.time_unix_nano).unwrap_or(i64::MAX);
    b.profile.duration_nanos = i64::try_from(p.duration_nano).unwrap_or(i64::MAX);

    for s in &p.samples {
        if !s.values.is_empty()
            && !s.timestamps_unix_nano.is_empty()
            && s.values.len() != s.timestamps_unix_nano.len()
        {
            return Err(DecodeError::ValueCountMismatch {
                values: s.values.len(),
                timestamps: s.timestamps_unix_nano.len(),
            });
        }
        let stack =
            at(&dict.stack_table, s.stack_index, "a sample", "stack_table").or_else(|e| {
                if s.stack_index == 0 {
                    Ok(&ZERO_STACK)
                } else {
                    Err(e)
                }
            })?;
        let mut locations = Vec::with_capacity(stack.location_indices.len());
        for &l in &stack.location_indices {
            locations.push(b.location(l, dict)?);
        }
        let mut labels = Vec::with_capacity(s.attribute_indices.len());
        for &a in &s.attribute_indices {
            let attr = at(&dict.attribute_table, a, "a sample", "attribute_table")?;
            let key = label_key_for_attribute(string(dict, attr.key_strindex, "an attribute key")?);
            let unit = string(dict, attr.unit_strindex, "an attribute unit")?;
            let value = match attr.value.as_ref().and_then(|v| any_to_otel(v, dict)) {
                Some(opentelemetry::Value::I64(n)) if key == "thread_id" => {
                    LabelValue::Str(b.intern(&n.to_string()))
                }
                Some(opentelemetry::Value::I64(n)) => LabelValue::Num {
                    value: n,
                    unit: b.intern(unit),
                },
                Some(opentelemetry::Value::String(v)) => LabelValue::Str(b.intern(v.as_str())),
                Some(other) => LabelValue::Str(b.intern(&other.to_string())),
                None => continue,
            };
            let key = b.intern(key);
            labels.push(Label { key, value });
        }
        labels.sort_unstable();
        labels.dedup();
        let link = match s.link_index {
            0 => None,
            i => {
                let l = at(&dict.link_table, i, "a sample", "link_table")?;
                let trace_id: [u8; 16] =
                    l.trace_id
                        .as_slice()
                        .try_into()
                        .map_err(|_| DecodeError::BadIdLength {
                            what: "trace_id",
                            len: l.trace_id.len(),
                            want: 16,
                        })?;
                let span_id: [u8; 8] =
                    l.span_id
                        .as_slice()
                        .try_into()
                        .map_err(|_| DecodeError::BadIdLength {
                            what: "span_id",
                            len: l.span_id.len(),
                            want: 8,
                        })?;
                Some(Link { trace_id, span_id })
            }
        };
        let timestamps: Vec<i64> = s
            .timestamps_unix_nano
            .iter()
            .map(|&t| i64::try_from(t).unwrap_or(i64::MAX))
            .collect();
        // No values: each timestamp is one observation of value 1 (profiles.proto, Sample).
        let value = if s.values.is_empty() {
            i64::try_from(timestamps.len()).unwrap_or(i64::MAX)
        } else {
            s.values.iter().fold(0i64, |a, v| a.saturating_add(*v))
        };
        let values = [value, value.saturating_mul(p.period)];
        let values = if derive { &values[..] } else { &values[..1] };
        b.add(locations, labels, link, values, &timestamps);
    }
    b.profile.dictionary = std::sync::Arc::new(b.dictionary);
    Ok(b.profile)
}

static ZERO_STACK: pb::Stack = pb::Stack {
    location_indices: Vec::new(),
};
