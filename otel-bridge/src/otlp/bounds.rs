//! Bounds on what one OTLP profile may hold, for backends that refuse or cut what is larger
//! (Grafana Pyroscope's are in [`super::pyroscope`]): which sample attributes are sent, how
//! deep a stack may be, and how many samples and bytes one profile may carry. A sample type
//! whose samples do not fit is sent as several OTLP profiles of the same type and time window,
//! in the same request; a reader adds them up like any two profiles of one series.

use std::collections::HashSet;

use super::proto as pb;

/// What the encoder keeps each OTLP profile within. [`Bounds::NONE`] (the default) bounds
/// nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Most samples per OTLP profile.
    pub max_samples: usize,
    /// Most bytes per OTLP profile, counted as the pprof profile a backend converts it to
    /// would take (see [`ChunkSize`]): its samples and the locations, functions and strings
    /// they reach.
    pub max_profile_bytes: usize,
    /// Most locations per stack. A deeper stack keeps its leaf end (where the time is) and
    /// ends at the root side in a `[truncated]` frame, which counts in the bound.
    pub max_stack_depth: usize,
    /// The only sample attribute keys sent; `None` sends every key the other options allow.
    pub sample_attributes: Option<&'static [&'static str]>,
}

impl Bounds {
    pub const NONE: Bounds = Bounds {
        max_samples: usize::MAX,
        max_profile_bytes: usize::MAX,
        max_stack_depth: usize::MAX,
        sample_attributes: None,
    };

    /// Whether `key` may be sent as a sample attribute.
    pub(super) fn allows_attribute(&self, key: &str) -> bool {
        self.sample_attributes
            .is_none_or(|keys| keys.contains(&key))
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds::NONE
    }
}

/// The name of the frame that ends a stack cut at [`Bounds::max_stack_depth`], as the agent
/// names the frame that ends a stack cut at its own `depth`.
pub const TRUNCATED_FRAME: &str = "[truncated]";

/// Bytes a varint of `v` takes.
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Bytes of a length-delimited field of `len` bytes (tag, length, payload).
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// An upper estimate of the pprof profile one OTLP profile converts to, grown sample by
/// sample: what each sample takes (its value, location ids and labels) plus each location,
/// function and string the chunk reaches for the first time. The dictionary of the request is
/// shared by all its profiles, but a converted profile carries only what its own samples use
/// (grafana/pyroscope `pkg/ingester/otlp/convert.go` converts locations, functions and strings
/// as samples reach them), so a chunk is charged for its own.
pub(super) struct ChunkSize<'a> {
    dict: Tables<'a>,
    locations: HashSet<i32>,
    functions: HashSet<i32>,
    strings: HashSet<i32>,
    links: HashSet<i32>,
    pub(super) bytes: usize,
    pub(super) samples: usize,
}

/// What a converted sample's label takes: tag and length, key and value string ids.
const LABEL_BYTES: usize = 2 + 3 + 3;

/// The request's dictionary tables as far as they are built.
#[derive(Clone, Copy)]
pub(super) struct Tables<'a> {
    pub(super) strings: &'a [String],
    pub(super) functions: &'a [pb::Function],
    pub(super) locations: &'a [pb::Location],
    pub(super) stacks: &'a [pb::Stack],
    pub(super) attributes: &'a [pb::KeyValueAndUnit],
}

impl<'a> ChunkSize<'a> {
    pub(super) fn new(dict: Tables<'a>) -> ChunkSize<'a> {
        ChunkSize {
            dict,
            locations: HashSet::new(),
            functions: HashSet::new(),
            strings: HashSet::new(),
            links: HashSet::new(),
            bytes: 0,
            samples: 0,
        }
    }

    fn string(&mut self, i: i32) -> usize {
        if !self.strings.insert(i) {
            return 0;
        }
        let len = usize::try_from(i)
            .ok()
            .and_then(|i| self.dict.strings.get(i))
            .map_or(0, String::len);
        field_len(len)
    }

    fn function(&mut self, i: i32) -> usize {
        if !self.functions.insert(i) {
            return 0;
        }
        let Some(f) = usize::try_from(i)
            .ok()
            .and_then(|i| self.dict.functions.get(i))
        else {
            return 0;
        };
        let (name, system, file) = (f.name_strindex, f.system_name_strindex, f.filename_strindex);
        // id, three string ids, start line: at most 5 varints of 1 + 10 bytes, framed.
        field_len(5 * 11) + self.string(name) + self.string(system) + self.string(file)
    }

    fn location(&mut self, i: i32) -> usize {
        if !self.locations.insert(i) {
            return 0;
        }
        let Some(loc) = usize::try_from(i)
            .ok()
            .and_then(|i| self.dict.locations.get(i))
        else {
            return 0;
        };
        // id, mapping id, address, and per line a framed function id and line number.
        let mut n = field_len(3 * 11 + loc.lines.len() * field_len(2 * 11));
        for line in &loc.lines {
            n += self.function(line.function_index);
        }
        n
    }

    /// What `sample` adds to the chunk.
    pub(super) fn cost(&mut self, sample: &pb::Sample) -> usize {
        let stack = usize::try_from(sample.stack_index)
            .ok()
            .and_then(|i| self.dict.stacks.get(i));
        let mut n = 0;
        let mut ids = 0;
        if let Some(stack) = stack {
            for &l in &stack.location_indices {
                ids += varint_len(u64::try_from(l).unwrap_or(0)).max(1) + 1;
                n += self.location(l);
            }
        }
        let mut labels = sample.attribute_indices.len();
        for &a in &sample.attribute_indices {
            if let Some(kv) = usize::try_from(a)
                .ok()
                .and_then(|a| self.dict.attributes.get(a))
            {
                n += self.string(kv.key_strindex);
                // The value's text: a string of the table's, or an int written out.
                n += match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(
                        opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s),
                    ) => field_len(s.len()),
                    _ => field_len(20),
                };
            }
        }
        if sample.link_index != 0 {
            // span_id and trace_id labels, their hex strings once per chunk.
            labels += 2;
            if self.links.insert(sample.link_index) {
                n += field_len(16) + field_len(32) + 2 * field_len(8);
            }
        }
        // Values (one, or one per timestamp), location ids and labels, framed.
        let values = 11 * sample.values.len().max(1);
        n + field_len(field_len(values) + field_len(ids) + labels * LABEL_BYTES)
    }

    /// Starts the next chunk.
    pub(super) fn reset(&mut self) {
        self.locations.clear();
        self.functions.clear();
        self.strings.clear();
        self.links.clear();
        self.bytes = 0;
        self.samples = 0;
    }
}

/// `samples` in chunks within `bounds`: each chunk at most `max_samples` samples and, unless it
/// holds a single sample, at most `max_profile_bytes` as [`ChunkSize`] counts. Order is kept.
pub(super) fn split(
    samples: Vec<pb::Sample>,
    dict: Tables<'_>,
    bounds: &Bounds,
) -> Vec<Vec<pb::Sample>> {
    if bounds.max_samples >= samples.len() && bounds.max_profile_bytes == usize::MAX {
        return vec![samples];
    }
    let mut size = ChunkSize::new(dict);
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    for s in samples {
        let mut cost = size.cost(&s);
        let full = size.samples >= bounds.max_samples.max(1)
            || (size.samples > 0 && size.bytes.saturating_add(cost) > bounds.max_profile_bytes);
        if full {
            chunks.push(std::mem::take(&mut chunk));
            size.reset();
            cost = size.cost(&s);
        }
        size.bytes = size.bytes.saturating_add(cost);
        size.samples += 1;
        chunk.push(s);
    }
    if !chunk.is_empty() || chunks.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_take_what_protobuf_says() {
        for (v, n) in [
            (0, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::MAX, 10),
        ] {
            assert_eq!(varint_len(v), n, "{v}");
        }
    }
}
