//! The live heap (`live=`): which allocation sites hold the objects that are still alive.
//!
//! Objects sampled at allocation ([`crate::engines::alloc`], the same sampler as the
//! allocation profile) arrive in the sample buffer with a JNI weak global reference. The
//! aggregator thread, which owns all of this, names their stacks and threads at once
//! ([`stacks`]), keeps them in a bounded table ([`table`]) and, at the end of every period
//! (and at a dump or a stop), writes a snapshot of those still alive: a profile of type
//! `live` (`inuse_objects/count`, `inuse_space/bytes`), one sample per allocation stack,
//! thread, span and endpoint, each weighted like an allocation sample (`size / p`, the
//! Horvitz-Thompson estimate: whether an object is alive does not depend on whether it was
//! sampled, so the sum estimates the live bytes and objects without bias).
//!
//! # Alive, and survived a collection
//!
//! An object counts as live only once a collection that could have freed it has run since
//! it was sampled, and its weak reference still holds it (`IsSameObject(ref, NULL)`, which
//! never keeps the object alive). Young garbage that no collection has looked at yet is not
//! live. The collections are counted by the JVM's collector beans ([`Survival`],
//! [`crate::jvm::management`]): one collection for stop-the-world collectors, two for
//! concurrent ones. Each sample carries the number of collection pauses finished before its
//! allocation, so a collection is never credited to an object allocated after it. All of
//! this runs on the aggregator thread after the collector's GarbageCollectionFinish, never
//! in the allocating thread or the collector's pause. What stays imprecise is what any
//! after-GC heap figure shares: an object that died after being promoted stays alive to us
//! until a collection of the old generation clears it.
//!
//! # Bounds
//!
//! At most [`CAPACITY`] objects are tracked (32,768 entries of about 112 bytes, 3.5 MiB, plus
//! as many weak references in the JVM, about 0.25 MiB), and their names at most
//! [`STACK_BYTES`] (16 MiB; a few hundred KiB typically). At 90 % of either, the live
//! interval doubles and the table is thinned to it ([`table`]), which keeps the estimates
//! unbiased; it is counted (`live_interval_raises`, `live_thinned`) and logged. When the
//! table has stayed below a quarter full for ten minutes the interval halves again, never
//! below `live=`. At `live=512k`, 32,768 entries cover about 16 GiB of live heap before the
//! interval rises.
//!
//! # Snapshots
//!
//! A snapshot is the live set at one instant: its time is the snapshot's, its duration 0,
//! its samples carry no timestamps, and readers must never add snapshots up over time. Its
//! comment says since when objects are tracked (a late start never saw the older ones) and
//! the intervals in force.

pub(crate) mod stacks;
pub(crate) mod table;
pub(crate) mod watch;

mod snapshot;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jni::sys::{jobject, JNIEnv};
use otel_bridge::{FrameKind, Profile};
use otelprof_primitives::rng::SplitMix64;

pub(crate) use crate::context::reader::SpanKey;
use crate::engines::{alloc, gc};
use crate::jvm::jvmti::{delete_weak_global_ref, is_collected, Jvmti};
use crate::jvm::symbols::Symbols;
use crate::sampling::sample_buffer::Record;
use crate::stats::{self, COUNTERS};
use stacks::LiveStacks;
use table::{Entry, LiveTable};
pub(crate) use watch::{GcWatch, Survival};

/// Most objects tracked.
pub(crate) const CAPACITY: usize = 32_768;
/// Most bytes the names of their stacks, threads and endpoints may hold.
pub(crate) const STACK_BYTES: usize = 16 << 20;
/// Percent of either bound at which the interval rises.
const HIGH_WATER: usize = 90;
/// Below this percent of the table for [`LOWER_AFTER`], the interval halves.
const LOW_WATER: usize = 25;
const LOWER_AFTER: Duration = Duration::from_secs(600);
/// Least time between purges that no pressure asks for.
const PURGE_EVERY: Duration = Duration::from_secs(1);
/// The live heap of one session.
pub(crate) struct LiveHeap {
    table: LiveTable,
    stacks: LiveStacks,
    /// `(jmethodID, bci)` → frame id, for one period (jmethodIDs are not kept longer).
    frames: HashMap<(usize, i32), u32>,
    /// `live=`, and the interval in force.
    base_interval: u64,
    interval: u64,
    /// Since when the table is below [`LOW_WATER`].
    low_since: Option<Instant>,
    /// The pause ends ([`gc::finished`]) at the last purge, and its time. Any pause may have
    /// cleared weak references (generational ZGC's minor cycles, which the survival rule does
    /// not count, included), so a purge is worth it after any.
    purged_at: (u64, Instant),
    random: SplitMix64,
    /// Unix seconds of the start: older objects were never seen.
    tracking_since: i64,
    max_depth: i32,
}

impl LiveHeap {
    /// A live heap for `live=interval`.
    pub(crate) fn new(interval: u64, max_depth: i32) -> LiveHeap {
        LiveHeap {
            table: LiveTable::new(CAPACITY),
            stacks: LiveStacks::new(),
            frames: HashMap::new(),
            base_interval: interval,
            interval,
            low_since: None,
            purged_at: (0, Instant::now()),
            random: SplitMix64(crate::sampling::os::monotonic_ns()),
            tracking_since: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            max_depth,
        }
    }

    /// Takes in one drained record that holds an object; without one it is not ours.
    /// A full table refuses it (deleting its reference).
    ///
    /// # Safety
    /// `jni` is the calling (aggregator) thread's JNIEnv; `record` was drained from the
    /// sample buffer, which hands the ownership of its weak reference to the drainer.
    pub(crate) unsafe fn ingest(
        &mut self,
        symbols: &mut Symbols,
        record: Record<'_>,
        survival: &Survival,
        jni: *mut JNIEnv,
    ) {
        let h = record.header;
        if h.object == 0 {
            return;
        }
        if self.table.len() >= self.table.capacity() {
            // SAFETY: the record's reference, ours to delete.
            unsafe { delete_weak_global_ref(jni, h.object as jobject) };
            stats::bump(&COUNTERS.live_dropped_full);
            return;
        }
        let mut frames = Vec::with_capacity(record.frames.len() + 1);
        if h.num_frames <= 0 {
            // The only failure of a callback's walk (GetStackTrace).
            let f = self
                .stacks
                .frame("[stack_trace_failed]", "", 0, 0, FrameKind::Pseudo);
            frames.push(f);
        }
        for f in record.frames {
            frames.push(self.java_frame(symbols, f.method_id, f.lineno));
        }
        if h.num_frames >= self.max_depth {
            frames.push(
                self.stacks
                    .frame("[truncated]", "", 0, 0, FrameKind::Pseudo),
            );
        }
        let entry = Entry {
            weak: h.object,
            size: h.size,
            interval: u64::from(h.live_interval),
            epoch: survival.epoch(h.gc_seq),
            stack: self.stacks.stack(&frames),
            class_id: h.class_id,
            serial: h.serial,
            tid: h.tid,
            thread_name: 0,
            span: h.context.key(),
            endpoint: 0,
        };
        if let Err(e) = self.table.push(entry) {
            // SAFETY: as above.
            unsafe { delete_weak_global_ref(jni, e.weak as jobject) };
            stats::bump(&COUNTERS.live_dropped_full);
        }
    }

    fn java_frame(&mut self, symbols: &mut Symbols, method: jni::sys::jmethodID, bci: i32) -> u32 {
        let key = (method as usize, bci);
        if let Some(&f) = self.frames.get(&key) {
            return f;
        }
        // SAFETY: `method` came from JVMTI GetStackTrace, which only reports VM-made ids.
        let f = match unsafe { symbols.method(method) } {
            Some(m) => {
                let (start, line) = (m.start_line(), m.line_of(bci));
                let (name, file) = (m.name.clone(), m.file.clone());
                self.stacks.frame(&name, &file, start, line, FrameKind::Jvm)
            }
            None => self
                .stacks
                .frame("[unknown_method]", "", 0, 0, FrameKind::Jvm),
        };
        self.frames.insert(key, f);
        f
    }

    /// After each drain: the table's pressure, and purges when collections ran.
    ///
    /// # Safety
    /// `jni` is the calling (aggregator) thread's JNIEnv.
    pub(crate) unsafe fn after_drain(&mut self, jvmti: &Jvmti, jni: *mut JNIEnv) {
        let now = Instant::now();
        // SAFETY: per this function's contract.
        unsafe { self.relieve_pressure(jvmti, jni) };
        let collected_since = gc::finished() != self.purged_at.0;
        if collected_since && self.table.filled(50) && now - self.purged_at.1 >= PURGE_EVERY {
            // SAFETY: per this function's contract.
            unsafe { self.purge(jni) };
        }
        self.maybe_lower(jvmti, now);
        self.publish();
    }

    fn over_bounds(&self) -> bool {
        self.table.filled(HIGH_WATER) || self.stacks.bytes() * 100 >= STACK_BYTES * HIGH_WATER
    }

    /// Near a bound: drop the dead, then rebuild the names, then raise the interval and thin
    /// the table until both bounds are met again.
    ///
    /// # Safety
    /// As for [`LiveHeap::after_drain`].
    unsafe fn relieve_pressure(&mut self, jvmti: &Jvmti, jni: *mut JNIEnv) {
        if !self.over_bounds() {
            return;
        }
        if gc::finished() != self.purged_at.0 {
            // SAFETY: per this function's contract.
            unsafe { self.purge(jni) };
        }
        self.compact();
        let mut rounds = 0;
        while self.over_bounds() && rounds < 16 && self.interval < otelprof_agent_options::MAX_ALLOC
        {
            rounds += 1;
            self.interval = (self.interval * 2).min(otelprof_agent_options::MAX_ALLOC);
            alloc::raise_live_interval(jvmti, self.interval);
            let random = &mut self.random;
            let thinned = self.table.thin(
                self.interval,
                || random.next_f64(),
                // SAFETY: entries own their references.
                |e| unsafe { delete_weak_global_ref(jni, e.weak as jobject) },
            );
            stats::bump(&COUNTERS.live_interval_raises);
            COUNTERS
                .live_thinned
                .fetch_add(thinned as u64, std::sync::atomic::Ordering::Relaxed);
            self.compact();
            log_info!(
                "live heap: {} of {} entries and {} KiB of names in use; interval raised to {} bytes \
                 ({thinned} entries thinned out, estimates stay unbiased)",
                self.table.len(),
                self.table.capacity(),
                self.stacks.bytes() >> 10,
                self.interval
            );
        }
        self.low_since = None;
    }

    /// Halves the interval after the table stayed below [`LOW_WATER`] for [`LOWER_AFTER`].
    fn maybe_lower(&mut self, jvmti: &Jvmti, now: Instant) {
        if self.interval <= self.base_interval || self.table.filled(LOW_WATER) {
            self.low_since = None;
            return;
        }
        let since = *self.low_since.get_or_insert(now);
        if now - since >= LOWER_AFTER {
            self.interval = (self.interval / 2).max(self.base_interval);
            alloc::raise_live_interval(jvmti, self.interval);
            self.low_since = None;
            log_info!("live heap: interval lowered to {} bytes", self.interval);
        }
    }

    /// Rebuilds the names from the entries still tracked.
    fn compact(&mut self) {
        let uses: Vec<(u32, [u32; 2])> = self
            .table
            .iter()
            .map(|e| (e.stack, [e.thread_name, e.endpoint]))
            .collect();
        let mut renumbered = Vec::with_capacity(uses.len());
        let fresh = self.stacks.compact(
            uses.iter().map(|(s, n)| (*s, n.as_slice())),
            |stack, names| renumbered.push((stack, names)),
        );
        for (e, (stack, names)) in self.table.iter_mut().zip(renumbered) {
            e.stack = stack;
            e.thread_name = names.first().copied().unwrap_or(0);
            e.endpoint = names.get(1).copied().unwrap_or(0);
        }
        self.stacks = fresh;
        // Frame ids of the old store are gone.
        self.frames.clear();
    }

    /// Drops the entries whose object was collected.
    ///
    /// # Safety
    /// As for [`LiveHeap::after_drain`].
    unsafe fn purge(&mut self, jni: *mut JNIEnv) {
        let finished = gc::finished();
        let gone = self.table.retain(
            // SAFETY: entries hold live weak references of this session.
            |e| !unsafe { is_collected(jni, e.weak as jobject) },
            // SAFETY: as above; each is deleted once, as its entry goes.
            |e| unsafe { delete_weak_global_ref(jni, e.weak as jobject) },
        );
        COUNTERS
            .live_collected
            .fetch_add(gone as u64, std::sync::atomic::Ordering::Relaxed);
        self.purged_at = (finished, Instant::now());
    }

    fn publish(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        COUNTERS
            .live_entries
            .store(self.table.len() as u64, Relaxed);
        COUNTERS.live_interval.store(self.interval, Relaxed);
        COUNTERS
            .live_stack_bytes
            .store(self.stacks.bytes() as u64, Relaxed);
    }

    /// The snapshot of the objects alive now (purged first), as a profile of type `live`.
    ///
    /// # Safety
    /// As for [`LiveHeap::after_drain`].
    pub(crate) unsafe fn snapshot(
        &mut self,
        jvmti: &Jvmti,
        jni: *mut JNIEnv,
        survival: &Survival,
        now_unix: i64,
        capture: Option<&str>,
    ) -> Profile {
        // SAFETY: per this function's contract.
        unsafe {
            self.purge(jni);
            snapshot::resolve_names(&mut self.table, &mut self.stacks, jvmti, jni);
        }
        self.frames.clear();
        self.publish();
        let comment = format!(
            "live: entries={} interval={} base_interval={} raised={} thinned={} collections={} \
             survivals_needed={} tracking_since={}",
            self.table.len(),
            self.interval,
            self.base_interval,
            stats::get(&COUNTERS.live_interval_raises),
            stats::get(&COUNTERS.live_thinned),
            survival.count,
            survival.needed,
            self.tracking_since,
        );
        snapshot::build(
            &self.table,
            &self.stacks,
            survival,
            i64::try_from(self.interval).unwrap_or(i64::MAX),
            capture,
            &comment,
            now_unix,
        )
    }

    /// Deletes every weak reference: the session ends.
    ///
    /// # Safety
    /// As for [`LiveHeap::after_drain`].
    pub(crate) unsafe fn release(mut self, jni: *mut JNIEnv) {
        self.table.retain(
            |_| false,
            // SAFETY: entries own their references.
            |e| unsafe { delete_weak_global_ref(jni, e.weak as jobject) },
        );
    }
}
