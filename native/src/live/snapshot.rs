//! A live heap snapshot as a profile: the tracked objects that are alive and have outlived
//! a collection, grouped by allocation stack (the allocated class as its leaf frame, as in
//! the allocation profile), thread, span and endpoint, with the labels every otelprof
//! profile carries.

use std::collections::HashMap;

use jni::sys::JNIEnv;
use otel_bridge::{FrameKind, LocationId, Profile, ProfileBuilder};

use super::stacks::LiveStacks;
use super::table::LiveTable;
use super::{SpanKey, Survival};
use crate::context::endpoints::{span_id_hex, ENDPOINTS};
use crate::jvm::class_names::CLASSES;
use crate::jvm::jvmti::Jvmti;
use crate::kinds::SampleKind;
use crate::stats;
use crate::threads::thread_registry;

/// Names the threads and endpoints of the entries that have none yet. A thread is named at
/// the first snapshot after its object was sampled (the registry still holds it: ended
/// threads leave it only after a profile is written), an endpoint as soon as it is known
/// (the local root span reports it when it ends; the registry forgets it a period or two
/// later, so a local root's endpoint that an entry already holds names the others of that
/// local root too); both are then kept with the entry.
///
/// # Safety
/// `jni` is the calling (aggregator) thread's JNIEnv.
pub(super) unsafe fn resolve_names(
    table: &mut LiveTable,
    stacks: &mut LiveStacks,
    jvmti: &Jvmti,
    jni: *mut JNIEnv,
) {
    let mut named: HashMap<u64, u32> = HashMap::new();
    let mut endpoints: HashMap<u64, u32> = table
        .iter()
        .filter_map(|e| Some((e.span?.local_root_span_id, e.endpoint)))
        .filter(|(_, endpoint)| *endpoint != 0)
        .collect();
    let mut names = thread_registry::NAMES
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for e in table.iter_mut() {
        if e.thread_name == 0 {
            let id = *named.entry(e.serial).or_insert_with(|| {
                // SAFETY: per this function's contract.
                let name = (e.serial != 0)
                    .then(|| unsafe { names.current_name(e.serial, jvmti, jni) })
                    .flatten()
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| format!("[tid {}]", e.tid));
                stacks.string(&name)
            });
            e.thread_name = id;
        }
        if let (0, Some(span)) = (e.endpoint, e.span) {
            let root = span.local_root_span_id;
            if let Some(&known) = endpoints.get(&root) {
                e.endpoint = known;
            } else if let Some(name) = ENDPOINTS.name(root) {
                e.endpoint = stacks.string(&name);
                endpoints.insert(root, e.endpoint);
            }
        }
    }
}

/// What a sample of the snapshot is told apart by.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    stack: u32,
    class_id: u32,
    thread_name: u32,
    tid: i32,
    span: Option<SpanKey>,
    endpoint: u32,
}

/// The snapshot of the entries that count as live ([`Survival`]), at `now_unix`.
pub(super) fn build(
    table: &LiveTable,
    stacks: &LiveStacks,
    survival: &Survival,
    period: i64,
    capture: Option<&str>,
    comment: &str,
    now_unix: i64,
) -> Profile {
    let mut sums: HashMap<Key, (u64, u64)> = HashMap::new();
    for e in table.iter().filter(|e| survival.survived(e.epoch)) {
        let key = Key {
            stack: e.stack,
            class_id: e.class_id,
            thread_name: e.thread_name,
            tid: e.tid,
            span: e.span,
            endpoint: e.endpoint,
        };
        let (bytes, objects) = e.estimate();
        let sum = sums.entry(key).or_default();
        sum.0 = sum.0.saturating_add(bytes);
        sum.1 = sum.1.saturating_add(objects);
    }
    let kind = SampleKind::Live;
    let mut b = ProfileBuilder::new(kind.sample_types(), kind.period_type(), period);
    let mut locations: HashMap<u32, LocationId> = HashMap::new();
    let mut leaves: HashMap<u32, LocationId> = HashMap::new();
    for (key, (bytes, objects_milli)) in sums {
        let mut stack = Vec::with_capacity(stacks.stack_of(key.stack).len() + 1);
        stack.push(*leaves.entry(key.class_id).or_insert_with(|| {
            let name = CLASSES
                .name(key.class_id)
                .map_or_else(|| "[unknown class]".to_owned(), |n| n.to_string());
            let f = b.function(&name, "", 0);
            b.location(f, 0, FrameKind::Jvm)
        }));
        for &frame in stacks.stack_of(key.stack) {
            stack.push(*locations.entry(frame).or_insert_with(|| {
                let f = stacks
                    .frame_of(frame)
                    .copied()
                    .unwrap_or(super::stacks::Frame {
                        function: 0,
                        file: 0,
                        start_line: 0,
                        line: 0,
                        kind: FrameKind::Pseudo,
                    });
                let function = b.function(stacks.str(f.function), stacks.str(f.file), f.start_line);
                b.location(function, f.line, f.kind)
            }));
        }
        let name = stacks.str(key.thread_name).to_owned();
        let mut labels = vec![
            b.str_label("thread_name", &name),
            b.str_label("thread_id", &key.tid.to_string()),
            b.str_label(
                "thread_pool",
                &otelprof_primitives::thread_pool::pool_of(&name),
            ),
        ];
        let mut link = None;
        if let Some(span) = key.span {
            if key.endpoint != 0 {
                labels.push(b.str_label("span_name", stacks.str(key.endpoint)));
            }
            if span.link.is_some() {
                link = span.link;
                let lrs = span_id_hex(span.local_root_span_id);
                labels.push(b.str_label("local_root_span_id", &lrs));
            }
        }
        if let Some(id) = capture {
            labels.push(b.str_label(otelprof_opamp::capture::ATTRIBUTE, id));
        }
        let objects = i64::try_from(objects_milli.saturating_add(500) / 1000).unwrap_or(i64::MAX);
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        b.add_linked_sample(&stack, &labels, link, &[objects, bytes], &[]);
    }
    b.add_comment(&format!("otelprof agent: {}", stats::summary()));
    b.add_comment(comment);
    // A point in time: duration 0, like Go's heap profiles.
    b.build(now_unix, 0)
}
