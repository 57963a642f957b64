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
    FrameKind, Function, Label, LabelValue, Line, Lines, Link, Location, LocationId, Profile,
    ProfileBuilder, StrId, ValueType,
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

/// A [`ProfileBuilder`] fed from OTLP's tables: multi-line locations found by their OTLP
/// index (memoised), interned as they come.
struct ModelBuilder {
    builder: ProfileBuilder,
    /// OTLP location index → model location (memo).
    location_memo: HashMap<i32, LocationId>,
}

impl ModelBuilder {
    fn new() -> ModelBuilder {
        ModelBuilder {
            builder: ProfileBuilder::new(&[], ("", ""), 0),
            location_memo: HashMap::new(),
        }
    }

    fn intern(&mut self, s: &str) -> StrId {
        self.builder.intern(s)
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
                function: self.builder.intern_function(function),
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
        let id = self.builder.intern_location(location);
        self.location_memo.insert(index, id);
        Ok(id)
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
    let derive = profile_types(&mut b, p, dict)?;
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
        let labels = sample_labels(&mut b, s, dict)?;
        let link = sample_link(s, dict)?;
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
        let stack = b.builder.stack(&locations);
        b.builder
            .merge_sample(stack, labels, link, values, &timestamps);
    }
    let time = i64::try_from(p.time_unix_nano).unwrap_or(i64::MAX);
    let duration = i64::try_from(p.duration_nano).unwrap_or(i64::MAX);
    Ok(b.builder.build(time, duration))
}

/// Sets the profile's sample type, period type and period; whether the sample type the
/// encoder leaves out (samples × period) is put back, when the profile has that shape.
fn profile_types(
    b: &mut ModelBuilder,
    p: &pb::Profile,
    dict: &pb::ProfilesDictionary,
) -> Result<bool, DecodeError> {
    let vt = |b: &mut ModelBuilder, v: &pb::ValueType| -> Result<ValueType, DecodeError> {
        Ok(ValueType {
            ty: b.intern(string(dict, v.type_strindex, "a value type")?),
            unit: b.intern(string(dict, v.unit_strindex, "a value type")?),
        })
    };
    let sample_type = vt(b, p.sample_type.as_ref().ok_or(DecodeError::NoSampleType)?)?;
    let period_type = match &p.period_type {
        Some(v) => vt(b, v)?,
        None => ValueType::default(),
    };
    let profile = b.builder.profile_mut();
    profile.sample_types = vec![sample_type];
    profile.period_type = period_type;
    profile.period = p.period;
    let mut probe = b.builder.snapshot();
    probe.sample_types.push(period_type);
    let derive = emitted_sample_types(&probe) == [0] && probe.sample_types.len() == 2;
    if derive {
        b.builder.profile_mut().sample_types.push(period_type);
    }
    Ok(derive)
}

/// A sample's attributes as model labels (sorted, each once): the values the model can hold.
fn sample_labels(
    b: &mut ModelBuilder,
    s: &pb::Sample,
    dict: &pb::ProfilesDictionary,
) -> Result<Vec<Label>, DecodeError> {
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
    Ok(labels)
}

/// A sample's link, its ids checked for their OTLP lengths.
fn sample_link(s: &pb::Sample, dict: &pb::ProfilesDictionary) -> Result<Option<Link>, DecodeError> {
    if s.link_index == 0 {
        return Ok(None);
    }
    let l = at(&dict.link_table, s.link_index, "a sample", "link_table")?;
    // A span without its trace (what Pyroscope 1.20 to 2.0 need to keep trace ids out of
    // their series labels) reads as an all-zero trace id.
    let trace_id: [u8; 16] = if l.trace_id.is_empty() && l.span_id.len() == 8 {
        [0; 16]
    } else {
        l.trace_id
            .as_slice()
            .try_into()
            .map_err(|_| DecodeError::BadIdLength {
                what: "trace_id",
                len: l.trace_id.len(),
                want: 16,
            })?
    };
    let span_id: [u8; 8] =
        l.span_id
            .as_slice()
            .try_into()
            .map_err(|_| DecodeError::BadIdLength {
                what: "span_id",
                len: l.span_id.len(),
                want: 8,
            })?;
    Ok(Some(Link { trace_id, span_id }))
}

static ZERO_STACK: pb::Stack = pb::Stack {
    location_indices: Vec::new(),
};
