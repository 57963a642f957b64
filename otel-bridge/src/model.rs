//! The profile model shared by every encoder and decoder.
//!
//! It is shaped after what pprof and OTLP profiles have in common: dictionary tables (strings,
//! functions, locations, stacks) referenced by index, and samples that point at a leaf-first
//! stack and carry labels and values. Index 0 of every table is the zero value, which is what
//! OTLP requires (`string_table[0] == ""`) and what pprof reserves (id 0 means "none"), so an
//! index here is a valid pprof id and a valid OTLP index at once.
//!
//! The tables live in a [`Dictionary`] that profiles share through an `Arc`: an OTLP request
//! carries one dictionary for all of its profiles, and a sample names its stack by index. So a
//! decoded request takes memory in proportion to its bytes, however many profiles share the
//! dictionary and however many samples share a stack (copying either per profile or per sample
//! let a 700 KB request decode into gigabytes).

use std::collections::HashMap;
use std::sync::Arc;

/// Index into [`Profile::strings`]; `StrId(0)` is the empty string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrId(pub u32);

/// Index into [`Profile::functions`]; `FunctionId(0)` is the zero function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionId(pub u32);

/// Index into [`Profile::locations`]; `LocationId(0)` is the zero location.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocationId(pub u32);

/// Index into [`Profile::mappings`]; `MappingId(0)` is the zero mapping ("no mapping": Java
/// frames and placeholders have none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MappingId(pub u32);

/// Index into the dictionary's [`Stacks`]; `StackId(0)` is the empty stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

/// A `(type, unit)` pair, e.g. `("cpu", "nanoseconds")`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ValueType {
    pub ty: StrId,
    pub unit: StrId,
}

/// What produced a frame; becomes `profile.frame.type` in OTLP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A Java method (interpreted, compiled or inlined), including `native` Java methods.
    #[default]
    Jvm,
    /// Native code outside the JVM's Java frames.
    Native,
    /// Kernel code.
    Kernel,
    /// Not code at all: a placeholder naming why a stack could not be walked
    /// (e.g. `[gc_active]`), so that failed walks are counted, never dropped.
    Pseudo,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Function {
    /// Display name, e.g. `com.example.Shop.checkout`.
    pub name: StrId,
    /// Name as the runtime knows it (may equal `name`).
    pub system_name: StrId,
    /// Source file as recorded in the class file, e.g. `Shop.java`.
    pub filename: StrId,
    /// First line of the function, 0 when unknown.
    pub start_line: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Line {
    pub function: FunctionId,
    /// 1-based source line, 0 when unknown.
    pub line: i64,
}

/// The lines of a location: one in nearly every profile (inlined frames are usually separate
/// locations), so one is stored inline and a decoded location table is one flat array.
pub type Lines = smallvec::SmallVec<[Line; 1]>;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Location {
    /// Innermost first: with inlining, the last entry is the caller the others were inlined into
    /// (pprof's convention). The agent reports inlined frames as separate locations, so its
    /// locations carry exactly one line.
    pub lines: Lines,
    pub kind: FrameKind,
    /// The run-time address of native code (0 for Java frames and placeholders).
    pub address: u64,
    /// The binary the address is in, so that a reader can symbolise it again.
    pub mapping: MappingId,
}

/// The file name of the mapping of kernel code (as perf and pprof name it).
pub const KERNEL_MAPPING: &str = "[kernel.kallsyms]";

/// A binary mapped into the profiled process: where its code was, which file, which build.
/// A native location's address lies in `[memory_start, memory_limit)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Mapping {
    pub memory_start: u64,
    pub memory_limit: u64,
    /// Offset in the file of `memory_start`.
    pub file_offset: u64,
    /// The file's path (`[vdso]`, `[kernel.kallsyms]` for pseudo-files).
    pub filename: StrId,
    /// The GNU build id in lowercase hex (empty when unknown).
    pub build_id: StrId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelValue {
    Str(StrId),
    Num { value: i64, unit: StrId },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    pub key: StrId,
    pub value: LabelValue,
}

/// The span a sample was taken in: OTLP `Link`, pprof labels `trace_id` / `span_id`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Link {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}

impl Link {
    /// Lowercase hex, as W3C trace context and Pyroscope's labels spell ids.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    pub fn span_id_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// Parses lowercase or uppercase hex ids; `None` for wrong lengths or non-hex digits.
    pub fn from_hex(trace_id: &str, span_id: &str) -> Option<Link> {
        Link::from_hex_bytes(trace_id.as_bytes(), span_id.as_bytes())
    }

    /// [`Link::from_hex`] of the bytes of the text (a column of ids read in bulk: no UTF-8
    /// check first, as a byte that is not a hex digit fails anyway).
    pub fn from_hex_bytes(trace_id: &[u8], span_id: &[u8]) -> Option<Link> {
        Some(Link {
            trace_id: unhex(trace_id)?,
            span_id: unhex(span_id)?,
        })
    }
}

/// Lowercase hex, the text form of trace and span ids (W3C Trace Context).
pub fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

fn unhex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        let (Some(&hi), Some(&lo)) = (pair.first(), pair.get(1)) else {
            return None;
        };
        let digit = |b: u8| HEX_DIGIT.get(b as usize).copied().unwrap_or(0xff);
        let (hi, lo) = (digit(hi), digit(lo));
        if (hi | lo) & 0xf0 != 0 {
            return None;
        }
        *o = (hi << 4) | lo;
    }
    Some(out)
}

/// The value of each byte as a hex digit, or `0xff` when it is none.
const HEX_DIGIT: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// The stack, leaf first ([`Profile::stack`]).
    pub stack: StackId,
    /// One value per entry of [`Profile::sample_types`].
    pub values: Vec<i64>,
    /// Sorted by key then value, so that equal label sets compare equal.
    pub labels: Vec<Label>,
    /// The span the sample was taken in, if any.
    pub link: Option<Link>,
    /// When the merged observations were taken (Unix nanoseconds), if recorded. OTLP carries
    /// them; pprof has no place for them.
    pub timestamps: Vec<i64>,
}

/// Stacks, leaf first, stored back to back: stack `i` is `frames[ends[i - 1]..ends[i]]`.
/// Stack 0 is the empty stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stacks {
    frames: Vec<LocationId>,
    ends: Vec<u32>,
}

impl Default for Stacks {
    fn default() -> Self {
        Stacks {
            frames: Vec::new(),
            ends: vec![0],
        }
    }
}

impl Stacks {
    /// Room for `stacks` more stacks of `frames` frames in all.
    pub fn with_capacity(stacks: usize, frames: usize) -> Stacks {
        let mut ends = Vec::with_capacity(stacks.saturating_add(1));
        ends.push(0);
        Stacks {
            frames: Vec::with_capacity(frames),
            ends,
        }
    }

    /// The stack behind `id`, leaf first; empty for an id out of range (decoded input is not
    /// trusted).
    pub fn get(&self, id: StackId) -> &[LocationId] {
        let i = id.0 as usize;
        let start = match i.checked_sub(1) {
            None => 0,
            Some(prev) => self.ends.get(prev).copied().unwrap_or(0) as usize,
        };
        let end = self.ends.get(i).copied().unwrap_or(0) as usize;
        self.frames.get(start..end).unwrap_or(&[])
    }

    /// Appends a stack; its id is the number of stacks before it. The empty stack 0 is there
    /// from the start, so the first pushed stack is `StackId(1)`.
    pub fn push(&mut self, frames: &[LocationId]) -> StackId {
        let id = StackId(u32::try_from(self.ends.len()).unwrap_or(u32::MAX));
        self.frames.extend_from_slice(frames);
        self.ends
            .push(u32::try_from(self.frames.len()).unwrap_or(u32::MAX));
        id
    }

    /// Replaces the empty stack 0 by `frames` (an OTLP request whose stack_table[0] is not the
    /// zero value); only valid while stack 0 is the only one.
    pub(crate) fn set_first(&mut self, frames: &[LocationId]) {
        if self.ends.len() == 1 {
            self.frames.clear();
            self.frames.extend_from_slice(frames);
            self.ends[0] = u32::try_from(self.frames.len()).unwrap_or(u32::MAX);
        }
    }

    /// Number of stacks, the empty one included.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Frames of all stacks together.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }
}

/// The tables samples refer to. One per pprof profile; one per OTLP request, shared by all of
/// its profiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dictionary {
    pub strings: Vec<String>,
    pub functions: Vec<Function>,
    pub locations: Vec<Location>,
    pub stacks: Stacks,
    pub mappings: Vec<Mapping>,
}

impl Default for Dictionary {
    fn default() -> Self {
        Dictionary {
            strings: vec![String::new()],
            functions: vec![Function::default()],
            locations: vec![Location::default()],
            stacks: Stacks::default(),
            mappings: vec![Mapping::default()],
        }
    }
}

impl Dictionary {
    /// The string behind `id`, or `""` for an id out of range.
    pub fn str(&self, id: StrId) -> &str {
        self.strings
            .get(id.0 as usize)
            .map(String::as_str)
            .unwrap_or("")
    }
}

/// One profile: a set of samples of the same types over one time window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Shared with the other profiles of the same OTLP request.
    pub dictionary: Arc<Dictionary>,
    pub sample_types: Vec<ValueType>,
    pub period_type: ValueType,
    pub period: i64,
    /// Start of the window, nanoseconds since the Unix epoch.
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub samples: Vec<Sample>,
    /// Free-form notes (pprof `comment`), e.g. the agent's drop counters.
    pub comments: Vec<StrId>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            dictionary: Arc::new(Dictionary::default()),
            sample_types: Vec::new(),
            period_type: ValueType::default(),
            period: 0,
            time_nanos: 0,
            duration_nanos: 0,
            samples: Vec::new(),
            comments: Vec::new(),
        }
    }
}

impl Profile {
    /// The string behind `id`, or `""` for an id out of range (decoded input is not trusted).
    pub fn str(&self, id: StrId) -> &str {
        self.dictionary.str(id)
    }

    pub fn strings(&self) -> &[String] {
        &self.dictionary.strings
    }

    pub fn functions(&self) -> &[Function] {
        &self.dictionary.functions
    }

    pub fn locations(&self) -> &[Location] {
        &self.dictionary.locations
    }

    pub fn mappings(&self) -> &[Mapping] {
        &self.dictionary.mappings
    }

    pub fn mapping(&self, id: MappingId) -> Option<&Mapping> {
        self.dictionary.mappings.get(id.0 as usize)
    }

    pub fn function(&self, id: FunctionId) -> Option<&Function> {
        self.dictionary.functions.get(id.0 as usize)
    }

    pub fn location(&self, id: LocationId) -> Option<&Location> {
        self.dictionary.locations.get(id.0 as usize)
    }

    /// The file a frame of `location` that runs `function` is in: the function's source file,
    /// or, for native and kernel code that has none, the base name of the binary the code is
    /// in (`libjvm.so`, `[kernel.kallsyms]`), which is what tells such frames apart from Java
    /// ones once only names and files are kept.
    pub fn frame_file(&self, location: &Location, function: Option<&Function>) -> &str {
        let file = function.map_or("", |f| self.str(f.filename));
        if !file.is_empty() || !matches!(location.kind, FrameKind::Native | FrameKind::Kernel) {
            return file;
        }
        let path = self
            .mapping(location.mapping)
            .map_or("", |m| self.str(m.filename));
        path.rsplit('/').next().unwrap_or(path)
    }

    /// A stack, leaf first (empty for an id out of range).
    pub fn stack(&self, id: StackId) -> &[LocationId] {
        self.dictionary.stacks.get(id)
    }

    /// Index of the sample type named `ty` (e.g. `"cpu"`).
    pub fn sample_type_index(&self, ty: &str) -> Option<usize> {
        self.sample_types
            .iter()
            .position(|vt| self.str(vt.ty) == ty)
    }

    /// The string value of label `key` on `sample`, if any.
    pub fn label_str<'a>(&'a self, sample: &Sample, key: &str) -> Option<&'a str> {
        sample.labels.iter().find_map(|l| match l.value {
            LabelValue::Str(v) if self.str(l.key) == key => Some(self.str(v)),
            _ => None,
        })
    }

    /// Names of the functions of a location, innermost first.
    pub fn location_function_names(&self, id: LocationId) -> impl Iterator<Item = &str> {
        self.location(id)
            .into_iter()
            .flat_map(|l| l.lines.iter())
            .map(|line| {
                self.function(line.function)
                    .map(|f| self.str(f.name))
                    .unwrap_or("")
            })
    }
}

/// Builds a [`Profile`], interning strings, functions and locations and merging samples that
/// have the same stack and labels (their values are added).
#[derive(Debug)]
pub struct ProfileBuilder {
    profile: Profile,
    dictionary: Dictionary,
    strings: HashMap<String, StrId>,
    functions: HashMap<Function, FunctionId>,
    locations: HashMap<Location, LocationId>,
    mappings: HashMap<Mapping, MappingId>,
    stacks: HashMap<Vec<LocationId>, StackId>,
    samples: HashMap<SampleKey, usize>,
}

/// What makes two samples the same: stack, label set and link.
type SampleKey = (StackId, Vec<Label>, Option<Link>);

impl ProfileBuilder {
    /// `sample_types` and `period_type` are `(type, unit)` pairs.
    pub fn new(sample_types: &[(&str, &str)], period_type: (&str, &str), period: i64) -> Self {
        let mut b = ProfileBuilder {
            profile: Profile::default(),
            dictionary: Dictionary::default(),
            strings: HashMap::from([(String::new(), StrId(0))]),
            functions: HashMap::new(),
            locations: HashMap::new(),
            mappings: HashMap::new(),
            stacks: HashMap::from([(Vec::new(), StackId(0))]),
            samples: HashMap::new(),
        };
        let types: Vec<ValueType> = sample_types
            .iter()
            .map(|(ty, unit)| b.value_type(ty, unit))
            .collect();
        b.profile.sample_types = types;
        b.profile.period_type = b.value_type(period_type.0, period_type.1);
        b.profile.period = period;
        b
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> ValueType {
        ValueType {
            ty: self.intern(ty),
            unit: self.intern(unit),
        }
    }

    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = StrId(self.dictionary.strings.len() as u32);
        self.dictionary.strings.push(s.to_owned());
        self.strings.insert(s.to_owned(), id);
        id
    }

    pub fn function(&mut self, name: &str, filename: &str, start_line: i64) -> FunctionId {
        let name = self.intern(name);
        let f = Function {
            name,
            system_name: name,
            filename: self.intern(filename),
            start_line,
        };
        self.intern_function(f)
    }

    /// A function as given (its system name apart from its name), interned.
    pub(crate) fn intern_function(&mut self, f: Function) -> FunctionId {
        if let Some(&id) = self.functions.get(&f) {
            return id;
        }
        let id = FunctionId(self.dictionary.functions.len() as u32);
        self.dictionary.functions.push(f.clone());
        self.functions.insert(f, id);
        id
    }

    /// A single-line location: one frame of `function` at `line`.
    pub fn location(&mut self, function: FunctionId, line: i64, kind: FrameKind) -> LocationId {
        self.intern_location(Location {
            lines: Lines::from_buf([Line { function, line }]),
            kind,
            address: 0,
            mapping: MappingId(0),
        })
    }

    /// A location of machine code: `function` at run-time `address` in `mapping` (or
    /// `MappingId(0)`), no line.
    pub fn code_location(
        &mut self,
        function: FunctionId,
        kind: FrameKind,
        address: u64,
        mapping: MappingId,
    ) -> LocationId {
        self.intern_location(Location {
            lines: Lines::from_buf([Line { function, line: 0 }]),
            kind,
            address,
            mapping,
        })
    }

    /// A mapping, interned.
    pub fn mapping(
        &mut self,
        memory: std::ops::Range<u64>,
        file_offset: u64,
        filename: &str,
        build_id: &str,
    ) -> MappingId {
        let m = Mapping {
            memory_start: memory.start,
            memory_limit: memory.end,
            file_offset,
            filename: self.intern(filename),
            build_id: self.intern(build_id),
        };
        self.intern_mapping(m)
    }

    /// A mapping as given, interned.
    pub(crate) fn intern_mapping(&mut self, m: Mapping) -> MappingId {
        if let Some(&id) = self.mappings.get(&m) {
            return id;
        }
        let id = MappingId(u32::try_from(self.dictionary.mappings.len()).unwrap_or(u32::MAX));
        self.dictionary.mappings.push(m.clone());
        self.mappings.insert(m, id);
        id
    }

    /// A location as given (any number of lines, an address), interned.
    pub(crate) fn intern_location(&mut self, loc: Location) -> LocationId {
        if let Some(&id) = self.locations.get(&loc) {
            return id;
        }
        let id = LocationId(self.dictionary.locations.len() as u32);
        self.dictionary.locations.push(loc.clone());
        self.locations.insert(loc, id);
        id
    }

    /// The id of a stack (leaf first), interned.
    pub fn stack(&mut self, frames: &[LocationId]) -> StackId {
        if let Some(&id) = self.stacks.get(frames) {
            return id;
        }
        let id = self.dictionary.stacks.push(frames);
        self.stacks.insert(frames.to_vec(), id);
        id
    }

    /// Convenience for a string label.
    pub fn str_label(&mut self, key: &str, value: &str) -> Label {
        Label {
            key: self.intern(key),
            value: LabelValue::Str(self.intern(value)),
        }
    }

    /// Adds `values` to the sample with this stack (leaf first) and label set, creating it if
    /// needed. `values` must have one entry per sample type; missing entries count as 0 and
    /// extra ones are ignored.
    pub fn add_sample(&mut self, stack: &[LocationId], labels: &[Label], values: &[i64]) {
        self.add_linked_sample(stack, labels, None, values, &[]);
    }

    /// Like [`ProfileBuilder::add_sample`], with the span the sample was taken in and the
    /// times its observations were taken (Unix nanoseconds). Samples merge only when their
    /// links are equal too.
    pub fn add_linked_sample(
        &mut self,
        stack: &[LocationId],
        labels: &[Label],
        link: Option<Link>,
        values: &[i64],
        timestamps: &[i64],
    ) {
        let mut labels = labels.to_vec();
        labels.sort_unstable();
        labels.dedup();
        let stack = self.stack(stack);
        self.merge_sample(stack, labels, link, values, timestamps);
    }

    /// Adds `values` and `timestamps` to the sample of this stack, label set (sorted, each
    /// label once) and link, creating it if needed: where equal samples become one.
    pub(crate) fn merge_sample(
        &mut self,
        stack: StackId,
        labels: Vec<Label>,
        link: Option<Link>,
        values: &[i64],
        timestamps: &[i64],
    ) {
        let n = self.profile.sample_types.len();
        let key = (stack, labels, link);
        let index = match self.samples.get(&key) {
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
        let sample = &mut self.profile.samples[index];
        for (acc, v) in sample.values.iter_mut().zip(values) {
            *acc = acc.saturating_add(*v);
        }
        sample.timestamps.extend_from_slice(timestamps);
    }

    pub fn add_comment(&mut self, text: &str) {
        let id = self.intern(text);
        self.profile.comments.push(id);
    }

    pub fn sample_count(&self) -> usize {
        self.profile.samples.len()
    }

    /// The profile being built, for a decoder that sets its types and times itself (the
    /// reference OTLP decoder).
    #[cfg(any(test, feature = "reference-decoder"))]
    pub(crate) fn profile_mut(&mut self) -> &mut Profile {
        &mut self.profile
    }

    /// A copy of the profile so far, with its tables.
    #[cfg(any(test, feature = "reference-decoder"))]
    pub(crate) fn snapshot(&self) -> Profile {
        let mut p = self.profile.clone();
        p.dictionary = Arc::new(self.dictionary.clone());
        p
    }

    pub fn build(mut self, time_nanos: i64, duration_nanos: i64) -> Profile {
        self.profile.time_nanos = time_nanos;
        self.profile.duration_nanos = duration_nanos;
        self.profile.dictionary = Arc::new(self.dictionary);
        self.profile
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_start_with_zero_values_and_samples_merge() {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10,
        );
        let f = b.function("a.B.c", "B.java", 3);
        let leaf = b.location(f, 7, FrameKind::Jvm);
        let again = b.location(f, 7, FrameKind::Jvm);
        assert_eq!(leaf, again);
        let t1 = b.str_label("thread_name", "main");
        let t2 = b.str_label("thread_id", "42");
        b.add_sample(&[leaf], &[t1, t2], &[1, 10]);
        b.add_sample(&[leaf], &[t2, t1], &[2, 20]);
        b.add_sample(&[leaf], &[t1], &[1, 10]);
        let p = b.build(1_000, 2_000);
        assert_eq!(p.strings()[0], "");
        assert_eq!(p.functions()[0], Function::default());
        assert_eq!(p.locations()[0], Location::default());
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.stack(p.samples[0].stack), [leaf]);
        assert_eq!(
            p.stack(p.samples[0].stack).as_ptr(),
            p.stack(p.samples[1].stack).as_ptr()
        );
        assert_eq!(p.samples[0].values, vec![3, 30]);
        assert_eq!(p.label_str(&p.samples[0], "thread_name"), Some("main"));
        assert_eq!(p.sample_type_index("cpu"), Some(1));
        assert_eq!(p.str(StrId(999)), "");
    }

    #[test]
    fn native_locations_carry_addresses_and_interned_mappings() {
        let mut b = ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 10);
        let m = b.mapping(0x7000..0x9000, 0x1000, "/usr/lib/libjvm.so", "97da31b2");
        assert_eq!(
            b.mapping(0x7000..0x9000, 0x1000, "/usr/lib/libjvm.so", "97da31b2"),
            m
        );
        assert_eq!(m, MappingId(1));
        let f = b.function("StringTable::intern", "", 0);
        let l = b.code_location(f, FrameKind::Native, 0x7123, m);
        assert_eq!(b.code_location(f, FrameKind::Native, 0x7123, m), l);
        b.add_sample(&[l], &[], &[1]);
        let p = b.build(0, 1);
        assert_eq!(p.mappings()[0], Mapping::default());
        let mapping = p.mapping(m).unwrap();
        assert_eq!(
            (mapping.memory_start, mapping.memory_limit),
            (0x7000, 0x9000)
        );
        assert_eq!(p.str(mapping.filename), "/usr/lib/libjvm.so");
        assert_eq!(p.str(mapping.build_id), "97da31b2");
        let loc = p.location(l).unwrap();
        assert_eq!(
            (loc.address, loc.mapping, loc.kind),
            (0x7123, m, FrameKind::Native)
        );
    }

    #[test]
    fn links_split_samples_and_round_trip_hex() {
        let mut b = ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 10);
        let f = b.function("a.B.c", "B.java", 3);
        let l = b.location(f, 7, FrameKind::Jvm);
        let link = Link::from_hex("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331").unwrap();
        assert_eq!(link.trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(link.span_id_hex(), "b7ad6b7169203331");
        assert!(Link::from_hex("0af7", "b7ad6b7169203331").is_none());
        assert!(Link::from_hex("zzf7651916cd43dd8448eb211c80319c", "b7ad6b7169203331").is_none());
        // Upper case reads; an odd length, a sign or a multi-byte character does not.
        assert_eq!(
            Link::from_hex("0AF7651916CD43DD8448EB211C80319C", "B7AD6B7169203331"),
            Some(link)
        );
        assert!(Link::from_hex("0af7651916cd43dd8448eb211c80319c", "b7ad6b716920333").is_none());
        assert!(Link::from_hex("+af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331").is_none());
        assert!(
            Link::from_hex("\u{e9}f7651916cd43dd8448eb211c80319", "b7ad6b7169203331").is_none()
        );
        b.add_linked_sample(&[l], &[], Some(link), &[1], &[5]);
        b.add_linked_sample(&[l], &[], Some(link), &[1], &[6]);
        b.add_linked_sample(&[l], &[], None, &[1], &[]);
        let p = b.build(0, 1);
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.stack(StackId(0)), []);
        assert_eq!(p.stack(StackId(99)), []);
        assert_eq!(p.samples[0].values, vec![2]);
        assert_eq!(p.samples[0].timestamps, vec![5, 6]);
        assert_eq!(p.samples[1].link, None);
    }
}
