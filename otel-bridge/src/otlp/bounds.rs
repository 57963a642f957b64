//! Bounds on what one OTLP profile may hold, for backends that refuse or cut what is larger
//! (Grafana Pyroscope's are in [`super::pyroscope`]): which sample attributes are sent, how
//! deep a stack may be, and how many samples and bytes one profile may carry. A profile whose
//! samples do not fit is sent in parts, each a request of its own with the same types and
//! time window ([`super::encode_bounded`]); a reader adds them up like any two profiles of one
//! series. Parts are requests rather than profiles of one request so that each request stays
//! small too (a Collector's OTLP gRPC receiver takes 4 MiB by default).

use std::collections::HashSet;
use std::ops::Range;

use crate::model::{FunctionId, LabelValue, Link, LocationId, Profile, Sample, StrId};

/// What the encoder keeps each OTLP profile within. [`Bounds::NONE`] (the default) bounds
/// nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Most samples per OTLP profile.
    pub max_samples: usize,
    /// Most bytes per OTLP profile, counted as the pprof profile a backend converts it to
    /// would take, estimated from above: its samples and the locations, functions and strings
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

/// What a converted sample's label takes: tag and length, key and value string ids.
const LABEL_BYTES: usize = 2 + 3 + 3;
/// A varint field of any value: tag and at most 10 bytes.
const NUMBER_BYTES: usize = 11;

/// An upper estimate of the pprof profile one part of a profile converts to, per sample type,
/// grown sample by sample: what each sample takes (its value, location ids and labels) plus
/// each location, function and string the part reaches for the first time. A converted
/// profile carries only what its samples use (grafana/pyroscope `pkg/ingester/otlp/convert.go`
/// converts locations, functions and strings as samples reach them), so a part is charged for
/// its own. Stacks count as the encoder sends them, cut at the depth bound, and labels only
/// when they may be sent.
struct PartSize<'a> {
    p: &'a Profile,
    bounds: &'a Bounds,
    locations: HashSet<LocationId>,
    functions: HashSet<FunctionId>,
    strings: HashSet<StrId>,
    links: HashSet<Link>,
    bytes: usize,
    samples: usize,
}

impl<'a> PartSize<'a> {
    fn new(p: &'a Profile, bounds: &'a Bounds) -> PartSize<'a> {
        PartSize {
            p,
            bounds,
            locations: HashSet::new(),
            functions: HashSet::new(),
            strings: HashSet::new(),
            links: HashSet::new(),
            bytes: 0,
            samples: 0,
        }
    }

    fn string(&mut self, id: StrId) -> usize {
        if !self.strings.insert(id) {
            return 0;
        }
        field_len(self.p.str(id).len())
    }

    fn function(&mut self, id: FunctionId) -> usize {
        if !self.functions.insert(id) {
            return 0;
        }
        let Some(f) = self.p.function(id) else {
            return 0;
        };
        let (name, system, file) = (f.name, f.system_name, f.filename);
        // id, three string ids, start line.
        field_len(5 * NUMBER_BYTES) + self.string(name) + self.string(system) + self.string(file)
    }

    fn location(&mut self, id: LocationId) -> usize {
        if !self.locations.insert(id) {
            return 0;
        }
        let Some(loc) = self.p.location(id) else {
            return 0;
        };
        let lines: Vec<FunctionId> = loc.lines.iter().map(|l| l.function).collect();
        // id, mapping id, address, and per line a framed function id and line number.
        let mut n = field_len(3 * NUMBER_BYTES + lines.len() * field_len(2 * NUMBER_BYTES));
        for f in lines {
            n += self.function(f);
        }
        n
    }

    /// What `sample` adds to the part.
    fn cost(&mut self, sample: &Sample) -> usize {
        let p = self.p;
        let stack = p.stack(sample.stack);
        let depth = stack.len().min(self.bounds.max_stack_depth);
        let mut n = 0;
        let mut ids = 0;
        for &l in stack.iter().take(depth) {
            ids += varint_len(u64::from(l.0));
            n += self.location(l);
        }
        if depth < stack.len() {
            // The `[truncated]` frame: a location, a function, a name.
            ids += 1;
            n += 2 * field_len(5 * NUMBER_BYTES) + field_len(TRUNCATED_FRAME.len());
        }
        let mut labels = 0;
        for label in &sample.labels {
            if !self
                .bounds
                .allows_attribute(super::attribute_key_for_label(p.str(label.key)))
            {
                continue;
            }
            labels += 1;
            n += self.string(label.key);
            n += match label.value {
                LabelValue::Str(v) => self.string(v),
                LabelValue::Num { .. } => field_len(20),
            };
        }
        if let Some(link) = sample.link {
            // span_id and trace_id labels, their hex strings once per part.
            labels += 2;
            if self.links.insert(link) {
                n += field_len(16) + field_len(32) + 2 * field_len(8);
            }
        }
        let values = NUMBER_BYTES * sample.timestamps.len().max(1);
        n + field_len(field_len(values) + field_len(ids) + labels * LABEL_BYTES)
    }

    /// Starts the next part.
    fn reset(&mut self) {
        self.locations.clear();
        self.functions.clear();
        self.strings.clear();
        self.links.clear();
        self.bytes = 0;
        self.samples = 0;
    }
}

/// The samples of `p` in parts within `bounds`, as ranges of `p.samples`, in order: each part
/// at most `max_samples` samples and, unless it holds a single sample, at most
/// `max_profile_bytes` as [`PartSize`] counts them. The encoder merges samples, never splits
/// them, so a part sends at most as many samples per OTLP profile as it holds.
pub(super) fn parts(p: &Profile, bounds: &Bounds) -> Vec<Range<usize>> {
    let all = 0..p.samples.len();
    if bounds.max_samples >= p.samples.len() && bounds.max_profile_bytes == usize::MAX {
        return vec![all];
    }
    let mut size = PartSize::new(p, bounds);
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, s) in p.samples.iter().enumerate() {
        let mut cost = size.cost(s);
        let full = size.samples >= bounds.max_samples.max(1)
            || (size.samples > 0 && size.bytes.saturating_add(cost) > bounds.max_profile_bytes);
        if full {
            parts.push(start..i);
            start = i;
            size.reset();
            cost = size.cost(s);
        }
        size.bytes = size.bytes.saturating_add(cost);
        size.samples += 1;
    }
    parts.push(start..p.samples.len());
    parts
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
