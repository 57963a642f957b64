//! The production OTLP profiles decoder ([`decode`]) and the receiver's check
//! ([`check_request`]): the reading commands decode hundreds of stored requests per question
//! (an hour of one JVM is 360 of them), and the receiver checks every request it acknowledges.
//!
//! The reference decoder (`otlp::reference`, on prost) parses into the generated message structs
//! (an allocation per location, line and index list) and then interns everything into a
//! deduplicated model. This decoder walks the protobuf wire format once, keeps the dictionary's
//! indices as the model's indices (OTLP and the model both reserve index 0 for the zero value,
//! so the tables map one to one and nothing is interned or hashed), and checks every index on
//! the way, so bad input is an error, never a panic. The model it returns is the reference's
//! except that equal entries are not merged, which no reader depends on, and that
//! `thread.state` keeps its OTLP spelling; `tests/otlp_codec.rs` holds the two to that.
//!
//! It reads protobuf as the official parser does (`tests/tests/hostile/conformance` holds it to
//! Google's protobuf for Python, upb, on 24,000 mutated requests). A message field that occurs
//! twice is merged, as the encoding guide says: a dictionary or a resource split over two
//! occurrences is one, a value type written in two parts is one. Of a scalar written twice
//! the last counts, and indices are checked once the last is known. Repeated numbers are read
//! packed or not. A field the decoder does not know, or knows with another wire type, is skipped
//! as an unknown field, groups included. What the official parser rejects is rejected, in the
//! fields the model keeps and in those it does not (the scope, the mapping table, array
//! attribute values, schema URLs, which [`super::schema`] checks): malformed varints, tags and
//! lengths ([`super::wire`] has upb's limits), wire types 6 and 7, unbalanced groups, invalid
//! UTF-8 in any `string` field (never in `bytes`), nesting past 100. On top of that it checks
//! OTLP's rules, which [`DecodeError::layer`] tells apart.
//!
//! Measured (`cargo bench -p otel-bridge --bench decode`): about 15 times the reference's
//! speed. On a 449 KB request of 3 profiles, 2,000 distinct stacks of 20 to 40 frames and 2,616
//! strings, the reference takes 15.1 times as long as [`decode`] (median of 15 alternating
//! rounds; lowest 14.7, highest 16.3) and 35.0 times as long as [`check_request`]; criterion's
//! figures in the same run: 1.27 ms, 20.0 ms for the reference, 0.55 ms for the check.
//! Reading the whole request as the official parser does cost [`decode`] nothing measurable
//! and [`check_request`] about 2% (0.54 ms before; the two builds measured alternately).

use std::sync::Arc;

use opentelemetry::{KeyValue, Value};

use crate::model::{
    Dictionary, FrameKind, Function, FunctionId, Label, LabelValue, Line, Link, Location,
    LocationId, Profile, Sample, StackId, Stacks, StrId, ValueType,
};

/// Why OTLP profiles bytes could not be read, by this decoder or by the
/// reference one (`otlp::reference`). Every variant means the same to a caller: the input is
/// rejected as a whole (a half-read profile would skew every number built on it). Whether the
/// protobuf or OTLP's rules were broken is [`DecodeError::layer`].
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not the protobuf encoding of the profiles messages: a malformed varint, tag, length or
    /// group, a wire type that does not exist, messages nested too deep; says which.
    #[error("not an OTLP profiles protobuf: {0}")]
    Wire(&'static str),
    /// The reference decoder's (prost's) view of the same.
    #[error("not an OTLP profiles protobuf")]
    Protobuf(#[from] prost::DecodeError),
    /// A `string` field that is not UTF-8 (proto3 requires it; `bytes` fields may hold
    /// anything).
    #[error("a string field is not UTF-8")]
    Utf8,
    /// Gzip input that could not be inflated (the reference decoder accepts gzip; callers of
    /// [`decode`] inflate with [`crate::gzip`] first).
    #[error(transparent)]
    Inflate(#[from] crate::gzip::InflateError),
    /// Profiles without a dictionary (the reference decoder; [`decode`] reads them against an
    /// empty one, where only zero indices are in range).
    #[error("profiles but no dictionary")]
    NoDictionary,
    #[error("string_table[0] must be \"\", found {0:?}")]
    FirstStringNotEmpty(String),
    #[error("{referrer} refers to {table}[{index}], but the table has {len} entries")]
    OutOfRange {
        referrer: &'static str,
        table: &'static str,
        index: i64,
        len: usize,
    },
    #[error("a link has a {what} of {len} bytes (OTLP requires {want})")]
    BadIdLength {
        what: &'static str,
        len: usize,
        want: usize,
    },
    #[error("profile_id has {0} bytes (OTLP requires 0 or 16)")]
    BadProfileId(usize),
    #[error("a sample has {values} values and {timestamps} timestamps (must be equal when both are set)")]
    ValueCountMismatch { values: usize, timestamps: usize },
    #[error("a profile has no sample_type")]
    NoSampleType,
    /// Over one of the [`Limits`]: valid protobuf, but more than a request may hold.
    #[error("{what} ({found}) is over the limit of {limit}")]
    OverLimit {
        what: &'static str,
        found: usize,
        limit: usize,
    },
}

/// Which rules an input broke, as [`DecodeError::layer`] tells: the protobuf encoding, which
/// any protobuf parser (the official one included) rejects, or OTLP's rules for valid protobuf,
/// which only an OTLP reader checks. `tests/tests/hostile/conformance` holds the decoder to
/// the official parser with this split: whatever that parser accepts, [`check_request`] accepts
/// or rejects at the [`Otlp`](ErrorLayer::Otlp) layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorLayer {
    /// Not the protobuf encoding of the profiles messages (wire format, UTF-8 in a `string`
    /// field, nesting depth), or not gzip.
    Encoding,
    /// Valid protobuf that breaks a rule of OTLP profiles (an index out of range, an id of the
    /// wrong length, …) or one of the [`Limits`].
    Otlp,
}

impl DecodeError {
    /// Whether the input failed as protobuf or as OTLP (see [`ErrorLayer`]).
    pub fn layer(&self) -> ErrorLayer {
        match self {
            DecodeError::Wire(_)
            | DecodeError::Protobuf(_)
            | DecodeError::Utf8
            | DecodeError::Inflate(_) => ErrorLayer::Encoding,
            DecodeError::NoDictionary
            | DecodeError::FirstStringNotEmpty(_)
            | DecodeError::OutOfRange { .. }
            | DecodeError::BadIdLength { .. }
            | DecodeError::BadProfileId(_)
            | DecodeError::ValueCountMismatch { .. }
            | DecodeError::NoSampleType
            | DecodeError::OverLimit { .. } => ErrorLayer::Otlp,
        }
    }
}

/// How much one request may hold once decoded. The receiver rejects a request over any of them
/// (HTTP 400, gRPC INVALID_ARGUMENT, naming the limit) and the readers hold stored files to the
/// same, so whatever was accepted can be read. With stacks and the dictionary shared (see
/// [`crate::model`]), a decoded request takes memory in proportion to its bytes; these bound
/// the work per request and keep every count far from the 32-bit indices of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Profiles in one request.
    pub profiles: usize,
    /// Samples in one profile.
    pub samples: usize,
    /// Locations in one stack. The agent's deepest is its `depth` option (2048 by default);
    /// native profilers record up to a few thousand frames.
    pub stack_depth: usize,
    /// Entries in one dictionary table (strings, functions, locations, stacks, links,
    /// attributes).
    pub table_entries: usize,
}

impl Limits {
    /// The limits otelprof states (README, security notes).
    pub const DEFAULT: Limits = Limits {
        profiles: 10_000,
        samples: 1_000_000,
        stack_depth: 16_384,
        table_entries: 1_000_000,
    };

    fn check(found: usize, limit: usize, what: &'static str) -> Result<()> {
        if found > limit {
            return Err(DecodeError::OverLimit { what, found, limit });
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// The error for a link whose ids are neither both absent, nor 16 and 8 bytes long, nor a span id alone.
fn bad_link(trace_id: usize, span_id: usize) -> DecodeError {
    if trace_id == 16 {
        DecodeError::BadIdLength {
            what: "span_id",
            len: span_id,
            want: 8,
        }
    } else {
        DecodeError::BadIdLength {
            what: "trace_id",
            len: trace_id,
            want: 16,
        }
    }
}

type Result<T> = std::result::Result<T, DecodeError>;

use super::schema::{self, check_message, skip_field};
use super::wire::{Wire, FIXED64, LEN, VARINT};

/// How deep each message the decoder reads by hand is nested, the request being 0: the
/// official parser's depth limit counts from there (see [`super::wire`]).
mod depth {
    pub(super) const REQUEST: u32 = 0;
    pub(super) const RESOURCE_PROFILES: u32 = 1;
    pub(super) const DICTIONARY: u32 = 1;
    pub(super) const RESOURCE: u32 = 2;
    pub(super) const SCOPE_PROFILES: u32 = 2;
    /// An entry of a dictionary table.
    pub(super) const TABLE_ENTRY: u32 = 2;
    pub(super) const RESOURCE_ATTRIBUTE: u32 = 3;
    pub(super) const LINE: u32 = 3;
    pub(super) const PROFILE: u32 = 3;
    pub(super) const SAMPLE: u32 = 4;
    pub(super) const VALUE_TYPE: u32 = 4;
}

/// The model label key of an OTLP sample attribute key (the encoder's renaming, undone for the
/// thread keys only: `thread.state` stays as sent, unlike in the reference decoder, and the
/// readers' selectors match that spelling).
fn label_key_for_attribute(key: &str) -> &str {
    match key {
        crate::otlp::THREAD_NAME => "thread_name",
        crate::otlp::THREAD_ID => "thread_id",
        other => other,
    }
}

fn check(index: i64, len: usize, referrer: &'static str, table: &'static str) -> Result<usize> {
    usize::try_from(index)
        .ok()
        .filter(|i| *i < len || (*i == 0 && len == 0))
        .ok_or(DecodeError::OutOfRange {
            referrer,
            table,
            index,
            len,
        })
}

/// An attribute value as far as readers care.
#[derive(Clone, Debug)]
enum Any<'a> {
    Str(&'a str),
    StrIndex(i32),
    Bool(bool),
    Int(i64),
    Double(f64),
    Other,
}

/// Reads an `AnyValue` at `depth` into `v`. The value is a oneof: the last member on the wire
/// wins, and a second occurrence of the value's field merges into the first (so `v` starts as
/// what the earlier occurrences left, `Any::Other` for none). Unknown fields leave it alone.
fn any_value<'a>(b: &'a [u8], v: &mut Any<'a>, depth: u32) -> Result<()> {
    let mut w = Wire::new(b);
    while let Some((field, wire)) = w.key()? {
        *v = match (field, wire) {
            (1, LEN) => Any::Str(w.string()?),
            (2, VARINT) => Any::Bool(w.varint()? != 0),
            (3, VARINT) => Any::Int(w.varint()? as i64),
            (4, FIXED64) => Any::Double(f64::from_bits(w.fixed64()?)),
            (8, VARINT) => Any::StrIndex(w.int32()?),
            // Arrays, key-value lists and bytes: checked, not kept.
            (5..=7, LEN) => {
                skip_field(&mut w, field, wire, &schema::ANY_VALUE, depth)?;
                Any::Other
            }
            _ => {
                skip_field(&mut w, field, wire, &schema::ANY_VALUE, depth)?;
                continue;
            }
        };
    }
    Ok(())
}

/// The raw dictionary, borrowed from the request bytes.
#[derive(Default)]
struct Dict<'a> {
    strings: Vec<&'a str>,
    functions: Vec<&'a [u8]>,
    locations: Vec<&'a [u8]>,
    links: Vec<&'a [u8]>,
    attributes: Vec<&'a [u8]>,
    stacks: Vec<&'a [u8]>,
}

/// Reads the dictionary from every occurrence of its field: protobuf merges them, so the tables
/// of a later occurrence continue those of an earlier one.
fn read_dict<'a>(parts: &[&'a [u8]]) -> Result<Dict<'a>> {
    let mut d = Dict::default();
    for part in parts {
        let mut w = Wire::new(part);
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (2, LEN) => d.locations.push(w.bytes()?),
                (3, LEN) => d.functions.push(w.bytes()?),
                (4, LEN) => d.links.push(w.bytes()?),
                (5, LEN) => d.strings.push(w.string()?),
                (6, LEN) => d.attributes.push(w.bytes()?),
                (7, LEN) => d.stacks.push(w.bytes()?),
                // The mapping table (JVM frames have no mappings) is checked, not kept.
                _ => skip_field(&mut w, field, wire, &schema::DICTIONARY, depth::DICTIONARY)?,
            }
        }
    }
    if let Some(first) = d.strings.first().filter(|s| !s.is_empty()) {
        return Err(DecodeError::FirstStringNotEmpty((*first).to_owned()));
    }
    Ok(d)
}

impl Dict<'_> {
    /// Checks the encoding of every table entry, without OTLP's rules: what a request without
    /// profiles needs (nothing refers to its tables, but the official parser still reads them).
    fn check_encoding(&self) -> Result<()> {
        for (entries, message) in [
            (&self.functions, &schema::FUNCTION),
            (&self.locations, &schema::LOCATION),
            (&self.links, &schema::LINK),
            (&self.attributes, &schema::KEY_VALUE_AND_UNIT),
            (&self.stacks, &schema::STACK),
        ] {
            for e in entries {
                check_message(e, message, depth::TABLE_ENTRY)?;
            }
        }
        Ok(())
    }

    fn check_limits(&self, limits: &Limits) -> Result<()> {
        for (n, what) in [
            (self.strings.len(), "the string table's length"),
            (self.functions.len(), "the function table's length"),
            (self.locations.len(), "the location table's length"),
            (self.links.len(), "the link table's length"),
            (self.attributes.len(), "the attribute table's length"),
            (self.stacks.len(), "the stack table's length"),
        ] {
            Limits::check(n, limits.table_entries, what)?;
        }
        Ok(())
    }
}

/// The model tables every profile of the request shares (empty when only checking): the
/// dictionary, and per attribute-table and link-table entry what a sample gets from it.
#[derive(Default)]
struct Tables {
    dictionary: Dictionary,
    /// Per attribute-table entry, the sample label it becomes (if any).
    labels: Vec<Option<Label>>,
    links: Vec<Option<Link>>,
}

impl Tables {
    fn intern_extra(&mut self, s: &str) -> StrId {
        // Extra strings (label keys renamed, numbers as text) are few: a linear probe of the
        // appended tail keeps the dictionary's indices intact.
        let strings = &mut self.dictionary.strings;
        let base = strings.len();
        if let Some(i) = strings.iter().rposition(|x| x == s) {
            return StrId(u32::try_from(i).unwrap_or(u32::MAX));
        }
        strings.push(s.to_owned());
        StrId(u32::try_from(base).unwrap_or(u32::MAX))
    }
}

fn str_id(index: i32, d: &Dict<'_>, referrer: &'static str) -> Result<StrId> {
    let i = check(i64::from(index), d.strings.len(), referrer, "string_table")?;
    Ok(StrId(u32::try_from(i).unwrap_or(u32::MAX)))
}

/// Reads every dictionary table a profile can refer to, checking each index. The model tables
/// are made only when `BUILD`; without it this is the check's pass over the same bytes, with
/// the same checks in the same order: functions, attributes, locations (which refer to both),
/// links, stacks (which refer to locations).
fn build_tables<const BUILD: bool>(d: &Dict<'_>, limits: &Limits) -> Result<Tables> {
    let mut t = Tables::default();
    if BUILD {
        let dict = &mut t.dictionary;
        dict.strings = d.strings.iter().map(|s| (*s).to_owned()).collect();
        if dict.strings.is_empty() {
            dict.strings.push(String::new());
        }
        dict.functions = Vec::with_capacity(d.functions.len().max(1));
        dict.locations = Vec::with_capacity(d.locations.len().max(1));
        t.labels.reserve(d.attributes.len());
        t.links.reserve(d.links.len());
    }
    read_functions::<BUILD>(d, &mut t)?;
    let frames = read_attributes::<BUILD>(d, &mut t)?;
    read_locations::<BUILD>(d, &frames, &mut t)?;
    read_links::<BUILD>(d, &mut t)?;
    read_stacks::<BUILD>(d, limits, &mut t)?;
    Ok(t)
}

fn read_functions<const BUILD: bool>(d: &Dict<'_>, t: &mut Tables) -> Result<()> {
    for f in &d.functions {
        let mut w = Wire::new(f);
        // Indices are checked once read: of a field repeated on the wire, only the last counts.
        let (mut name, mut system_name, mut filename, mut start_line) = (0, 0, 0, 0);
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (1, VARINT) => name = w.int32()?,
                (2, VARINT) => system_name = w.int32()?,
                (3, VARINT) => filename = w.int32()?,
                (4, VARINT) => start_line = w.varint()? as i64,
                _ => skip_field(&mut w, field, wire, &schema::FUNCTION, depth::TABLE_ENTRY)?,
            }
        }
        let func = Function {
            name: str_id(name, d, "a function name")?,
            system_name: str_id(system_name, d, "a function name")?,
            filename: str_id(filename, d, "a function filename")?,
            start_line,
        };
        if BUILD {
            t.dictionary.functions.push(func);
        }
    }
    if BUILD && t.dictionary.functions.is_empty() {
        t.dictionary.functions.push(Function::default());
    }
    Ok(())
}

/// What each attribute-table entry says of a location that refers to it: the frame type it
/// sets, and whether it marks a pseudo-frame (made only when building).
#[derive(Default)]
struct FrameAttributes {
    kind: Vec<Option<FrameKind>>,
    pseudo: Vec<bool>,
}

/// Checks every attribute-table entry and, when `BUILD`, gives each the sample label it
/// becomes (into `t.labels`) and what it says of a location.
fn read_attributes<const BUILD: bool>(d: &Dict<'_>, t: &mut Tables) -> Result<FrameAttributes> {
    let mut frames = FrameAttributes::default();
    let (frame_type, pseudo) = if BUILD {
        frames.kind.reserve(d.attributes.len());
        frames.pseudo.reserve(d.attributes.len());
        (
            d.strings.iter().position(|s| *s == super::FRAME_TYPE),
            d.strings.iter().position(|s| *s == super::PSEUDO_FRAME),
        )
    } else {
        (None, None)
    };
    for a in &d.attributes {
        let (key_i, unit, value) = read_attribute(a, d)?;
        if !BUILD {
            continue;
        }
        frames.kind.push(if Some(key_i) == frame_type {
            attribute_text(&value, d).map(|kind| match kind.as_str() {
                "native" => FrameKind::Native,
                "kernel" => FrameKind::Kernel,
                _ => FrameKind::Jvm,
            })
        } else {
            None
        });
        frames
            .pseudo
            .push(Some(key_i) == pseudo && matches!(value, Any::Bool(true)));
        let label = attribute_label(t, d, key_i, unit, &value);
        t.labels.push(label);
    }
    Ok(frames)
}

/// An attribute value as text (`None` for values the model has no room for).
fn attribute_text(v: &Any<'_>, d: &Dict<'_>) -> Option<String> {
    match v {
        Any::Str(s) => Some((*s).to_owned()),
        // In range: read_attribute checked it.
        Any::StrIndex(i) => usize::try_from(*i)
            .ok()
            .and_then(|i| d.strings.get(i))
            .map(|s| (*s).to_owned()),
        Any::Bool(b) => Some(b.to_string()),
        Any::Double(f) => Some(f.to_string()),
        Any::Int(n) => Some(n.to_string()),
        Any::Other => None,
    }
}

/// The sample label an attribute-table entry becomes: its key renamed to the model's label
/// key, numbers with their unit (a thread id as text).
fn attribute_label(
    t: &mut Tables,
    d: &Dict<'_>,
    key_i: usize,
    unit: i32,
    value: &Any<'_>,
) -> Option<Label> {
    let attr_key = d.strings.get(key_i).copied().unwrap_or("");
    let label_key = label_key_for_attribute(attr_key);
    let label = match (value, label_key) {
        (Any::Int(n), "thread_id") => Some(LabelValue::Str(t.intern_extra(&n.to_string()))),
        (Any::Int(n), _) => Some(LabelValue::Num {
            value: *n,
            unit: StrId(u32::try_from(unit).unwrap_or(0)),
        }),
        (Any::Other, _) => None,
        (v, _) => attribute_text(v, d).map(|s| LabelValue::Str(t.intern_extra(&s))),
    };
    let key = if label_key == attr_key {
        StrId(u32::try_from(key_i).unwrap_or(u32::MAX))
    } else {
        t.intern_extra(label_key)
    };
    label.map(|value| Label { key, value })
}

fn read_locations<const BUILD: bool>(
    d: &Dict<'_>,
    frames: &FrameAttributes,
    t: &mut Tables,
) -> Result<()> {
    let mut attrs = Vec::new();
    for l in &d.locations {
        let mut w = Wire::new(l);
        let mut loc = Location::default();
        attrs.clear();
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (2, VARINT) => loc.address = w.varint()?,
                (3, LEN) => {
                    let line = read_line(w.bytes()?, d)?;
                    if BUILD {
                        loc.lines.push(line);
                    }
                }
                (4, LEN) => w.packed_i32(&mut attrs)?,
                (4, VARINT) => attrs.push(w.int32()?),
                _ => skip_field(&mut w, field, wire, &schema::LOCATION, depth::TABLE_ENTRY)?,
            }
        }
        let mut is_pseudo = false;
        for &a in &attrs {
            let i = check(
                i64::from(a),
                d.attributes.len(),
                "a location",
                "attribute_table",
            )?;
            if BUILD {
                if let Some(Some(kind)) = frames.kind.get(i) {
                    loc.kind = *kind;
                }
                is_pseudo |= frames.pseudo.get(i).copied().unwrap_or(false);
            }
        }
        if BUILD {
            if is_pseudo {
                loc.kind = FrameKind::Pseudo;
            }
            t.dictionary.locations.push(loc);
        }
    }
    if BUILD && t.dictionary.locations.is_empty() {
        t.dictionary.locations.push(Location::default());
    }
    Ok(())
}

/// One `Line` of a location, its function index checked.
fn read_line(b: &[u8], d: &Dict<'_>) -> Result<Line> {
    let mut lw = Wire::new(b);
    let (mut function, mut line) = (0, 0);
    while let Some((f, wt)) = lw.key()? {
        match (f, wt) {
            (1, VARINT) => function = lw.int32()?,
            (2, VARINT) => line = lw.varint()? as i64,
            _ => skip_field(&mut lw, f, wt, &schema::LINE, depth::LINE)?,
        }
    }
    let i = check(
        i64::from(function),
        d.functions.len(),
        "a line",
        "function_table",
    )?;
    Ok(Line {
        function: FunctionId(u32::try_from(i).unwrap_or(0)),
        line,
    })
}

fn read_links<const BUILD: bool>(d: &Dict<'_>, t: &mut Tables) -> Result<()> {
    for l in &d.links {
        let mut w = Wire::new(l);
        let (mut trace, mut span): (&[u8], &[u8]) = (&[], &[]);
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (1, LEN) => trace = w.bytes()?,
                (2, LEN) => span = w.bytes()?,
                _ => skip_field(&mut w, field, wire, &schema::LINK, depth::TABLE_ENTRY)?,
            }
        }
        let link = match (trace.len(), span.len()) {
            (16, 8) => {
                let mut link = Link::default();
                link.trace_id.copy_from_slice(trace);
                link.span_id.copy_from_slice(span);
                Some(link)
            }
            // A span without its trace: what a sender keeping trace ids away from Pyroscope
            // 1.20 to 2.0 sends (they make them series labels). Read as an all-zero trace id,
            // which no trace has.
            (0, 8) => {
                let mut link = Link::default();
                link.span_id.copy_from_slice(span);
                Some(link)
            }
            (0, 0) => None,
            (a, b) => return Err(bad_link(a, b)),
        };
        if BUILD {
            t.links.push(link);
        }
    }
    Ok(())
}

/// Stacks keep the request's indices: stack i of the request is StackId(i) of the model.
fn read_stacks<const BUILD: bool>(d: &Dict<'_>, limits: &Limits, t: &mut Tables) -> Result<()> {
    let mut indices = Vec::new();
    let mut stack = Vec::new();
    if BUILD {
        let frames: usize = d.stacks.iter().map(|s| s.len() / 2).sum();
        t.dictionary.stacks = Stacks::with_capacity(d.stacks.len(), frames);
    }
    for (n, s) in d.stacks.iter().enumerate() {
        let mut w = Wire::new(s);
        indices.clear();
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (1, LEN) => w.packed_i32(&mut indices)?,
                (1, VARINT) => indices.push(w.int32()?),
                _ => skip_field(&mut w, field, wire, &schema::STACK, depth::TABLE_ENTRY)?,
            }
        }
        Limits::check(indices.len(), limits.stack_depth, "a stack's depth")?;
        stack.clear();
        for &i in &indices {
            let i = check(i64::from(i), d.locations.len(), "a stack", "location_table")?;
            if BUILD {
                stack.push(LocationId(u32::try_from(i).unwrap_or(0)));
            }
        }
        if BUILD {
            if n == 0 {
                t.dictionary.stacks.set_first(&stack);
            } else {
                t.dictionary.stacks.push(&stack);
            }
        }
    }
    Ok(())
}

/// An attribute-table entry: its key (a checked string index), its unit (checked) and its value
/// (a string index in it checked too). The last of a repeated field wins, as in protobuf, and
/// repeated values merge.
fn read_attribute<'a>(b: &'a [u8], d: &Dict<'a>) -> Result<(usize, i32, Any<'a>)> {
    let mut w = Wire::new(b);
    let (mut key, mut unit, mut value) = (0i32, 0i32, Any::Other);
    while let Some((field, wire)) = w.key()? {
        match (field, wire) {
            (1, VARINT) => key = w.int32()?,
            (2, LEN) => any_value(w.bytes()?, &mut value, depth::TABLE_ENTRY + 1)?,
            (3, VARINT) => unit = w.int32()?,
            _ => skip_field(
                &mut w,
                field,
                wire,
                &schema::KEY_VALUE_AND_UNIT,
                depth::TABLE_ENTRY,
            )?,
        }
    }
    let key_i = check(
        i64::from(key),
        d.strings.len(),
        "an attribute key",
        "string_table",
    )?;
    check(
        i64::from(unit),
        d.strings.len(),
        "an attribute unit",
        "string_table",
    )?;
    if let Any::StrIndex(i) = value {
        check(i64::from(i), d.strings.len(), "a value", "string_table")?;
    }
    Ok((key_i, unit, value))
}

/// Reads one occurrence of a `ValueType` field into `vt` (type and unit string indices, checked
/// later): a later occurrence merges into an earlier one, as protobuf does with a message field
/// that appears twice.
fn value_type(b: &[u8], vt: &mut (i32, i32)) -> Result<()> {
    let mut w = Wire::new(b);
    while let Some((field, wire)) = w.key()? {
        match (field, wire) {
            (1, VARINT) => vt.0 = w.int32()?,
            (2, VARINT) => vt.1 = w.int32()?,
            _ => skip_field(&mut w, field, wire, &schema::VALUE_TYPE, depth::VALUE_TYPE)?,
        }
    }
    Ok(())
}

fn resolve_value_type(vt: (i32, i32), d: &Dict<'_>) -> Result<ValueType> {
    Ok(ValueType {
        ty: str_id(vt.0, d, "a value type")?,
        unit: str_id(vt.1, d, "a value type")?,
    })
}

/// Reads one OTLP profile against the shared tables `t`, checking every index, and counts it
/// and its samples into `checked`. The samples are made only when `BUILD`.
fn read_profile<const BUILD: bool>(
    b: &[u8],
    d: &Dict<'_>,
    shared: &Shared,
    checked: &mut Checked,
    limits: &Limits,
) -> Result<Profile> {
    let f = ProfileFields::read(b)?;
    if !f.profile_id.is_empty() && f.profile_id.len() != 16 {
        return Err(DecodeError::BadProfileId(f.profile_id.len()));
    }
    let sample_type = resolve_value_type(f.sample_type.ok_or(DecodeError::NoSampleType)?, d)?;
    let period_type = resolve_value_type(f.period_type, d)?;
    Limits::check(f.samples.len(), limits.samples, "a profile's sample count")?;
    checked.profiles += 1;
    let s = |id: StrId| d.strings.get(id.0 as usize).copied().unwrap_or("");
    // The encoder leaves out the period type when samples/count is there to derive it from.
    let derive = s(sample_type.ty) == "samples"
        && s(sample_type.unit) == "count"
        && f.period > 0
        && !s(period_type.ty).is_empty()
        && (s(period_type.ty), s(period_type.unit)) != ("samples", "count");
    let mut profile = Profile {
        dictionary: shared.dictionary.clone(),
        sample_types: if derive {
            vec![sample_type, period_type]
        } else {
            vec![sample_type]
        },
        period_type,
        period: f.period,
        time_nanos: i64::try_from(f.time).unwrap_or(i64::MAX),
        duration_nanos: i64::try_from(f.duration).unwrap_or(i64::MAX),
        samples: Vec::with_capacity(if BUILD { f.samples.len() } else { 0 }),
        comments: Vec::new(),
    };
    let mut sample = SampleFields::default();
    for sb in f.samples {
        sample.read(sb)?;
        let built = sample.resolve::<BUILD>(d, shared)?;
        checked.samples += 1;
        if let Some((stack, labels, link)) = built {
            let value = sample.value();
            profile.samples.push(Sample {
                stack,
                values: if derive {
                    vec![value, value.saturating_mul(f.period)]
                } else {
                    vec![value]
                },
                labels,
                link,
                timestamps: std::mem::take(&mut sample.timestamps),
            });
        }
    }
    Ok(profile)
}

/// The fields of one OTLP `Profile` as read, before any index is checked. Value types are
/// merged over the occurrences of their field.
#[derive(Default)]
struct ProfileFields<'a> {
    sample_type: Option<(i32, i32)>,
    period_type: (i32, i32),
    period: i64,
    time: u64,
    duration: u64,
    profile_id: &'a [u8],
    samples: Vec<&'a [u8]>,
}

impl<'a> ProfileFields<'a> {
    fn read(b: &'a [u8]) -> Result<ProfileFields<'a>> {
        let mut f = ProfileFields::default();
        let mut w = Wire::new(b);
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (1, LEN) => value_type(w.bytes()?, f.sample_type.get_or_insert((0, 0)))?,
                (2, LEN) => f.samples.push(w.bytes()?),
                (3, FIXED64) => f.time = w.fixed64()?,
                (4, VARINT) => f.duration = w.varint()?,
                (5, LEN) => value_type(w.bytes()?, &mut f.period_type)?,
                (6, VARINT) => f.period = w.varint()? as i64,
                (7, LEN) => f.profile_id = w.bytes()?,
                _ => skip_field(&mut w, field, wire, &schema::PROFILE, depth::PROFILE)?,
            }
        }
        Ok(f)
    }
}

/// What a model sample is known by: its stack, labels and link.
type SampleIdentity = (StackId, Vec<Label>, Option<Link>);

/// One OTLP `Sample` as read, its buffers reused from sample to sample.
#[derive(Default)]
struct SampleFields {
    stack: i32,
    link: i32,
    attrs: Vec<i32>,
    values: Vec<i64>,
    timestamps: Vec<i64>,
}

impl SampleFields {
    fn read(&mut self, b: &[u8]) -> Result<()> {
        let mut w = Wire::new(b);
        (self.stack, self.link) = (0, 0);
        self.attrs.clear();
        self.values.clear();
        self.timestamps.clear();
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (1, VARINT) => self.stack = w.int32()?,
                (2, LEN) => w.packed_i32(&mut self.attrs)?,
                (2, VARINT) => self.attrs.push(w.int32()?),
                (3, VARINT) => self.link = w.int32()?,
                (4, LEN) => {
                    let mut p = Wire::new(w.bytes()?);
                    while !p.at_end() {
                        self.values.push(p.varint()? as i64);
                    }
                }
                (4, VARINT) => self.values.push(w.varint()? as i64),
                (5, LEN) => {
                    let mut p = Wire::new(w.bytes()?);
                    while !p.at_end() {
                        self.timestamps
                            .push(i64::try_from(p.fixed64()?).unwrap_or(i64::MAX));
                    }
                }
                (5, FIXED64) => self
                    .timestamps
                    .push(i64::try_from(w.fixed64()?).unwrap_or(i64::MAX)),
                _ => skip_field(&mut w, field, wire, &schema::SAMPLE, depth::SAMPLE)?,
            }
        }
        if !self.values.is_empty()
            && !self.timestamps.is_empty()
            && self.values.len() != self.timestamps.len()
        {
            return Err(DecodeError::ValueCountMismatch {
                values: self.values.len(),
                timestamps: self.timestamps.len(),
            });
        }
        Ok(())
    }

    /// Checks the sample's stack, attribute and link indices against the request's tables;
    /// when `BUILD`, its stack, labels (sorted, without repeats) and link in the model.
    fn resolve<const BUILD: bool>(
        &self,
        d: &Dict<'_>,
        shared: &Shared,
    ) -> Result<Option<SampleIdentity>> {
        // Without a stack table, stack 0 is the model's empty stack.
        let stack = if self.stack == 0 && d.stacks.is_empty() {
            0
        } else {
            check(
                i64::from(self.stack),
                d.stacks.len(),
                "a sample",
                "stack_table",
            )?
        };
        let mut labels = Vec::with_capacity(if BUILD { self.attrs.len() } else { 0 });
        for &a in &self.attrs {
            let i = check(
                i64::from(a),
                d.attributes.len(),
                "a sample",
                "attribute_table",
            )?;
            if let Some(Some(l)) = shared.labels.get(i) {
                labels.push(*l);
            }
        }
        let link = if self.link == 0 {
            None
        } else {
            let i = check(
                i64::from(self.link),
                d.links.len(),
                "a sample",
                "link_table",
            )?;
            shared.links.get(i).copied().flatten()
        };
        if !BUILD {
            return Ok(None);
        }
        labels.sort_unstable();
        labels.dedup();
        Ok(Some((
            StackId(u32::try_from(stack).unwrap_or(0)),
            labels,
            link,
        )))
    }

    /// The sample's value: the sum of its values, or with none, one per timestamp
    /// (profiles.proto, Sample).
    fn value(&self) -> i64 {
        if self.values.is_empty() {
            i64::try_from(self.timestamps.len()).unwrap_or(i64::MAX)
        } else {
            self.values.iter().fold(0i64, |a, v| a.saturating_add(*v))
        }
    }
}

/// Appends the attributes of one occurrence of a `resource` field to `out`: a second
/// occurrence merges into the first, so its attributes follow the first's.
fn read_resource(b: &[u8], d: &Dict<'_>, out: &mut Vec<KeyValue>) -> Result<()> {
    let mut w = Wire::new(b);
    while let Some((field, wire)) = w.key()? {
        if (field, wire) != (1, LEN) {
            skip_field(&mut w, field, wire, &schema::RESOURCE, depth::RESOURCE)?;
            continue;
        }
        let mut kv = Wire::new(w.bytes()?);
        let (mut key, mut key_index, mut value) = ("", 0i32, Any::Other);
        while let Some((f, wt)) = kv.key()? {
            match (f, wt) {
                (1, LEN) => key = kv.string()?,
                (2, LEN) => any_value(kv.bytes()?, &mut value, depth::RESOURCE_ATTRIBUTE + 1)?,
                (3, VARINT) => key_index = kv.int32()?,
                _ => skip_field(
                    &mut kv,
                    f,
                    wt,
                    &schema::KEY_VALUE,
                    depth::RESOURCE_ATTRIBUTE,
                )?,
            }
        }
        let key = if key.is_empty() {
            let i = check(
                i64::from(key_index),
                d.strings.len(),
                "a resource key",
                "string_table",
            );
            match i {
                Ok(i) => d.strings.get(i).copied().unwrap_or(""),
                Err(_) => continue,
            }
        } else {
            key
        };
        let value: Value = match value {
            Any::Str(s) => s.to_owned().into(),
            Any::StrIndex(i) => {
                match check(i64::from(i), d.strings.len(), "a value", "string_table") {
                    Ok(i) => d.strings.get(i).copied().unwrap_or("").to_owned().into(),
                    Err(_) => continue,
                }
            }
            Any::Bool(b) => b.into(),
            Any::Int(n) => n.into(),
            Any::Double(f) => f.into(),
            Any::Other => continue,
        };
        out.push(KeyValue::new(key.to_owned(), value));
    }
    Ok(())
}

/// What one walk over a request found: the profiles (when it built them) and the counts.
#[derive(Default)]
struct Walked {
    profiles: Vec<(Vec<KeyValue>, Profile)>,
    checked: Checked,
}

/// The one walk over a request, shared by [`decode`] (`BUILD`: make the model) and
/// [`check_request`] (only check and count). Both modes run the same reads and the same checks
/// in the same order, so the check accepts exactly what the decoder accepts, by construction;
/// `BUILD` is a const parameter, so each mode compiles to its own copy with the other's work
/// removed: the decoder pays nothing for the check, and the check allocates no model.
fn walk<const BUILD: bool>(bytes: &[u8], limits: &Limits) -> Result<Walked> {
    let mut w = Wire::new(bytes);
    let mut resource_profiles: Vec<&[u8]> = Vec::new();
    // A message field that occurs more than once is merged (the encoding guide, "Last One
    // Wins" and merging of embedded messages): every occurrence of the dictionary counts.
    let mut dict: smallvec::SmallVec<[&[u8]; 1]> = smallvec::SmallVec::new();
    while let Some((field, wire)) = w.key()? {
        match (field, wire) {
            (1, LEN) => resource_profiles.push(w.bytes()?),
            (2, LEN) => dict.push(w.bytes()?),
            _ => skip_field(&mut w, field, wire, &schema::REQUEST, depth::REQUEST)?,
        }
    }
    let d = read_dict(&dict)?;
    d.check_limits(limits)?;
    // (resource, profile bytes) of every profile, each resource read once.
    let mut profiles: Vec<(std::rc::Rc<Vec<KeyValue>>, &[u8])> = Vec::new();
    for rp in resource_profiles {
        let mut w = Wire::new(rp);
        let mut resource = Vec::new();
        let mut scopes: Vec<&[u8]> = Vec::new();
        while let Some((field, wire)) = w.key()? {
            match (field, wire) {
                (1, LEN) => read_resource(w.bytes()?, &d, &mut resource)?,
                (2, LEN) => scopes.push(w.bytes()?),
                _ => skip_field(
                    &mut w,
                    field,
                    wire,
                    &schema::RESOURCE_PROFILES,
                    depth::RESOURCE_PROFILES,
                )?,
            }
        }
        let resource = std::rc::Rc::new(resource);
        for sp in scopes {
            let mut w = Wire::new(sp);
            while let Some((field, wire)) = w.key()? {
                if (field, wire) == (2, LEN) {
                    profiles.push((resource.clone(), w.bytes()?));
                } else {
                    // The scope (always otelprof's, or another producer's name) is checked,
                    // not kept.
                    skip_field(
                        &mut w,
                        field,
                        wire,
                        &schema::SCOPE_PROFILES,
                        depth::SCOPE_PROFILES,
                    )?;
                }
            }
        }
    }
    let mut out = Walked::default();
    Limits::check(profiles.len(), limits.profiles, "the number of profiles")?;
    // No profiles: nothing refers to the tables, so OTLP's rules do not apply to them (an
    // index out of range there is not checked), but their encoding is protobuf's.
    if profiles.is_empty() {
        d.check_encoding()?;
        return Ok(out);
    }
    if BUILD {
        out.profiles.reserve(profiles.len());
    }
    let Tables {
        dictionary,
        labels,
        links,
    } = build_tables::<BUILD>(&d, limits)?;
    // Every profile of the request shares the one dictionary: decoded once, never copied.
    let shared = Shared {
        dictionary: Arc::new(dictionary),
        labels,
        links,
    };
    for (resource, bytes) in profiles {
        let profile = read_profile::<BUILD>(bytes, &d, &shared, &mut out.checked, limits)?;
        if BUILD {
            out.profiles.push(((*resource).clone(), profile));
        }
    }
    Ok(out)
}

/// What the profiles of a request read from its dictionary.
struct Shared {
    dictionary: Arc<Dictionary>,
    labels: Vec<Option<Label>>,
    links: Vec<Option<Link>>,
}

/// Decodes an `ExportProfilesServiceRequest` / `ProfilesData` (uncompressed: inflate gzip
/// with [`crate::gzip`] first) into its profiles, each with its resource.
pub fn decode(bytes: &[u8]) -> Result<Vec<(Vec<KeyValue>, Profile)>> {
    Ok(walk::<true>(bytes, &Limits::DEFAULT)?.profiles)
}

/// What [`check_request`] found in a valid request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub profiles: usize,
    pub samples: usize,
}

/// Checks a request as [`decode`] would (it is the same walk: every index in range, ids of the
/// right length, values matching timestamps) without building anything: what a receiver needs
/// before it acknowledges, at a fraction of the cost.
pub fn check_request(bytes: &[u8]) -> Result<Checked> {
    Ok(walk::<false>(bytes, &Limits::DEFAULT)?.checked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::{EncodeOptions, ProfileId};
    use crate::ProfileBuilder;

    fn sample_profile() -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10,
        );
        let main = b.function("app.Main.main", "Main.java", 1);
        let work = b.function("app.Work.run", "Work.java", 5);
        let gc = b.function("[GC_active]", "", 0);
        let lm = b.location(main, 3, FrameKind::Jvm);
        let lw = b.location(work, 9, FrameKind::Jvm);
        let lg = b.location(gc, 0, FrameKind::Pseudo);
        let t = b.str_label("thread_name", "worker-1");
        let tid = b.str_label("thread_id", "42");
        let e = b.str_label("span_name", "GET /a");
        let link = Link::from_hex("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
        b.add_linked_sample(&[lw, lm], &[t, e, tid], link, &[3, 30], &[100, 200, 300]);
        b.add_sample(&[lm], &[t], &[2, 20]);
        b.add_sample(&[lg], &[], &[1, 10]);
        // The first sample's stack again (one stack table entry, three samples).
        b.add_sample(&[lw, lm], &[e], &[4, 40]);
        b.add_sample(&[lw, lm], &[], &[5, 50]);
        b.build(1_000, 5_000)
    }

    /// A sample as names and label texts, to compare two decoders whose indices differ.
    fn canonical(p: &Profile) -> Vec<String> {
        let mut v: Vec<String> = p
            .samples
            .iter()
            .map(|s| {
                let frames: Vec<String> = p
                    .stack(s.stack)
                    .iter()
                    .map(|l| {
                        let loc = p.location(*l).unwrap();
                        let names: Vec<&str> = p.location_function_names(*l).collect();
                        format!("{}:{:?}:{}", names.join("+"), loc.kind, loc.lines[0].line)
                    })
                    .collect();
                let mut labels: Vec<String> = s
                    .labels
                    .iter()
                    .map(|l| match l.value {
                        LabelValue::Str(v) => format!("{}={}", p.str(l.key), p.str(v)),
                        LabelValue::Num { value, unit } => {
                            format!("{}={}{}", p.str(l.key), value, p.str(unit))
                        }
                    })
                    .collect();
                labels.sort();
                format!(
                    "{} | {} | {:?} | {:?} | {:?}",
                    frames.join(";"),
                    labels.join(","),
                    s.link,
                    s.values,
                    s.timestamps
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn matches_the_reference_decoder() {
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_attribute(KeyValue::new("service.version", "1.5"))
            .build();
        for options in [
            EncodeOptions::default(),
            EncodeOptions {
                timestamps: true,
                thread_id: true,
                local_root_span_id: true,
                ..Default::default()
            },
        ] {
            let bytes = crate::otlp::encode_to_vec(
                &sample_profile(),
                &resource,
                ProfileId::from_random([3; 16]),
                &options,
            )
            .unwrap();
            let reference = super::super::reference::decode(&bytes).unwrap();
            let fast = decode(&bytes).unwrap();
            assert_eq!(fast.len(), reference.len());
            for ((res, p), r) in fast.iter().zip(&reference) {
                assert_eq!(res, &r.resource);
                assert_eq!(canonical(p), canonical(&r.profile), "{options:?}");
                assert_eq!(p.time_nanos, r.profile.time_nanos);
                assert_eq!(p.duration_nanos, r.profile.duration_nanos);
                assert_eq!(p.period, r.profile.period);
                let types = |p: &Profile| -> Vec<(String, String)> {
                    p.sample_types
                        .iter()
                        .map(|vt| (p.str(vt.ty).to_owned(), p.str(vt.unit).to_owned()))
                        .collect()
                };
                assert_eq!(types(p), types(&r.profile));
            }
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let resource = opentelemetry_sdk::Resource::builder_empty().build();
        let bytes = crate::otlp::encode_to_vec(
            &sample_profile(),
            &resource,
            ProfileId::from_random([3; 16]),
            &EncodeOptions::default(),
        )
        .unwrap();
        // Every truncation and every single-byte corruption: errors or a result, never a panic.
        for n in 0..bytes.len() {
            let _ = decode(&bytes[..n]);
            // The check accepts exactly what the decoder accepts.
            assert_eq!(
                decode(&bytes[..n]).is_ok(),
                check_request(&bytes[..n]).is_ok(),
                "cut at {n}"
            );
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            assert_eq!(decode(&b).is_ok(), check_request(&b).is_ok(), "byte {i}");
        }
        assert_eq!(
            check_request(&bytes).unwrap(),
            Checked {
                profiles: 1,
                samples: 5
            }
        );
        assert!(decode(&[0x0a, 0xff]).is_err());
        assert_eq!(decode(&[]).unwrap().len(), 0);
    }

    #[test]
    fn tables_nothing_refers_to_are_not_checked() {
        // A dictionary with a broken function and no profile: nothing would read the function,
        // so the decoder returns no profile and the check (the same walk) agrees.
        use crate::otlp::proto as pb;
        use prost::Message as _;
        let request = crate::otlp::ExportProfilesServiceRequest {
            resource_profiles: Vec::new(),
            dictionary: Some(pb::ProfilesDictionary {
                string_table: vec![String::new()],
                function_table: vec![pb::Function {
                    name_strindex: 99,
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let bytes = request.encode_to_vec();
        assert_eq!(decode(&bytes).unwrap().len(), 0);
        assert_eq!(check_request(&bytes).unwrap(), Checked::default());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            proptest::prop_assert_eq!(decode(&bytes).is_ok(), check_request(&bytes).is_ok());
        }
    }
}
