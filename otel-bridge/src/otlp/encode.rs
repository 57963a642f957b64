//! Model → `ExportProfilesServiceRequest`.

use std::collections::HashMap;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource as PbResource;
use prost::Message;

use super::bounds::{self, TRUNCATED_FRAME};
use super::proto as pb;
use super::{
    attribute_key_for_label, EncodeOptions, ExportProfilesServiceRequest, LinkTarget, ProfileId,
    FRAME_TYPE, LOCAL_ROOT_SPAN_ID, MAX_TIMESTAMP_EXPANSION, PSEUDO_FRAME, SCOPE_NAME,
    SCOPE_VERSION, THREAD_ID,
};
use crate::model::{FrameKind, LabelValue, Link, LocationId, Profile, Sample, StackId, ValueType};

/// Why a model profile cannot be encoded. Both mean a malformed model (a bug in whoever
/// built it); the caller drops the profile and reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("the {table} table outgrew OTLP's int32 indices")]
    TableTooLarge { table: &'static str },
    #[error("a sample refers to location {0}, which the profile does not have")]
    UnknownLocation(u32),
    #[error("a location refers to function {0}, which the profile does not have")]
    UnknownFunction(u32),
}

/// Encodes `profile` with `resource` into one export request (see the module docs for the
/// rules). `id` becomes the first OTLP profile's id; further ones (one per extra sample
/// type) derive from it. Of [`EncodeOptions::bounds`] this applies the sample attributes and
/// the stack depth; [`encode_bounded`] the sample and byte bounds too.
pub fn encode(
    profile: &Profile,
    resource: &opentelemetry_sdk::Resource,
    id: ProfileId,
    options: &EncodeOptions,
) -> Result<ExportProfilesServiceRequest, EncodeError> {
    encode_part(profile, &profile.samples, resource, id, options)
}

/// Encodes `profile` as export requests within [`EncodeOptions::bounds`]: one, unless its
/// samples are over the bounds' sample or byte bound, when they are sent in parts, each part
/// a request of its own with the profile's types and time window (and a dictionary of only
/// what it uses), which a reader adds up like any two profiles of one series. Each request
/// takes the id of its first OTLP profile from `next_id`.
pub fn encode_bounded(
    profile: &Profile,
    resource: &opentelemetry_sdk::Resource,
    options: &EncodeOptions,
    next_id: &mut dyn FnMut() -> ProfileId,
) -> Result<Vec<ExportProfilesServiceRequest>, EncodeError> {
    bounds::parts(profile, &options.bounds)
        .into_iter()
        .map(|part| {
            let samples = profile.samples.get(part).unwrap_or_default();
            encode_part(profile, samples, resource, next_id(), options)
        })
        .collect()
}

/// `samples` of `profile` as one export request.
fn encode_part(
    profile: &Profile,
    samples: &[Sample],
    resource: &opentelemetry_sdk::Resource,
    id: ProfileId,
    options: &EncodeOptions,
) -> Result<ExportProfilesServiceRequest, EncodeError> {
    let mut dict = Dictionary::new(options);
    let mut profiles = Vec::new();
    for (n, type_index) in emitted_sample_types(profile).into_iter().enumerate() {
        profiles.push(encode_one(
            profile,
            samples,
            type_index,
            id.nth(n),
            options,
            &mut dict,
        )?);
    }
    Ok(ExportProfilesServiceRequest {
        resource_profiles: vec![pb::ResourceProfiles {
            resource: Some(resource_to_pb(resource)),
            scope_profiles: vec![pb::ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: SCOPE_NAME.to_owned(),
                    version: SCOPE_VERSION.to_owned(),
                    attributes: Vec::new(),
                    dropped_attributes_count: 0,
                }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: resource.schema_url().unwrap_or_default().to_owned(),
        }],
        dictionary: Some(dict.finish()),
    })
}

/// [`encode`], as protobuf bytes (uncompressed). The same bytes are a valid `ProfilesData`
/// (both messages have `resource_profiles = 1`, `dictionary = 2`), the OTLP file format.
pub fn encode_to_vec(
    profile: &Profile,
    resource: &opentelemetry_sdk::Resource,
    id: ProfileId,
    options: &EncodeOptions,
) -> Result<Vec<u8>, EncodeError> {
    Ok(encode(profile, resource, id, options)?.encode_to_vec())
}

fn same_type(p: &Profile, a: &ValueType, b: &ValueType) -> bool {
    p.str(a.ty) == p.str(b.ty) && p.str(a.unit) == p.str(b.unit)
}

/// Indices of the model's sample types that become OTLP profiles: all but a type equal to
/// the period type when `samples/count` is there to derive it from.
pub(super) fn emitted_sample_types(p: &Profile) -> Vec<usize> {
    let samples = p
        .sample_types
        .iter()
        .position(|vt| p.str(vt.ty) == "samples" && p.str(vt.unit) == "count");
    let derivable = |i: usize, vt: &ValueType| {
        samples.is_some_and(|s| s != i)
            && p.period > 0
            && !p.str(p.period_type.ty).is_empty()
            && same_type(p, vt, &p.period_type)
    };
    p.sample_types
        .iter()
        .enumerate()
        .filter(|(i, vt)| !derivable(*i, vt))
        .map(|(i, _)| i)
        .collect()
}

pub(crate) fn resource_to_pb(resource: &opentelemetry_sdk::Resource) -> PbResource {
    let mut attributes: Vec<KeyValue> = resource
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.as_str().to_owned(),
            // Plain keys: receivers of other signals' code paths do not resolve indices.
            key_strindex: 0,
            value: Some(value_to_pb(v)),
        })
        .collect();
    // A resource is a hash map; sort so that equal resources encode to equal bytes.
    attributes.sort_by(|a, b| a.key.cmp(&b.key));
    PbResource {
        attributes,
        dropped_attributes_count: 0,
        entity_refs: Vec::new(),
    }
}

fn value_to_pb(v: &opentelemetry::Value) -> AnyValue {
    use any_value::Value as V;
    use opentelemetry::{Array, Value};
    let array = |values: Vec<AnyValue>| {
        V::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue { values })
    };
    let any = |v: V| AnyValue { value: Some(v) };
    let value = match v {
        Value::Bool(b) => V::BoolValue(*b),
        Value::I64(i) => V::IntValue(*i),
        Value::F64(f) => V::DoubleValue(*f),
        Value::String(s) => V::StringValue(s.as_str().to_owned()),
        Value::Array(Array::Bool(a)) => array(a.iter().map(|b| any(V::BoolValue(*b))).collect()),
        Value::Array(Array::I64(a)) => array(a.iter().map(|i| any(V::IntValue(*i))).collect()),
        Value::Array(Array::F64(a)) => array(a.iter().map(|f| any(V::DoubleValue(*f))).collect()),
        Value::Array(Array::String(a)) => array(
            a.iter()
                .map(|s| any(V::StringValue(s.as_str().to_owned())))
                .collect(),
        ),
        // `Value` is non-exhaustive: anything newer travels as its display text.
        #[allow(unreachable_patterns)]
        other => V::StringValue(other.to_string()),
    };
    any(value)
}

/// An attribute value as a hashable key for deduplication.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct AttrKey {
    key: i32,
    value: AttrValue,
    unit: i32,
}

/// The shared `ProfilesDictionary` under construction: every table deduplicated, index 0
/// the zero value.
struct Dictionary {
    strings: Vec<String>,
    string_index: HashMap<String, i32>,
    functions: Vec<pb::Function>,
    function_index: HashMap<u32, i32>,
    locations: Vec<pb::Location>,
    location_index: HashMap<u32, i32>,
    stacks: Vec<pb::Stack>,
    stack_index: HashMap<Vec<i32>, i32>,
    /// The OTLP stack of each model stack already encoded.
    model_stacks: HashMap<u32, i32>,
    attributes: Vec<pb::KeyValueAndUnit>,
    attribute_index: HashMap<AttrKey, i32>,
    links: Vec<pb::Link>,
    link_index: HashMap<Link, i32>,
    /// Links go without their trace id ([`EncodeOptions::no_link_trace_id`]).
    no_link_trace_id: bool,
    /// Most locations per stack ([`super::Bounds::max_stack_depth`]).
    max_stack_depth: usize,
    /// The location of the `[truncated]` frame ending stacks cut here, once made.
    truncated: Option<i32>,
}

fn next_index(len: usize, table: &'static str) -> Result<i32, EncodeError> {
    i32::try_from(len).map_err(|_| EncodeError::TableTooLarge { table })
}

impl Dictionary {
    fn new(options: &EncodeOptions) -> Dictionary {
        Dictionary {
            strings: vec![String::new()],
            string_index: HashMap::from([(String::new(), 0)]),
            functions: vec![pb::Function::default()],
            function_index: HashMap::from([(0, 0)]),
            locations: vec![pb::Location::default()],
            location_index: HashMap::from([(0, 0)]),
            stacks: vec![pb::Stack::default()],
            stack_index: HashMap::from([(Vec::new(), 0)]),
            model_stacks: HashMap::new(),
            attributes: vec![pb::KeyValueAndUnit::default()],
            attribute_index: HashMap::new(),
            links: vec![pb::Link::default()],
            link_index: HashMap::new(),
            no_link_trace_id: options.no_link_trace_id,
            max_stack_depth: options.bounds.max_stack_depth.max(1),
            truncated: None,
        }
    }

    fn finish(self) -> pb::ProfilesDictionary {
        pb::ProfilesDictionary {
            // JVM frames have no mapping; entry 0 is still required (and Pyroscope reads
            // mapping_table[location.mapping_index] for every location).
            mapping_table: vec![pb::Mapping::default()],
            location_table: self.locations,
            function_table: self.functions,
            link_table: self.links,
            string_table: self.strings,
            attribute_table: self.attributes,
            stack_table: self.stacks,
        }
    }

    fn string(&mut self, s: &str) -> Result<i32, EncodeError> {
        if let Some(&i) = self.string_index.get(s) {
            return Ok(i);
        }
        let i = next_index(self.strings.len(), "string")?;
        self.strings.push(s.to_owned());
        self.string_index.insert(s.to_owned(), i);
        Ok(i)
    }

    fn attribute(&mut self, key: &str, value: AttrValue, unit: &str) -> Result<i32, EncodeError> {
        let k = AttrKey {
            key: self.string(key)?,
            value,
            unit: self.string(unit)?,
        };
        if let Some(&i) = self.attribute_index.get(&k) {
            return Ok(i);
        }
        let i = next_index(self.attributes.len(), "attribute")?;
        let value = match &k.value {
            AttrValue::Str(s) => any_value::Value::StringValue(s.clone()),
            AttrValue::Int(v) => any_value::Value::IntValue(*v),
            AttrValue::Bool(b) => any_value::Value::BoolValue(*b),
        };
        self.attributes.push(pb::KeyValueAndUnit {
            key_strindex: k.key,
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: k.unit,
        });
        self.attribute_index.insert(k, i);
        Ok(i)
    }

    fn function(&mut self, p: &Profile, id: u32) -> Result<i32, EncodeError> {
        if let Some(&i) = self.function_index.get(&id) {
            return Ok(i);
        }
        let f = p
            .functions()
            .get(id as usize)
            .ok_or(EncodeError::UnknownFunction(id))?;
        let entry = pb::Function {
            name_strindex: self.string(p.str(f.name))?,
            system_name_strindex: self.string(p.str(f.system_name))?,
            filename_strindex: self.string(p.str(f.filename))?,
            start_line: f.start_line,
        };
        let i = next_index(self.functions.len(), "function")?;
        self.functions.push(entry);
        self.function_index.insert(id, i);
        Ok(i)
    }

    fn location(&mut self, p: &Profile, id: LocationId) -> Result<i32, EncodeError> {
        if let Some(&i) = self.location_index.get(&id.0) {
            return Ok(i);
        }
        let loc = p.location(id).ok_or(EncodeError::UnknownLocation(id.0))?;
        let mut lines = Vec::with_capacity(loc.lines.len());
        for line in &loc.lines {
            lines.push(pb::Line {
                function_index: self.function(p, line.function.0)?,
                line: line.line,
                column: 0,
            });
        }
        let frame_type = match loc.kind {
            FrameKind::Jvm | FrameKind::Pseudo => "jvm",
            FrameKind::Native => "native",
            FrameKind::Kernel => "kernel",
        };
        let mut attribute_indices =
            vec![self.attribute(FRAME_TYPE, AttrValue::Str(frame_type.to_owned()), "")?];
        if loc.kind == FrameKind::Pseudo {
            attribute_indices.push(self.attribute(PSEUDO_FRAME, AttrValue::Bool(true), "")?);
        }
        let i = next_index(self.locations.len(), "location")?;
        self.locations.push(pb::Location {
            mapping_index: 0,
            address: loc.address,
            lines,
            attribute_indices,
        });
        self.location_index.insert(id.0, i);
        Ok(i)
    }

    fn stack(&mut self, p: &Profile, id: StackId) -> Result<i32, EncodeError> {
        if let Some(&i) = self.model_stacks.get(&id.0) {
            return Ok(i);
        }
        let mut locations = p.stack(id);
        let cut = locations.len() > self.max_stack_depth;
        if cut {
            // The leaf end is where the time is: keep it, and end the stack at the root side
            // with a frame saying it was cut (the bound counts it).
            locations = locations
                .get(..self.max_stack_depth - 1)
                .unwrap_or(locations);
        }
        let mut indices = Vec::with_capacity(locations.len() + 1);
        for &l in locations {
            indices.push(self.location(p, l)?);
        }
        if cut {
            indices.push(self.truncated_location()?);
        }
        if let Some(&i) = self.stack_index.get(&indices) {
            self.model_stacks.insert(id.0, i);
            return Ok(i);
        }
        let i = next_index(self.stacks.len(), "stack")?;
        self.stacks.push(pb::Stack {
            location_indices: indices.clone(),
        });
        self.stack_index.insert(indices, i);
        self.model_stacks.insert(id.0, i);
        Ok(i)
    }

    /// The `[truncated]` frame that ends a stack cut at the depth bound: a pseudo-frame like
    /// the one the agent ends a stack with when its own walk is cut.
    fn truncated_location(&mut self) -> Result<i32, EncodeError> {
        if let Some(i) = self.truncated {
            return Ok(i);
        }
        let name = self.string(TRUNCATED_FRAME)?;
        let function_index = next_index(self.functions.len(), "function")?;
        self.functions.push(pb::Function {
            name_strindex: name,
            system_name_strindex: 0,
            filename_strindex: 0,
            start_line: 0,
        });
        let attribute_indices = vec![
            self.attribute(FRAME_TYPE, AttrValue::Str("jvm".to_owned()), "")?,
            self.attribute(PSEUDO_FRAME, AttrValue::Bool(true), "")?,
        ];
        let i = next_index(self.locations.len(), "location")?;
        self.locations.push(pb::Location {
            mapping_index: 0,
            address: 0,
            lines: vec![pb::Line {
                function_index,
                line: 0,
                column: 0,
            }],
            attribute_indices,
        });
        self.truncated = Some(i);
        Ok(i)
    }

    fn link(&mut self, link: Option<Link>) -> Result<i32, EncodeError> {
        // An all-zero trace id is invalid (W3C trace context): such a link is no link, unless
        // links go without their trace id anyway (a decoded span without its trace).
        let valid =
            |l: &Link| l.span_id != [0; 8] && (self.no_link_trace_id || l.trace_id != [0; 16]);
        let Some(link) = link.filter(valid) else {
            return Ok(0);
        };
        if let Some(&i) = self.link_index.get(&link) {
            return Ok(i);
        }
        let i = next_index(self.links.len(), "link")?;
        self.links.push(pb::Link {
            trace_id: if self.no_link_trace_id {
                Vec::new()
            } else {
                link.trace_id.to_vec()
            },
            span_id: link.span_id.to_vec(),
        });
        self.link_index.insert(link, i);
        Ok(i)
    }

    /// The sample's attribute indices, sorted, one per key (OTLP requires unique keys).
    fn sample_attributes(
        &mut self,
        p: &Profile,
        sample: &Sample,
        options: &EncodeOptions,
    ) -> Result<Vec<i32>, EncodeError> {
        let mut keys: Vec<&str> = Vec::with_capacity(sample.labels.len());
        let mut indices = Vec::with_capacity(sample.labels.len());
        for label in &sample.labels {
            let key = attribute_key_for_label(p.str(label.key));
            if key.is_empty()
                || keys.contains(&key)
                || (key == THREAD_ID && !options.thread_id)
                || (key == LOCAL_ROOT_SPAN_ID && !options.local_root_span_id)
                || !options.bounds.allows_attribute(key)
            {
                continue;
            }
            let (value, unit) = match label.value {
                LabelValue::Str(s) => {
                    let s = p.str(s);
                    // thread.id is an int attribute in the semantic conventions.
                    match s.parse::<i64>() {
                        Ok(n) if key == THREAD_ID => (AttrValue::Int(n), ""),
                        _ => (AttrValue::Str(s.to_owned()), ""),
                    }
                }
                LabelValue::Num { value, unit } => (AttrValue::Int(value), p.str(unit)),
            };
            keys.push(key);
            indices.push(self.attribute(key, value, unit)?);
        }
        indices.sort_unstable();
        Ok(indices)
    }
}

/// One OTLP sample being merged.
struct Merged {
    value: i64,
    timestamps: Vec<i64>,
}

/// The link a sample is sent with: its own, or its local root's ([`LinkTarget`]).
fn sample_link(p: &Profile, s: &Sample, options: &EncodeOptions) -> Option<Link> {
    let mut link = s.link?;
    if options.links == LinkTarget::LocalRoot {
        let mut root = [0u8; 8];
        if let Some(Ok(())) = p
            .label_str(s, LOCAL_ROOT_SPAN_ID)
            .map(|text| hex::decode_to_slice(text, &mut root))
        {
            link.span_id = root;
        }
    }
    Some(link)
}

/// The OTLP profile of `samples` (of `p`) for one sample type.
fn encode_one(
    p: &Profile,
    samples: &[Sample],
    type_index: usize,
    id: ProfileId,
    options: &EncodeOptions,
    dict: &mut Dictionary,
) -> Result<pb::Profile, EncodeError> {
    let sample_type = p.sample_types.get(type_index).copied().unwrap_or_default();
    let counts = p.str(sample_type.unit) == "count";
    let mut order: Vec<(i32, Vec<i32>, i32)> = Vec::new();
    let mut merged: HashMap<(i32, Vec<i32>, i32), Merged> = HashMap::new();
    for s in samples {
        let value = s.values.get(type_index).copied().unwrap_or(0);
        if value == 0 && s.timestamps.is_empty() {
            continue;
        }
        let key = (
            dict.stack(p, s.stack)?,
            dict.sample_attributes(p, s, options)?,
            dict.link(sample_link(p, s, options))?,
        );
        let m = merged.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            Merged {
                value: 0,
                timestamps: Vec::new(),
            }
        });
        m.value = m.value.saturating_add(value);
        if options.timestamps {
            m.timestamps.extend_from_slice(&s.timestamps);
        }
    }

    let mut window = (
        p.time_nanos,
        p.time_nanos.saturating_add(p.duration_nanos.max(0)),
    );
    let mut samples = Vec::with_capacity(order.len());
    for key in order {
        let Some(m) = merged.remove(&key) else {
            continue;
        };
        let (stack_index, attribute_indices, link_index) = key;
        let timestamps = if options.timestamps && counts {
            spread_timestamps(m.value, &m.timestamps)
        } else {
            None
        };
        let (values, timestamps_unix_nano) = match timestamps {
            Some(ts) => {
                for &t in &ts {
                    window.0 = window.0.min(t);
                    window.1 = window.1.max(t.saturating_add(1));
                }
                (
                    Vec::new(),
                    ts.into_iter().map(|t| t.max(0) as u64).collect(),
                )
            }
            None if m.value == 0 => continue,
            None => (vec![m.value], Vec::new()),
        };
        samples.push(pb::Sample {
            stack_index,
            attribute_indices,
            link_index,
            values,
            timestamps_unix_nano,
        });
    }

    let value_type =
        |dict: &mut Dictionary, vt: &ValueType| -> Result<pb::ValueType, EncodeError> {
            Ok(pb::ValueType {
                type_strindex: dict.string(p.str(vt.ty))?,
                unit_strindex: dict.string(p.str(vt.unit))?,
            })
        };
    let period_type = if p.str(p.period_type.ty).is_empty() && p.str(p.period_type.unit).is_empty()
    {
        None
    } else {
        Some(value_type(dict, &p.period_type)?)
    };
    Ok(pb::Profile {
        sample_type: Some(value_type(dict, &sample_type)?),
        samples,
        time_unix_nano: window.0.max(0) as u64,
        duration_nano: window.1.saturating_sub(window.0).max(0) as u64,
        period_type,
        period: p.period,
        profile_id: id.bytes().to_vec(),
        dropped_attributes_count: 0,
        original_payload_format: String::new(),
        original_payload: Vec::new(),
        attribute_indices: Vec::new(),
    })
}

/// One timestamp per counted interval: `total` intervals over `timestamps.len()` signals,
/// the surplus spread evenly (see [`EncodeOptions::timestamps`]). `None` when the counts do
/// not fit that shape.
fn spread_timestamps(total: i64, timestamps: &[i64]) -> Option<Vec<i64>> {
    let n = i64::try_from(timestamps.len()).ok()?;
    if n == 0 || total < n || total > n.saturating_mul(MAX_TIMESTAMP_EXPANSION) {
        return None;
    }
    let mut sorted = timestamps.to_vec();
    sorted.sort_unstable();
    let (each, rest) = ((total - n) / n, (total - n) % n);
    let mut out = Vec::with_capacity(usize::try_from(total).ok()?);
    for (i, &t) in sorted.iter().enumerate() {
        let copies = 1 + each + i64::from((i as i64) < rest);
        out.extend(std::iter::repeat_n(t, usize::try_from(copies).ok()?));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_spread_the_surplus_evenly() {
        assert_eq!(spread_timestamps(3, &[20, 10]), Some(vec![10, 10, 20]));
        assert_eq!(spread_timestamps(2, &[10, 20]), Some(vec![10, 20]));
        assert_eq!(spread_timestamps(1, &[10, 20]), None);
        assert_eq!(spread_timestamps(5, &[]), None);
        assert_eq!(spread_timestamps(1000, &[1]), None);
    }

    #[test]
    fn nth_profile_ids_differ_and_are_never_zero() {
        let id = ProfileId::new([1; 16]).unwrap();
        assert_eq!(id.nth(0), id);
        assert_ne!(id.nth(1), id);
        let mut almost = [0u8; 16];
        almost[0] = 1;
        let id = ProfileId::new(almost).unwrap();
        assert_ne!(id.nth(1).bytes(), [0; 16]);
        assert!(ProfileId::new([0; 16]).is_none());
    }
}
