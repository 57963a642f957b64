//! Selecting samples across profiles: by resource and sample attributes, by trace and span,
//! by time, by profile type. Pure: callers decode profiles and hand them in with their
//! resource; this module says which samples count and with what weight.
//!
//! A [`Condition`] names a key that may live on the resource (`service.version`,
//! `deployment.environment.name`) or on the samples (`span_name`, `thread.name`). The
//! resource is asked first; a key it lacks is looked up on each sample. Sample keys are
//! matched in both spellings, the OTLP attribute key (`thread.name`) and the pprof label key
//! (`thread_name`), because the same data arrives through both formats.

use crate::focus::Focus;
use crate::time::parse_time;
use otel_bridge::model::{LabelValue, Link, Profile, Sample};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
}

/// `key=value` or `key!=value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub key: String,
    pub op: Op,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("{0:?} is not key=value or key!=value")]
    NotKeyValue(String),
    #[error("{0:?} has an empty key")]
    EmptyKey(String),
    #[error("trace id {0:?} is not 32 hex digits")]
    BadTraceId(String),
    #[error("span id {0:?} is not 16 hex digits")]
    BadSpanId(String),
    #[error(transparent)]
    BadTime(#[from] crate::time::TimeError),
    #[error("unknown profile type {0:?} (use cpu, wall, alloc, lock or live)")]
    BadType(String),
    #[error(
        "unknown value {0:?} (use time or samples for cpu and wall, bytes or objects for alloc, \
         delay or contentions for lock)"
    )]
    BadValue(String),
}

impl Condition {
    /// Parses `key=value` or `key!=value` (the value may contain `=`).
    pub fn parse(text: &str) -> Result<Condition, SelectorError> {
        let (key, op, value) = match (text.find("!="), text.find('=')) {
            (Some(ne), Some(eq)) if ne < eq => (&text[..ne], Op::Ne, &text[ne + 2..]),
            (_, Some(eq)) => (&text[..eq], Op::Eq, &text[eq + 1..]),
            _ => return Err(SelectorError::NotKeyValue(text.to_owned())),
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(SelectorError::EmptyKey(text.to_owned()));
        }
        Ok(Condition {
            key: key.to_owned(),
            op,
            value: value.to_owned(),
        })
    }

    fn holds(&self, found: Option<&str>) -> bool {
        match self.op {
            Op::Eq => found == Some(self.value.as_str()),
            Op::Ne => found != Some(self.value.as_str()),
        }
    }
}

/// The kinds of profile the agent makes, by their OTLP / pprof sample types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileType {
    Cpu,
    Wall,
    Alloc,
    Lock,
    /// The live heap: snapshots of the objects alive at one instant (`inuse_space/bytes`,
    /// `inuse_objects/count`, duration 0), which are never to be added up over time.
    Live,
}

impl ProfileType {
    pub fn parse(text: &str) -> Result<ProfileType, SelectorError> {
        Ok(match text {
            "cpu" => ProfileType::Cpu,
            "wall" => ProfileType::Wall,
            "alloc" => ProfileType::Alloc,
            "lock" => ProfileType::Lock,
            "live" => ProfileType::Live,
            _ => return Err(SelectorError::BadType(text.to_owned())),
        })
    }

    /// Whether each profile is a snapshot of a state (the live heap) rather than what
    /// happened over its period: snapshots are never added up over time
    /// ([`crate::merge::Merger`] keeps the latest of each instance).
    pub fn is_snapshot(self) -> bool {
        self == ProfileType::Live
    }

    pub fn name(self) -> &'static str {
        match self {
            ProfileType::Cpu => "cpu",
            ProfileType::Wall => "wall",
            ProfileType::Alloc => "alloc",
            ProfileType::Lock => "lock",
            ProfileType::Live => "live",
        }
    }

    /// Index of the value to add up for this type and `measure` in `profile`'s samples, and of
    /// the value that counts observations (for significance), if the profile has it. One sample
    /// type only, never one standing in for another: an OTLP request carries an allocation
    /// profile as two profiles, bytes and objects, which must not add up.
    ///
    /// CPU: `cpu/nanoseconds` (restored by the OTLP decoder from `samples/count` × period), or
    /// `samples/count`. Wall: `wall/nanoseconds`, or `samples/count`. Allocation:
    /// `alloc_space/bytes`, or `alloc_objects/count`. Lock: `delay/nanoseconds`, or
    /// `contentions/count`. Live heap: `inuse_space/bytes`, or `inuse_objects/count`. Counted
    /// by samples, objects and contentions.
    pub fn value_index(self, profile: &Profile, measure: Measure) -> Option<ValueIndex> {
        let find = |ty: &str| profile.sample_type_index(ty);
        let period = profile.str(profile.period_type.ty);
        let count = match self {
            ProfileType::Cpu | ProfileType::Wall => find("samples"),
            ProfileType::Alloc => find("alloc_objects"),
            ProfileType::Lock => find("contentions"),
            ProfileType::Live => find("inuse_objects"),
        };
        let value = match (self, measure) {
            (ProfileType::Cpu, Measure::Amount) => find("cpu").or_else(|| {
                // A bare samples/count profile sampled on the CPU clock.
                (period == "cpu").then(|| find("samples")).flatten()
            })?,
            (ProfileType::Wall, Measure::Amount) => {
                find("wall").or_else(|| (period == "wall").then(|| find("samples")).flatten())?
            }
            (ProfileType::Cpu, Measure::Count) => {
                (period == "cpu" || find("cpu").is_some()).then_some(count)??
            }
            (ProfileType::Wall, Measure::Count) => {
                (period == "wall" || find("wall").is_some()).then_some(count)??
            }
            (ProfileType::Alloc, Measure::Amount) => find("alloc_space")?,
            (ProfileType::Lock, Measure::Amount) => find("delay")?,
            (ProfileType::Live, Measure::Amount) => find("inuse_space")?,
            (ProfileType::Alloc | ProfileType::Lock | ProfileType::Live, Measure::Count) => count?,
        };
        Some(ValueIndex { value, count })
    }

    /// The type of `profile`, if it is one of the agent's.
    pub fn of(profile: &Profile) -> Option<ProfileType> {
        [
            ProfileType::Cpu,
            ProfileType::Wall,
            ProfileType::Alloc,
            ProfileType::Lock,
            ProfileType::Live,
        ]
        .into_iter()
        .find(|t| t.value_index(profile, Measure::Amount).is_some())
    }
}

/// Which of a profile type's sample types a reading adds up: one at a time, so that units are
/// never mixed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Measure {
    /// Time (CPU, wall: nanoseconds), allocated bytes, or the delay of lock waits
    /// (nanoseconds).
    #[default]
    Amount,
    /// Samples (CPU, wall), allocated objects, or lock contentions.
    Count,
}

impl Measure {
    /// A `--value` name: what it measures, and the profile type it belongs to if only one.
    pub fn parse(text: &str) -> Result<(Measure, Option<ProfileType>), SelectorError> {
        Ok(match text {
            "time" => (Measure::Amount, None),
            "samples" => (Measure::Count, None),
            "bytes" | "alloc_space" => (Measure::Amount, Some(ProfileType::Alloc)),
            "objects" | "alloc_objects" => (Measure::Count, Some(ProfileType::Alloc)),
            "delay" => (Measure::Amount, Some(ProfileType::Lock)),
            "contentions" => (Measure::Count, Some(ProfileType::Lock)),
            _ => return Err(SelectorError::BadValue(text.to_owned())),
        })
    }
}

/// Which values of a profile's samples a reader adds up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueIndex {
    pub value: usize,
    /// The value counting observations (samples, objects, contentions), if the profile has one.
    pub count: Option<usize>,
}

/// Everything a reading command filters by. The default selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// All must hold.
    pub conditions: Vec<Condition>,
    pub trace_id: Option<[u8; 16]>,
    /// Any of these spans (empty: any span, or none).
    pub span_ids: Vec<[u8; 8]>,
    /// Unix nanoseconds, inclusive.
    pub from: Option<i64>,
    /// Unix nanoseconds, exclusive.
    pub to: Option<i64>,
    /// Which stacks and frames are kept, by frame name.
    pub focus: Focus,
}

/// What a selector says about one profile before looking at its samples.
#[derive(Clone, Debug, PartialEq)]
pub enum ProfileVerdict {
    /// No sample of it can match.
    Excluded,
    /// Its samples match if they pass the conditions left (those the resource could not decide).
    Included { sample_conditions: Vec<Condition> },
}

pub fn parse_trace_id(text: &str) -> Result<[u8; 16], SelectorError> {
    Link::from_hex(text, "0000000000000000")
        .map(|l| l.trace_id)
        .ok_or_else(|| SelectorError::BadTraceId(text.to_owned()))
}

pub fn parse_span_id(text: &str) -> Result<[u8; 8], SelectorError> {
    Link::from_hex("00000000000000000000000000000000", text)
        .map(|l| l.span_id)
        .ok_or_else(|| SelectorError::BadSpanId(text.to_owned()))
}

/// The model label key for a sample attribute key, and back: the two spellings of one key.
pub fn label_spellings(key: &str) -> [&str; 2] {
    match key {
        "thread.name" | "thread_name" => ["thread.name", "thread_name"],
        "thread.id" | "thread_id" => ["thread.id", "thread_id"],
        "thread.state" | "thread_state" => ["thread.state", "thread_state"],
        "thread.pool" | "thread_pool" => ["thread.pool", "thread_pool"],
        other => [other, other],
    }
}

/// The value of `key` on `sample` as text (numbers in decimal), in either spelling.
pub fn sample_value<'a>(
    profile: &'a Profile,
    sample: &Sample,
    key: &str,
) -> Option<SampleText<'a>> {
    let [a, b] = label_spellings(key);
    let found = sample.labels.iter().find_map(|l| {
        let k = profile.str(l.key);
        if k != a && k != b {
            return None;
        }
        Some(match l.value {
            LabelValue::Str(v) => SampleText::Str(profile.str(v)),
            LabelValue::Num { value, .. } => SampleText::Num(value),
        })
    });
    // Profiles written before the agent sent pools: the pool of the thread's name.
    if found.is_none() && a == "thread.pool" {
        if let Some(SampleText::Str(name)) = sample_value(profile, sample, "thread.name") {
            return Some(SampleText::PoolOf(name));
        }
    }
    found
}

/// A sample label value, borrowed when it is a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleText<'a> {
    Str(&'a str),
    Num(i64),
    /// The pool of this thread name ([`otelprof_primitives::thread_pool::pool_of`]).
    PoolOf(&'a str),
}

impl SampleText<'_> {
    pub fn to_text(self) -> String {
        match self {
            SampleText::Str(s) => s.to_owned(),
            SampleText::Num(n) => n.to_string(),
            SampleText::PoolOf(name) => {
                otelprof_primitives::thread_pool::pool_of(name).into_owned()
            }
        }
    }
}

/// The string form of a resource value, as `--where` compares it.
pub fn resource_value(resource: &[opentelemetry::KeyValue], key: &str) -> Option<String> {
    resource
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

impl Selector {
    pub fn is_empty(&self) -> bool {
        *self == Selector::default()
    }

    /// Adds the terms of `text`: comma-separated `key=value`, `key!=value`, and the special
    /// keys `trace_id`, `span_id`, `from`, `to` (times as [`parse_time`] reads them, relative
    /// to `now` in Unix nanoseconds).
    pub fn add_terms(&mut self, text: &str, now: i64) -> Result<(), SelectorError> {
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let c = Condition::parse(term)?;
            match (c.key.as_str(), c.op) {
                ("trace_id", Op::Eq) => self.trace_id = Some(parse_trace_id(&c.value)?),
                ("span_id", Op::Eq) => self.span_ids.push(parse_span_id(&c.value)?),
                ("from", Op::Eq) => self.from = Some(parse_time(&c.value, now)?),
                ("to", Op::Eq) => self.to = Some(parse_time(&c.value, now)?),
                _ => self.conditions.push(c),
            }
        }
        Ok(())
    }

    /// Both selectors at once (the conditions of both must hold; the narrower time window).
    pub fn and(&self, other: &Selector) -> Selector {
        let mut s = self.clone();
        s.conditions.extend(other.conditions.iter().cloned());
        if other.trace_id.is_some() {
            s.trace_id = other.trace_id;
        }
        s.span_ids.extend(other.span_ids.iter().copied());
        s.from = match (s.from, other.from) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        s.to = match (s.to, other.to) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        s.focus.include.extend(other.focus.include.iter().cloned());
        s.focus.exclude.extend(other.focus.exclude.iter().cloned());
        s.focus.hide.extend(other.focus.hide.iter().cloned());
        s
    }

    /// Decides what it can from the resource and the profile's time window.
    pub fn profile_verdict(
        &self,
        resource: &[opentelemetry::KeyValue],
        profile: &Profile,
    ) -> ProfileVerdict {
        let start = profile.time_nanos;
        let end = start.saturating_add(profile.duration_nanos.max(0));
        // A profile overlaps [from, to) unless it ends before `from` or starts at/after `to`;
        // a zero-length window is a point in time.
        if self
            .from
            .is_some_and(|from| end < from || (end == from && end > start))
            || self.to.is_some_and(|to| start >= to)
        {
            return ProfileVerdict::Excluded;
        }
        let mut sample_conditions = Vec::new();
        for c in &self.conditions {
            if resource.iter().any(|kv| kv.key.as_str() == c.key) {
                if !c.holds(resource_value(resource, &c.key).as_deref()) {
                    return ProfileVerdict::Excluded;
                }
            } else {
                sample_conditions.push(c.clone());
            }
        }
        ProfileVerdict::Included { sample_conditions }
    }

    /// The share of `sample` (0 to 1) that this selector keeps: 0 or 1, or the fraction of its
    /// timestamps inside [from, to) when the time window cuts through a sample that has them.
    /// `conditions` are the ones [`Selector::profile_verdict`] left to the samples.
    pub fn sample_share(
        &self,
        profile: &Profile,
        sample: &Sample,
        conditions: &[Condition],
    ) -> f64 {
        if !self.labels_hold(profile, sample, conditions) {
            return 0.0;
        }
        self.link_share(sample.link, &sample.timestamps)
    }

    /// Whether `sample`'s labels meet `conditions` (those [`Selector::profile_verdict`] left
    /// to the samples): the part of [`Selector::sample_share`] that samples with the same
    /// labels share.
    pub fn labels_hold(
        &self,
        profile: &Profile,
        sample: &Sample,
        conditions: &[Condition],
    ) -> bool {
        conditions.iter().all(|c| {
            let found = sample_value(profile, sample, &c.key).map(SampleText::to_text);
            c.holds(found.as_deref())
        })
    }

    /// The rest of [`Selector::sample_share`], for a sample with trace link `link` and
    /// `timestamps`: 0 when it is not in the trace or spans asked for, else the share of its
    /// timestamps in the time window (1 without timestamps).
    pub fn link_share(&self, link: Option<Link>, timestamps: &[i64]) -> f64 {
        if let Some(trace) = self.trace_id {
            if link.map(|l| l.trace_id) != Some(trace) {
                return 0.0;
            }
        }
        if !self.span_ids.is_empty() {
            match link {
                Some(l) if self.span_ids.contains(&l.span_id) => {}
                _ => return 0.0,
            }
        }
        if (self.from.is_some() || self.to.is_some()) && !timestamps.is_empty() {
            let inside = timestamps
                .iter()
                .filter(|&&t| self.from.is_none_or(|f| t >= f) && self.to.is_none_or(|e| t < e))
                .count();
            return inside as f64 / timestamps.len() as f64;
        }
        1.0
    }

    /// Whether a sample's trace link decides its share ([`Selector::link_share`]): a trace
    /// or span is asked for.
    pub fn names_links(&self) -> bool {
        self.trace_id.is_some() || !self.span_ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::KeyValue;
    use otel_bridge::model::{FrameKind, ProfileBuilder};

    fn profile() -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10,
        );
        let f = b.function("a.B.c", "B.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        let ep = b.str_label("span_name", "GET /a");
        let th = b.str_label("thread_name", "worker-1");
        let link = Link::from_hex("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
        b.add_linked_sample(&[l], &[ep, th], link, &[4, 40], &[100, 200, 300, 400]);
        b.add_sample(&[l], &[th], &[1, 10]);
        b.build(50, 1000)
    }

    #[test]
    fn conditions_parse() {
        let c = Condition::parse("service.version=1.4").unwrap();
        assert_eq!(
            (c.key.as_str(), c.op, c.value.as_str()),
            ("service.version", Op::Eq, "1.4")
        );
        let c = Condition::parse("span_name!=GET /a=b").unwrap();
        assert_eq!((c.op, c.value.as_str()), (Op::Ne, "GET /a=b"));
        let c = Condition::parse("k=a!=b").unwrap();
        assert_eq!(
            (c.key.as_str(), c.op, c.value.as_str()),
            ("k", Op::Eq, "a!=b")
        );
        assert!(Condition::parse("novalue").is_err());
        assert!(Condition::parse("=x").is_err());
    }

    #[test]
    fn resource_decides_first_then_samples() {
        let p = profile();
        let resource = vec![KeyValue::new("service.version", "1.4")];
        let mut s = Selector::default();
        s.add_terms("service.version=1.4,span_name=GET /a", 0)
            .unwrap();
        let ProfileVerdict::Included { sample_conditions } = s.profile_verdict(&resource, &p)
        else {
            panic!("excluded")
        };
        assert_eq!(sample_conditions.len(), 1);
        assert_eq!(s.sample_share(&p, &p.samples[0], &sample_conditions), 1.0);
        assert_eq!(s.sample_share(&p, &p.samples[1], &sample_conditions), 0.0);

        let mut other = Selector::default();
        other.add_terms("service.version=1.5", 0).unwrap();
        assert_eq!(
            other.profile_verdict(&resource, &p),
            ProfileVerdict::Excluded
        );
        let mut ne = Selector::default();
        ne.add_terms("thread.name!=worker-1", 0).unwrap();
        let ProfileVerdict::Included { sample_conditions } = ne.profile_verdict(&[], &p) else {
            panic!("excluded")
        };
        assert_eq!(ne.sample_share(&p, &p.samples[1], &sample_conditions), 0.0);
    }

    #[test]
    fn traces_spans_and_time_cut_samples() {
        let p = profile();
        let mut s = Selector::default();
        s.add_terms(
            "trace_id=0AF7651916CD43DD8448EB211C80319C,from=0.0000002,to=0.00000035",
            0,
        )
        .unwrap();
        assert_eq!((s.from, s.to), (Some(200), Some(350)));
        assert_eq!(s.sample_share(&p, &p.samples[0], &[]), 0.5);
        assert_eq!(s.sample_share(&p, &p.samples[1], &[]), 0.0);
        let mut span = Selector::default();
        span.add_terms("span_id=b7ad6b7169203332", 0).unwrap();
        assert_eq!(span.sample_share(&p, &p.samples[0], &[]), 0.0);
        assert!(Selector::default().add_terms("trace_id=xyz", 0).is_err());
        let mut late = Selector::default();
        late.add_terms("from=0.000002", 0).unwrap();
        assert_eq!(late.profile_verdict(&[], &p), ProfileVerdict::Excluded);
    }

    #[test]
    fn profile_types_find_their_values() {
        let p = profile();
        let vi = ProfileType::Cpu.value_index(&p, Measure::Amount).unwrap();
        assert_eq!((vi.value, vi.count), (1, Some(0)));
        assert!(ProfileType::Alloc
            .value_index(&p, Measure::Amount)
            .is_none());
        assert_eq!(ProfileType::of(&p), Some(ProfileType::Cpu));
        assert!(ProfileType::parse("heap").is_err());
        let vi = ProfileType::Cpu.value_index(&p, Measure::Count).unwrap();
        assert_eq!((vi.value, vi.count), (0, Some(0)));
    }

    #[test]
    fn bytes_and_objects_never_stand_in_for_each_other() {
        // An OTLP request carries an allocation profile as two profiles, one per sample type.
        let one = |ty: &str, unit: &str| {
            let mut b = ProfileBuilder::new(&[(ty, unit)], ("space", "bytes"), 524_288);
            let f = b.function("a.B.c", "B.java", 1);
            let l = b.location(f, 1, FrameKind::Jvm);
            b.add_sample(&[l], &[], &[7]);
            b.build(0, 10)
        };
        let (bytes, objects) = (one("alloc_space", "bytes"), one("alloc_objects", "count"));
        let amount = |p: &Profile| ProfileType::Alloc.value_index(p, Measure::Amount);
        let count = |p: &Profile| ProfileType::Alloc.value_index(p, Measure::Count);
        assert_eq!(amount(&bytes).map(|v| v.value), Some(0));
        assert!(amount(&objects).is_none());
        assert_eq!(count(&objects).map(|v| v.value), Some(0));
        assert!(count(&bytes).is_none());
        assert_eq!(
            Measure::parse("objects").unwrap(),
            (Measure::Count, Some(ProfileType::Alloc))
        );
        assert!(Measure::parse("weight").is_err());
    }

    #[test]
    fn live_heap_snapshots_are_known_by_their_types() {
        let mut b = ProfileBuilder::new(
            &[("inuse_objects", "count"), ("inuse_space", "bytes")],
            ("memory", "bytes"),
            524_288,
        );
        let f = b.function("a.B.c", "B.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        b.add_sample(&[l], &[], &[3, 4096]);
        let p = b.build(0, 0);
        assert_eq!(ProfileType::of(&p), Some(ProfileType::Live));
        let vi = ProfileType::Live.value_index(&p, Measure::Amount).unwrap();
        assert_eq!((vi.value, vi.count), (1, Some(0)));
        assert_eq!(ProfileType::parse("live").unwrap().name(), "live");
        assert!(ProfileType::Alloc
            .value_index(&p, Measure::Amount)
            .is_none());
    }
}
