//! Merging the selected samples of many profiles (many periods, many JVMs) into one table of
//! stacks, keyed by frame names so that the same method from different processes is one frame.
//!
//! Pure: [`Merger::add`] takes a decoded profile and its resource; [`Merger::finish`] gives a
//! [`Merged`] table that `top`, flame graphs, drilldown and diff all read.
//!
//! Live-heap profiles are snapshots, each the whole live set at its time: adding them up over
//! time would count an object once per snapshot it was alive in. A merger of that type keeps,
//! per instance (`service.instance.id`, else `process.pid`; pprof files carry neither and
//! count as one instance), only the latest snapshot the selection reaches (its `--from/--to`
//! choose which), and sums those across instances ([`Snapshots`]).

use std::collections::HashMap;

// The merge's own keys (frame names and ids from local files) need no flood resistance, and
// SipHash cost a third of the merge: rustc's FxHash instead.
use rustc_hash::FxHashMap as FxMap;

use std::sync::{Arc, Weak};

use otel_bridge::model::{Dictionary, FunctionId, Link, Profile, Sample, StackId};
use otelprof_primitives::thread_role;

use crate::focus::FrameVerdict;
use crate::select::{
    resource_value, sample_value, Measure, ProfileType, ProfileVerdict, SampleText, Selector,
};

/// Name used for a group when the grouping key is missing (a sample of a thread that is not
/// walked is grouped under its role frame instead, e.g. `[GC]`).
pub const NO_GROUP: &str = "<none>";
/// Frame name for a location or function that cannot be resolved.
pub const UNKNOWN_FRAME: &str = "<unknown>";

/// The comment a rollup profile carries ([`crate::columnar`]), followed by how many stored
/// profiles it adds up and how many of those had samples: what it counts for in
/// `profiles_seen` and `profiles_used`.
pub const STANDS_FOR: &str = "otelprof.profiles=";

/// How many stored profiles `profile` stands for, and how many of them had samples: (1, 1),
/// or what its [`STANDS_FOR`] comment says.
fn stands_for(profile: &Profile) -> (usize, usize) {
    profile
        .comments
        .iter()
        .find_map(|c| {
            let (all, with_samples) = profile.str(*c).strip_prefix(STANDS_FOR)?.split_once(' ')?;
            Some((all.parse().ok()?, with_samples.parse().ok()?))
        })
        .unwrap_or((1, 1))
}

/// The smallest window holding both.
fn union(a: Option<(i64, i64)>, b: Option<(i64, i64)>) -> Option<(i64, i64)> {
    match (a, b) {
        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
        (a, b) => a.or(b),
    }
}

/// The instance a resource is of: `service.instance.id`, else `process.pid`.
fn instance_of(resource: &[opentelemetry::KeyValue]) -> Option<String> {
    resource_value(resource, "service.instance.id")
        .or_else(|| resource_value(resource, "process.pid"))
}

/// The role frame (`[GC]`, `[JIT compiler]`, …) of a sample of one of the JVM's own threads:
/// the stack's root, alone or with the thread's native frames above it.
pub(crate) fn role_of(profile: &Profile, stack: StackId) -> Option<&str> {
    let location = profile.stack(stack).last()?;
    let location = profile.locations().get(location.0 as usize)?;
    let [line] = location.lines.as_slice() else {
        return None;
    };
    let name = profile.str(profile.function(line.function)?.name);
    thread_role::is_role_frame(name).then_some(name)
}

/// One merged stack of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct MergedStack {
    pub group: u32,
    /// Frame ids, root first.
    pub frames: Vec<u32>,
    /// Sum of the selected value (e.g. CPU nanoseconds).
    pub value: f64,
    /// Observations behind it (samples, objects, contentions): what significance is judged on.
    pub count: f64,
}

/// What the samples of one span (a sample link) add up to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpanStats {
    pub value: f64,
    pub count: f64,
    /// Endpoints (`span_name`) its samples carried.
    pub endpoints: Vec<String>,
    /// Earliest and latest sample timestamp (Unix ns), when the samples had timestamps.
    pub first: Option<i64>,
    pub last: Option<i64>,
    /// Earliest start and latest end of the profiles its samples are in.
    pub window: Option<(i64, i64)>,
    pub local_root_span_id: Option<String>,
}

/// The result of merging.
#[derive(Clone, Debug, Default)]
pub struct Merged {
    pub sample_type: String,
    pub unit: String,
    /// Frame names: `pkg.Class.method`, or with [`Merger::lines`] `pkg.Class.method
    /// (File.java:123)`.
    pub frames: Vec<String>,
    /// The source file of each frame (`""` when unknown), the first one seen.
    pub files: Vec<String>,
    /// Whether frames are lines ([`Merger::lines`]).
    pub lines: bool,
    pub groups: Vec<String>,
    /// The key the stacks are grouped by (`Merger::new`'s `group_by`), if any.
    pub group_key: Option<String>,
    pub stacks: Vec<MergedStack>,
    /// Profiles with at least one selected sample, and all profiles of the type looked at.
    pub profiles_used: usize,
    pub profiles_seen: usize,
    /// Profiles left out for being of another type.
    pub other_type: usize,
    /// Earliest start and latest end of the profiles that contributed.
    pub window: Option<(i64, i64)>,
    /// For a snapshot type ([`ProfileType::is_snapshot`]): the earliest start and latest end
    /// of every snapshot the selection reached, the earlier ones not kept included (the
    /// range a timeline of them covers).
    pub snapshots_window: Option<(i64, i64)>,
    /// Per span, when [`Merger::collect_spans`] was asked for.
    pub spans: FxMap<Link, SpanStats>,
    /// Distinct values of `service.instance.id` (or pid) that contributed: how many JVMs.
    pub instances: Vec<String>,
}

impl Merged {
    pub fn total(&self) -> f64 {
        self.stacks.iter().map(|s| s.value).sum()
    }

    pub fn total_count(&self) -> f64 {
        self.stacks.iter().map(|s| s.count).sum()
    }

    pub fn frame(&self, id: u32) -> &str {
        self.frames
            .get(id as usize)
            .map_or(UNKNOWN_FRAME, String::as_str)
    }

    /// The source file of frame `id`, `""` when unknown.
    pub fn file(&self, id: u32) -> &str {
        self.files.get(id as usize).map_or("", String::as_str)
    }

    /// A frame as people read it: `pkg.Class.method (File.java)`, or its line when merging by
    /// lines (the name then holds it already).
    pub fn frame_label(&self, id: u32) -> std::borrow::Cow<'_, str> {
        match self.file(id) {
            "" => self.frame(id).into(),
            _ if self.lines => self.frame(id).into(),
            file => format!("{} ({file})", self.frame(id)).into(),
        }
    }

    pub fn group(&self, id: u32) -> &str {
        self.groups
            .get(id as usize)
            .map_or(NO_GROUP, String::as_str)
    }
}

/// Whether `sample`'s stack in `profile` is kept by `focus`, as [`crate::focus::Focus::keep`]
/// decides for merged stacks: for answers that add samples up without merging their stacks
/// (the list of traces).
pub fn focus_keeps_sample(focus: &crate::focus::Focus, profile: &Profile, sample: &Sample) -> bool {
    if focus.is_empty() {
        return true;
    }
    let (mut included, mut visible) = (focus.include.is_empty(), false);
    for &loc in profile.stack(sample.stack) {
        let Some(location) = profile.location(loc) else {
            continue;
        };
        let names = location.lines.iter().map(|line| {
            profile
                .function(line.function)
                .map(|f| profile.str(f.name))
                .filter(|n| !n.is_empty())
                .unwrap_or(UNKNOWN_FRAME)
        });
        let address = (location.lines.is_empty()).then(|| match location.address {
            0 => UNKNOWN_FRAME.to_owned(),
            a => format!("{a:#x}"),
        });
        for name in names.chain(address.as_deref()) {
            let v = focus.frame(name);
            if v.excluded {
                return false;
            }
            included |= v.included;
            visible |= !v.hidden;
        }
    }
    included && visible
}

/// Accumulates selected samples; see the module docs.
pub struct Merger {
    ty: ProfileType,
    measure: Measure,
    selector: Selector,
    group_by: Option<String>,
    collect_spans: bool,
    merged: Merged,
    frame_index: FxMap<String, u32>,
    /// What the selector's focus says of each frame, by frame id (filled as frames come).
    verdicts: Vec<FrameVerdict>,
    group_index: FxMap<String, u32>,
    /// Merged stack by `[group, frames…]`, so that a lookup can borrow a scratch slice.
    stack_index: FxMap<Vec<u32>, usize>,
    key: Vec<u32>,
    instance_index: HashMap<String, ()>,
    cache: DictionaryCache,
    /// For a snapshot type ([`ProfileType::is_snapshot`]): the latest snapshot per instance,
    /// each merged alone; `None` otherwise and inside those per-snapshot mergers.
    snapshots: Option<Snapshots>,
}

/// The latest snapshot of each instance: its time and the merge of its samples. Profiles of
/// one snapshot share its time (an OTLP request sends one per sample type).
type Snapshots = FxMap<String, (i64, Merger)>;

/// What the merger has resolved of the dictionary it met last. The profiles of one OTLP
/// request share one dictionary, and the samples of a profile share stacks: each function and
/// location is resolved once per dictionary, and each stack once per dictionary and group, so the work of a request follows its
/// size, not profiles × dictionary or samples × stack depth.
#[derive(Default)]
struct DictionaryCache {
    /// Which dictionary this is. Weak: the dictionary's tables are freed with its last
    /// profile, while its allocation (and so its address) stays taken, so a new dictionary
    /// can never be mistaken for it.
    dictionary: Option<Weak<Dictionary>>,
    /// Frame id per function; `u32::MAX` until resolved.
    function_frames: Vec<u32>,
    /// Per location, its frame id when it has one line (nearly all do), [`UNRESOLVED`] until
    /// resolved, [`MANY`] when its frames are a range in `location_ranges`.
    location_frames: Vec<u32>,
    /// `(start, len)` in `location_flat` of the frames (innermost first) of locations with
    /// other than one line, by location.
    location_ranges: FxMap<u32, (u32, u32)>,
    location_flat: Vec<u32>,
    /// The merged stack each (stack, group) of this dictionary went to.
    merged: FxMap<(u32, u32), usize>,
}

impl DictionaryCache {
    /// Makes this the cache of `profile`'s dictionary, starting over if it is another one.
    fn enter(&mut self, profile: &Profile) {
        if let Some(d) = &self.dictionary {
            if std::ptr::eq(d.as_ptr(), Arc::as_ptr(&profile.dictionary)) {
                return;
            }
        }
        let d = &profile.dictionary;
        *self = DictionaryCache {
            dictionary: Some(Arc::downgrade(d)),
            function_frames: vec![u32::MAX; d.functions.len()],
            location_frames: vec![UNRESOLVED; d.locations.len()],
            location_ranges: FxMap::default(),
            location_flat: Vec::new(),
            merged: FxMap::default(),
        };
    }
}

/// A stack the selector's focus drops ([`Merger::merged_stack`]).
const DROPPED: usize = usize::MAX;

/// A location not resolved yet ([`DictionaryCache::location_frames`]).
const UNRESOLVED: u32 = u32::MAX;
/// A location of other than one line.
const MANY: u32 = u32::MAX - 1;

impl Merger {
    /// Keeps samples of type `ty` that `selector` selects; `group_by` names a resource or
    /// sample key to break the stacks down by.
    pub fn new(ty: ProfileType, selector: Selector, group_by: Option<&str>) -> Merger {
        Merger {
            ty,
            measure: Measure::Amount,
            selector,
            group_by: group_by.map(str::to_owned),
            collect_spans: false,
            merged: Merged {
                group_key: group_by.map(str::to_owned),
                ..Merged::default()
            },
            frame_index: FxMap::default(),
            verdicts: Vec::new(),
            group_index: FxMap::default(),
            stack_index: FxMap::default(),
            key: Vec::new(),
            instance_index: HashMap::new(),
            cache: DictionaryCache::default(),
            snapshots: ty.is_snapshot().then(FxMap::default),
        }
    }

    /// A merger like this one (type, selection, grouping, measure, lines, spans) for one
    /// snapshot.
    fn for_one_snapshot(&self) -> Merger {
        let mut m = Merger::new(self.ty, self.selector.clone(), self.group_by.as_deref())
            .measure(self.measure)
            .lines(self.merged.lines);
        m.collect_spans = self.collect_spans;
        m.snapshots = None;
        m
    }

    /// [`Merger::add`] for a snapshot type: `profile` replaces its instance's snapshot if it
    /// is later, joins it if of the same time, and is only counted as seen if earlier.
    fn add_snapshot(&mut self, resource: &[opentelemetry::KeyValue], profile: &Profile) -> bool {
        if !matches!(
            self.selector.profile_verdict(resource, profile),
            ProfileVerdict::Included { .. }
        ) {
            return false;
        }
        let instance = instance_of(resource).unwrap_or_default();
        let time = profile.time_nanos;
        let end = time.saturating_add(profile.duration_nanos.max(0));
        self.merged.snapshots_window = union(self.merged.snapshots_window, Some((time, end)));
        let held = self
            .snapshots
            .as_ref()
            .and_then(|s| s.get(&instance))
            .map(|(at, _)| *at);
        if held.is_some_and(|at| time < at) {
            return false;
        }
        if held != Some(time) {
            let fresh = self.for_one_snapshot();
            if let Some(s) = self.snapshots.as_mut() {
                s.insert(instance.clone(), (time, fresh));
            }
        }
        let Some((_, merger)) = self.snapshots.as_mut().and_then(|s| s.get_mut(&instance)) else {
            return false;
        };
        merger.add(resource, profile)
    }

    /// Also gather [`SpanStats`] per sample link.
    pub fn collect_spans(mut self) -> Merger {
        self.collect_spans = true;
        self
    }

    /// Profiles of the type looked at so far ([`Merged::profiles_seen`]).
    pub fn profiles_seen(&self) -> usize {
        self.merged.profiles_seen
    }

    /// The per-span statistics gathered so far, taken out (the merger goes on without them).
    pub fn take_spans(&mut self) -> FxMap<Link, SpanStats> {
        std::mem::take(&mut self.merged.spans)
    }

    /// Adds up `measure` of the profile type (time, bytes, delay; or their counts).
    pub fn measure(mut self, measure: Measure) -> Merger {
        self.measure = measure;
        self
    }

    /// Frames are source lines, `pkg.Class.method (File.java:123)`, not functions (pprof's
    /// granularity of the same name).
    pub fn lines(mut self, lines: bool) -> Merger {
        self.merged.lines = lines;
        self
    }

    fn intern_frame(&mut self, name: &str) -> u32 {
        self.intern_frame_in(name, "")
    }

    /// The frame id of `name`, remembering `file` as its source file if none is known yet.
    fn intern_frame_in(&mut self, name: &str, file: &str) -> u32 {
        if let Some(&i) = self.frame_index.get(name) {
            if !file.is_empty() {
                if let Some(f) = self
                    .merged
                    .files
                    .get_mut(i as usize)
                    .filter(|f| f.is_empty())
                {
                    *f = file.to_owned();
                }
            }
            return i;
        }
        let i = u32::try_from(self.merged.frames.len()).unwrap_or(u32::MAX);
        self.merged.frames.push(name.to_owned());
        self.merged.files.push(file.to_owned());
        self.frame_index.insert(name.to_owned(), i);
        i
    }

    fn intern_group(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.group_index.get(name) {
            return i;
        }
        let i = u32::try_from(self.merged.groups.len()).unwrap_or(u32::MAX);
        self.merged.groups.push(name.to_owned());
        self.group_index.insert(name.to_owned(), i);
        i
    }

    /// Adds the selected samples of `profile`. Returns whether any was selected.
    pub fn add(&mut self, resource: &[opentelemetry::KeyValue], profile: &Profile) -> bool {
        self.add_part(resource, profile, 1.0)
    }

    /// [`Merger::add`] of the part `part` (0 to 1) of `profile`'s time that the merger's
    /// window holds: its samples without timestamps count that part of their values, as if
    /// spread evenly over the profile (a timeline bucket a profile straddles takes its share,
    /// not the whole); samples with timestamps count those inside the window, as in `add`.
    /// Snapshots are instants, never parted.
    pub fn add_part(
        &mut self,
        resource: &[opentelemetry::KeyValue],
        profile: &Profile,
        part: f64,
    ) -> bool {
        let Some(vi) = self.ty.value_index(profile, self.measure) else {
            self.merged.other_type += 1;
            return false;
        };
        self.merged.profiles_seen += stands_for(profile).0;
        if self.snapshots.is_some() {
            return self.add_snapshot(resource, profile);
        }
        if self.merged.unit.is_empty() {
            if let Some(vt) = profile.sample_types.get(vi.value) {
                self.merged.sample_type = profile.str(vt.ty).to_owned();
                self.merged.unit = profile.str(vt.unit).to_owned();
            }
        }
        let ProfileVerdict::Included { sample_conditions } =
            self.selector.profile_verdict(resource, profile)
        else {
            return false;
        };
        let fixed_group = self.profile_group(resource);

        let mut cache = std::mem::take(&mut self.cache);
        cache.enter(profile);
        let mut used = false;
        let window = (
            profile.time_nanos,
            profile
                .time_nanos
                .saturating_add(profile.duration_nanos.max(0)),
        );
        for sample in &profile.samples {
            let mut share = self
                .selector
                .sample_share(profile, sample, &sample_conditions);
            if sample.timestamps.is_empty() {
                share *= part;
            }
            if share <= 0.0 {
                continue;
            }
            let value = sample.values.get(vi.value).copied().unwrap_or(0) as f64 * share;
            let count = match vi.count {
                Some(c) => sample.values.get(c).copied().unwrap_or(0) as f64 * share,
                None => 1.0,
            };
            if value == 0.0 && count == 0.0 {
                continue;
            }
            let group = match fixed_group {
                Some(group) => group,
                None => self.sample_group(profile, sample),
            };
            let merged = self.merged_stack(&mut cache, profile, sample.stack, group);
            if merged == DROPPED {
                continue;
            }
            used = true;
            if let Some(s) = self.merged.stacks.get_mut(merged) {
                s.value += value;
                s.count += count;
            }
            if self.collect_spans {
                if let Some(link) = sample.link {
                    self.add_to_span(link, profile, sample, (value, count), window);
                }
            }
        }
        self.cache = cache;
        if used {
            self.note_used(resource, profile, window);
        }
        used
    }

    /// The group every sample of a profile with `resource` goes to: none when the key the
    /// merger groups by is not a resource attribute (each sample's own labels decide:
    /// [`Merger::sample_group`]).
    fn profile_group(&mut self, resource: &[opentelemetry::KeyValue]) -> Option<u32> {
        let resource_group = self
            .group_by
            .as_deref()
            .and_then(|k| resource_value(resource, k));
        let fixed_group = match (&self.group_by, &resource_group) {
            (None, _) => Some(0),
            (Some(_), Some(g)) => Some(self.intern_group(g)),
            (Some(_), None) => None,
        };
        if self.group_by.is_none() && self.merged.groups.is_empty() {
            self.merged.groups.push(String::new());
        }
        fixed_group
    }

    /// The group of `sample` by its own label of the key the merger groups by.
    fn sample_group(&mut self, profile: &Profile, sample: &Sample) -> u32 {
        let name = self
            .group_by
            .as_deref()
            .and_then(|k| sample_value(profile, sample, k))
            .map(SampleText::to_text);
        match name {
            Some(name) => self.intern_group(&name),
            // A GC, JIT compiler or VM thread's CPU has no span (nor any other
            // label it lacks) because it runs no request code: it is grouped under
            // its role, not with Java code outside any span.
            None => self.intern_group(role_of(profile, sample.stack).unwrap_or(NO_GROUP)),
        }
    }

    /// Adds `sample`'s share (`value`, `count`) to the statistics of the span it links to;
    /// `window` is its profile's.
    fn add_to_span(
        &mut self,
        link: Link,
        profile: &Profile,
        sample: &Sample,
        (value, count): (f64, f64),
        window: (i64, i64),
    ) {
        let stats = self.merged.spans.entry(link).or_default();
        stats.value += value;
        stats.count += count;
        if let Some(SampleText::Str(ep)) = sample_value(profile, sample, "span_name") {
            if !stats.endpoints.iter().any(|e| e == ep) {
                stats.endpoints.push(ep.to_owned());
            }
        }
        if let Some(root) = sample_value(profile, sample, "local_root_span_id") {
            stats.local_root_span_id = Some(root.to_text());
        }
        for &t in &sample.timestamps {
            stats.first = Some(stats.first.map_or(t, |f| f.min(t)));
            stats.last = Some(stats.last.map_or(t, |l| l.max(t)));
        }
        stats.window = Some(match stats.window {
            Some((a, b)) => (a.min(window.0), b.max(window.1)),
            None => window,
        });
    }

    /// Counts `profile`, some of whose samples were selected: its profiles, its `window`, its
    /// instance.
    fn note_used(
        &mut self,
        resource: &[opentelemetry::KeyValue],
        profile: &Profile,
        window: (i64, i64),
    ) {
        self.merged.profiles_used += stands_for(profile).1;
        self.merged.window = Some(match self.merged.window {
            Some((a, b)) => (a.min(window.0), b.max(window.1)),
            None => window,
        });
        if let Some(instance) = instance_of(resource) {
            if self.instance_index.insert(instance.clone(), ()).is_none() {
                self.merged.instances.push(instance);
            }
        }
    }

    /// The merged stack that `stack` (of `profile`'s dictionary) goes to in `group`, made at
    /// zero if new; resolved once per dictionary.
    fn merged_stack(
        &mut self,
        cache: &mut DictionaryCache,
        profile: &Profile,
        stack: StackId,
        group: u32,
    ) -> usize {
        if let Some(&i) = cache.merged.get(&(stack.0, group)) {
            return i;
        }
        // The merged stack's key, `[group, frames root first…]`, made in place.
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push(group);
        for &loc in profile.stack(stack).iter().rev() {
            let frame = match cache.location_frames.get(loc.0 as usize) {
                Some(&f) if f < MANY => f,
                _ => self.location_frame(cache, profile, loc.0),
            };
            if frame != MANY {
                key.push(frame);
                continue;
            }
            let (from, n) = cache.location_ranges.get(&loc.0).copied().unwrap_or((0, 0));
            let lines = from as usize..from as usize + n as usize;
            // Lines are innermost first; root-first order wants them reversed.
            if let Some(frames) = cache.location_flat.get(lines) {
                key.extend(frames.iter().rev());
            }
        }
        let i = if self.selector.focus.is_empty() || self.focused(&mut key) {
            self.index_of_key(&key)
        } else {
            DROPPED
        };
        self.key = key;
        cache.merged.insert((stack.0, group), i);
        i
    }

    /// Applies the selector's focus to a merged stack's key (`[group, frames…]`): false when
    /// the stack is dropped, else its hidden frames are gone from the key.
    fn focused(&mut self, key: &mut Vec<u32>) -> bool {
        let focus = &self.selector.focus;
        for name in self.merged.frames.iter().skip(self.verdicts.len()) {
            self.verdicts.push(focus.frame(name));
        }
        let mut frames = key.split_off(1.min(key.len()));
        let verdicts = &self.verdicts;
        let kept = focus.keep(&mut frames, |f| {
            verdicts.get(f as usize).copied().unwrap_or_default()
        });
        key.extend(frames);
        kept
    }

    /// Resolves location `index`: its frame id if it has one line, else [`MANY`] with its
    /// frames (innermost first) put in `cache.location_ranges`.
    fn location_frame(
        &mut self,
        cache: &mut DictionaryCache,
        profile: &Profile,
        index: u32,
    ) -> u32 {
        let location = profile.locations().get(index as usize);
        let frame = match location.map(|l| l.lines.as_slice()) {
            Some([line]) if self.merged.lines => self.line_frame(profile, location, line),
            Some([line]) => self.function_frame(cache, profile, location, line.function),
            _ => MANY,
        };
        // A frame id can never reach MANY: the frame table would need 4 billion names.
        let frame = if frame < MANY {
            frame
        } else {
            let start = u32::try_from(cache.location_flat.len()).unwrap_or(u32::MAX);
            match location {
                None => {
                    let unknown = self.intern_frame(UNKNOWN_FRAME);
                    cache.location_flat.push(unknown);
                }
                Some(loc) if loc.lines.is_empty() => {
                    let name = if loc.address == 0 {
                        UNKNOWN_FRAME.to_owned()
                    } else {
                        format!("{:#x}", loc.address)
                    };
                    let id = self.intern_frame(&name);
                    cache.location_flat.push(id);
                }
                Some(loc) => {
                    for line in &loc.lines {
                        let id = if self.merged.lines {
                            self.line_frame(profile, Some(loc), line)
                        } else {
                            self.function_frame(cache, profile, Some(loc), line.function)
                        };
                        cache.location_flat.push(id);
                    }
                }
            }
            let end = u32::try_from(cache.location_flat.len()).unwrap_or(u32::MAX);
            cache.location_ranges.insert(index, (start, end - start));
            MANY
        };
        if let Some(x) = cache.location_frames.get_mut(index as usize) {
            *x = frame;
        }
        frame
    }

    /// The frame id of `function`, memoized per dictionary.
    fn function_frame(
        &mut self,
        cache: &mut DictionaryCache,
        profile: &Profile,
        location: Option<&otel_bridge::Location>,
        function: FunctionId,
    ) -> u32 {
        let slot = function.0 as usize;
        if let Some(&id) = cache
            .function_frames
            .get(slot)
            .filter(|id| **id != u32::MAX)
        {
            return id;
        }
        let f = profile.function(function);
        let name = f
            .map(|f| profile.str(f.name))
            .filter(|n| !n.is_empty())
            .unwrap_or(UNKNOWN_FRAME);
        let file = location.map_or("", |l| profile.frame_file(l, f));
        let id = self.intern_frame_in(name, file);
        if let Some(x) = cache.function_frames.get_mut(slot) {
            *x = id;
        }
        id
    }

    /// The frame of one source line: `pkg.Class.method (File.java:123)`; resolved once per
    /// location, which holds it.
    fn line_frame(
        &mut self,
        profile: &Profile,
        location: Option<&otel_bridge::Location>,
        line: &otel_bridge::Line,
    ) -> u32 {
        let f = profile.function(line.function);
        let name = f
            .map(|f| profile.str(f.name))
            .filter(|n| !n.is_empty())
            .unwrap_or(UNKNOWN_FRAME);
        let file = location.map_or("", |l| profile.frame_file(l, f));
        let label = match (file, line.line) {
            ("", 0) => name.to_owned(),
            ("", n) => format!("{name} (line {n})"),
            (file, 0) => format!("{name} ({file})"),
            (file, n) => format!("{name} ({file}:{n})"),
        };
        self.intern_frame_in(&label, file)
    }

    pub fn finish(mut self) -> Merged {
        let Some(snapshots) = self.snapshots.take() else {
            return self.merged;
        };
        // The latest snapshots, summed across instances (in a fixed order, so that frame and
        // stack ids do not depend on the hash map's).
        let mut latest: Vec<(String, (i64, Merger))> = snapshots.into_iter().collect();
        latest.sort_by(|a, b| a.0.cmp(&b.0));
        let mut sum = self.for_one_snapshot();
        for (_, (_, m)) in latest {
            sum.absorb(m);
        }
        let mut merged = sum.merged;
        merged.snapshots_window = self.merged.snapshots_window;
        merged.profiles_seen = self.merged.profiles_seen;
        merged.other_type += self.merged.other_type;
        merged
    }

    /// The index of the merged stack of `frames` (root first) in `group`, made at zero if new.
    fn merged_index(&mut self, group: u32, frames: &[u32]) -> usize {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push(group);
        key.extend_from_slice(frames);
        let index = self.index_of_key(&key);
        self.key = key;
        index
    }

    /// The index of the merged stack whose key is `[group, frames…]`, made at zero if new.
    fn index_of_key(&mut self, key: &[u32]) -> usize {
        if let Some(&i) = self.stack_index.get(key) {
            return i;
        }
        let (group, frames) = key.split_first().unwrap_or((&0, &[]));
        let i = self.merged.stacks.len();
        self.merged.stacks.push(MergedStack {
            group: *group,
            frames: frames.to_vec(),
            value: 0.0,
            count: 0.0,
        });
        self.stack_index.insert(key.to_vec(), i);
        i
    }

    /// Adds `value` and `count` to the merged stack of `frames` (root first) in `group`.
    fn accumulate(&mut self, group: u32, frames: &[u32], value: f64, count: f64) {
        let index = self.merged_index(group, frames);
        if let Some(s) = self.merged.stacks.get_mut(index) {
            s.value += value;
            s.count += count;
        }
    }

    /// Whether nothing was added yet: no profile looked at, nothing merged.
    fn holds_nothing(&self) -> bool {
        let m = &self.merged;
        m.stacks.is_empty()
            && m.frames.is_empty()
            && m.groups.is_empty()
            && m.unit.is_empty()
            && m.profiles_seen == 0
            && m.profiles_used == 0
            && m.other_type == 0
            && m.window.is_none()
            && m.spans.is_empty()
            && m.instances.is_empty()
    }

    /// Adds what another merger (of the same type and selection, e.g. on another thread)
    /// collected.
    pub fn absorb(&mut self, mut other: Merger) {
        // Frame ids change below; verdicts are found again as needed.
        self.verdicts.clear();
        if let (Some(mine), Some(theirs)) = (self.snapshots.as_mut(), other.snapshots.take()) {
            for (instance, (at, m)) in theirs {
                match mine.get_mut(&instance) {
                    Some((mine_at, mine_m)) if *mine_at == at => mine_m.absorb(m),
                    Some((mine_at, _)) if *mine_at > at => {}
                    _ => {
                        mine.insert(instance, (at, m));
                    }
                }
            }
            self.merged.profiles_seen += other.merged.profiles_seen;
            self.merged.other_type += other.merged.other_type;
            self.merged.snapshots_window =
                union(self.merged.snapshots_window, other.merged.snapshots_window);
            return;
        }
        if self.holds_nothing() {
            // Nothing to add to (a worker's first, a slice's empty half): take the other's
            // tables whole instead of interning each frame and stack again.
            self.merged = other.merged;
            self.frame_index = other.frame_index;
            self.group_index = other.group_index;
            self.stack_index = other.stack_index;
            self.instance_index = other.instance_index;
            self.cache = DictionaryCache::default();
            return;
        }
        let o = other.merged;
        if self.merged.unit.is_empty() {
            self.merged.sample_type = o.sample_type.clone();
            self.merged.unit = o.unit.clone();
        }
        if self.group_by.is_none() && self.merged.groups.is_empty() && !o.groups.is_empty() {
            self.merged.groups.push(String::new());
        }
        let frames: Vec<u32> = o
            .frames
            .iter()
            .zip(
                o.files
                    .iter()
                    .map(String::as_str)
                    .chain(std::iter::repeat("")),
            )
            .map(|(f, file)| self.intern_frame_in(f, file))
            .collect();
        let groups: Vec<u32> = if self.group_by.is_none() {
            vec![0; o.groups.len()]
        } else {
            o.groups.iter().map(|g| self.intern_group(g)).collect()
        };
        for s in o.stacks {
            let group = groups.get(s.group as usize).copied().unwrap_or(0);
            let mapped: Vec<u32> = s
                .frames
                .iter()
                .map(|f| frames.get(*f as usize).copied().unwrap_or(0))
                .collect();
            self.accumulate(group, &mapped, s.value, s.count);
        }
        self.merged.profiles_used += o.profiles_used;
        self.merged.profiles_seen += o.profiles_seen;
        self.merged.other_type += o.other_type;
        self.merged.window = match (self.merged.window, o.window) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
        for (link, st) in o.spans {
            let t = self.merged.spans.entry(link).or_default();
            t.value += st.value;
            t.count += st.count;
            for e in st.endpoints {
                if !t.endpoints.contains(&e) {
                    t.endpoints.push(e);
                }
            }
            t.first = match (t.first, st.first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            t.last = match (t.last, st.last) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            t.window = match (t.window, st.window) {
                (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
                (a, b) => a.or(b),
            };
            if t.local_root_span_id.is_none() {
                t.local_root_span_id = st.local_root_span_id;
            }
        }
        for i in o.instances {
            if self.instance_index.insert(i.clone(), ()).is_none() {
                self.merged.instances.push(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::KeyValue;
    use otel_bridge::model::{FrameKind, ProfileBuilder};

    fn profile(endpoint: &str, leaf: &str, n: i64) -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10,
        );
        let main = b.function("app.Main.main", "Main.java", 1);
        let f = b.function(leaf, "X.java", 1);
        let lm = b.location(main, 1, FrameKind::Jvm);
        let lf = b.location(f, 2, FrameKind::Jvm);
        let ep = b.str_label("span_name", endpoint);
        let link = Link::from_hex("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
        b.add_linked_sample(&[lf, lm], &[ep], link, &[n, n * 10], &[5]);
        b.add_sample(&[lm], &[], &[1, 10]);
        b.build(0, 100)
    }

    /// A live-heap snapshot at `time`: `bytes` held by `site`, 512 B objects.
    fn snapshot(time: i64, site: &str, bytes: i64) -> Profile {
        let mut b = ProfileBuilder::new(
            &[("inuse_objects", "count"), ("inuse_space", "bytes")],
            ("memory", "bytes"),
            512 * 1024,
        );
        let f = b.function(site, "S.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        b.add_sample(&[l], &[], &[bytes / 512, bytes]);
        b.build(time, 0)
    }

    #[test]
    fn snapshots_are_the_latest_per_instance_summed_across_instances() {
        let a = vec![KeyValue::new("service.instance.id", "a")];
        let b = vec![KeyValue::new("service.instance.id", "b")];
        let feed = |m: &mut Merger, order: &[usize]| {
            let all = [
                (&a, snapshot(10, "app.A.grow", 1_000)),
                (&a, snapshot(20, "app.A.grow", 2_000)),
                (&a, snapshot(30, "app.A.grow", 3_000)),
                (&b, snapshot(15, "app.B.hold", 500)),
                (&b, snapshot(25, "app.B.hold", 700)),
            ];
            for &i in order {
                m.add(all[i].0, &all[i].1);
            }
        };
        let live = || Merger::new(ProfileType::Live, Selector::default(), None);
        // Any order, and split across workers: a's at 30 and b's at 25.
        for order in [[0, 1, 2, 3, 4], [4, 2, 0, 3, 1]] {
            let mut m = live();
            feed(&mut m, &order);
            let merged = m.finish();
            assert_eq!(merged.total(), 3_700.0);
            assert_eq!(merged.total_count(), (3_000 / 512 + 700 / 512) as f64);
            assert_eq!(merged.profiles_seen, 5);
            assert_eq!(merged.window, Some((25, 30)));
            assert_eq!(merged.snapshots_window, Some((10, 30)));
        }
        let (mut one, mut two) = (live(), live());
        feed(&mut one, &[2, 3]);
        feed(&mut two, &[0, 1, 4]);
        one.absorb(two);
        assert_eq!(one.finish().total(), 3_700.0);
        // --to picks earlier snapshots: a's at 20, b's at 15.
        let before = Selector {
            to: Some(21),
            ..Selector::default()
        };
        let mut m = Merger::new(ProfileType::Live, before, None);
        feed(&mut m, &[0, 1, 2, 3, 4]);
        assert_eq!(m.finish().total(), 2_500.0);
        // Other types still add up over time.
        let mut alloc = Merger::new(ProfileType::Alloc, Selector::default(), None);
        let mut b = ProfileBuilder::new(
            &[("alloc_objects", "count"), ("alloc_space", "bytes")],
            ("memory", "bytes"),
            1,
        );
        let f = b.function("app.A.grow", "S.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        b.add_sample(&[l], &[], &[1, 100]);
        let p = b.build(10, 5);
        alloc.add(&a, &p);
        alloc.add(&a, &p);
        assert_eq!(alloc.finish().total(), 200.0);
    }

    #[test]
    fn profiles_from_many_jvms_merge_by_frame_name() {
        let r1 = vec![
            KeyValue::new("service.version", "1"),
            KeyValue::new("service.instance.id", "a"),
        ];
        let r2 = vec![
            KeyValue::new("service.version", "2"),
            KeyValue::new("service.instance.id", "b"),
        ];
        let mut m = Merger::new(ProfileType::Cpu, Selector::default(), None);
        assert!(m.add(&r1, &profile("GET /a", "app.X.x", 2)));
        assert!(m.add(&r2, &profile("GET /b", "app.X.x", 3)));
        let merged = m.finish();
        assert_eq!(merged.stacks.len(), 2);
        assert_eq!(merged.total(), 70.0);
        assert_eq!(merged.total_count(), 7.0);
        assert_eq!(merged.instances, ["a", "b"]);
        let s = &merged.stacks[0];
        let names: Vec<&str> = s.frames.iter().map(|&f| merged.frame(f)).collect();
        assert_eq!(names, ["app.Main.main", "app.X.x"]);
        assert_eq!((s.value, s.count), (50.0, 5.0));
    }

    #[test]
    fn multi_line_and_unsymbolized_locations_become_frames() {
        use otel_bridge::model::{Line, Lines, Location};
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 1);
        let main = b.function("app.Main.main", "Main.java", 1);
        let inner = b.function("app.X.inlined", "X.java", 1);
        let outer = b.function("app.X.caller", "X.java", 1);
        let lm = b.location(main, 1, FrameKind::Jvm);
        let lo = b.location(outer, 2, FrameKind::Jvm);
        let lr = b.location(main, 7, FrameKind::Native);
        b.add_sample(&[lo, lm], &[], &[3]);
        b.add_sample(&[lr, lo], &[], &[4]);
        let mut p = b.build(0, 1);
        // `lo` becomes one location holding `inner` inlined into `outer` (innermost first);
        // `lr` an address without symbols.
        let dictionary = std::sync::Arc::make_mut(&mut p.dictionary);
        dictionary.locations[lo.0 as usize].lines = Lines::from_vec(vec![
            Line {
                function: inner,
                line: 5,
            },
            Line {
                function: outer,
                line: 2,
            },
        ]);
        dictionary.locations[lr.0 as usize] = Location {
            lines: Lines::new(),
            kind: FrameKind::Native,
            address: 0x1234,
            mapping: Default::default(),
        };
        let mut m = Merger::new(ProfileType::Cpu, Selector::default(), None);
        assert!(m.add(&[], &p));
        let merged = m.finish();
        let mut stacks: Vec<(Vec<&str>, f64)> = merged
            .stacks
            .iter()
            .map(|s| (s.frames.iter().map(|&f| merged.frame(f)).collect(), s.value))
            .collect();
        stacks.sort_by(|a, b| a.1.total_cmp(&b.1));
        assert_eq!(
            stacks,
            [
                (vec!["app.Main.main", "app.X.caller", "app.X.inlined"], 3.0),
                (vec!["app.X.caller", "app.X.inlined", "0x1234"], 4.0),
            ]
        );
    }

    #[test]
    fn groups_come_from_resource_or_samples() {
        let r1 = vec![KeyValue::new("service.version", "1")];
        let mut by_version = Merger::new(
            ProfileType::Cpu,
            Selector::default(),
            Some("service.version"),
        );
        by_version.add(&r1, &profile("GET /a", "app.X.x", 2));
        by_version.add(&[], &profile("GET /a", "app.X.x", 2));
        let m = by_version.finish();
        assert_eq!(m.groups, ["1", NO_GROUP]);

        let mut by_endpoint =
            Merger::new(ProfileType::Cpu, Selector::default(), Some("span_name")).collect_spans();
        by_endpoint.add(&r1, &profile("GET /a", "app.X.x", 2));
        let m = by_endpoint.finish();
        assert_eq!(m.groups, ["GET /a", NO_GROUP]);
        let stats = m.spans.values().next().unwrap();
        assert_eq!(stats.endpoints, ["GET /a"]);
        assert_eq!(
            (stats.first, stats.last, stats.window),
            (Some(5), Some(5), Some((0, 100)))
        );
    }

    #[test]
    fn mergers_on_other_threads_combine() {
        let r = vec![KeyValue::new("service.instance.id", "a")];
        let mut one =
            Merger::new(ProfileType::Cpu, Selector::default(), Some("span_name")).collect_spans();
        one.add(&r, &profile("GET /a", "app.X.x", 2));
        one.add(&r, &profile("GET /b", "app.Y.y", 3));
        let mut a =
            Merger::new(ProfileType::Cpu, Selector::default(), Some("span_name")).collect_spans();
        let mut b =
            Merger::new(ProfileType::Cpu, Selector::default(), Some("span_name")).collect_spans();
        a.add(&r, &profile("GET /a", "app.X.x", 2));
        b.add(&r, &profile("GET /b", "app.Y.y", 3));
        b.absorb(a);
        let (one, two) = (one.finish(), b.finish());
        let canon = |m: &Merged| {
            let mut v: Vec<(String, Vec<String>, i64)> = m
                .stacks
                .iter()
                .map(|s| {
                    (
                        m.group(s.group).to_owned(),
                        s.frames.iter().map(|f| m.frame(*f).to_owned()).collect(),
                        s.value as i64,
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(canon(&one), canon(&two));
        assert_eq!((two.profiles_used, two.instances.len()), (2, 1));
        assert_eq!(
            two.spans.values().next().unwrap().value,
            one.spans.values().next().unwrap().value
        );
    }

    #[test]
    fn selectors_filter_and_other_types_are_counted() {
        let mut s = Selector::default();
        s.add_terms("span_name=GET /b", 0).unwrap();
        let mut m = Merger::new(ProfileType::Cpu, s, None);
        assert!(!m.add(&[], &profile("GET /a", "app.X.x", 2)));
        assert!(m.add(&[], &profile("GET /b", "app.X.x", 2)));
        let mut alloc =
            ProfileBuilder::new(&[("alloc_space", "bytes")], ("alloc_space", "bytes"), 1);
        let f = alloc.function("a", "", 0);
        let l = alloc.location(f, 0, FrameKind::Jvm);
        alloc.add_sample(&[l], &[], &[5]);
        assert!(!m.add(&[], &alloc.build(0, 1)));
        let merged = m.finish();
        assert_eq!(
            (
                merged.profiles_used,
                merged.profiles_seen,
                merged.other_type
            ),
            (1, 2, 1)
        );
        assert_eq!(merged.total(), 20.0);
    }
}
