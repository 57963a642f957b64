//! The agent's own counters: what it sampled, what it dropped and why.
//!
//! Plain atomics in a static, so the signal handler can bump them.
//!
//! # Signal safety
//! Every counter here is a lock-free atomic (`AtomicU64` is lock-free on every target we
//! build for); incrementing one is async-signal-safe.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Number of distinct AsyncGetCallTrace outcomes we count (codes 0 ..= -10).
pub(crate) const WALK_OUTCOMES: usize = 11;
/// Number of ways a native walk ends (`otelprof_native_frames::walk::End`).
pub(crate) const NATIVE_ENDS: usize = otelprof_native_frames::walk::End::ALL.len();

pub(crate) struct Counters {
    /// Sample records stored, of every kind (including failed walks, which are recorded as
    /// pseudo-frames). The Java shim reads this one to learn whether anything was sampled.
    pub(crate) samples: AtomicU64,
    /// CPU sample weight recorded: intervals (1 + timer overruns per signal, or the records
    /// of a perf event's ring).
    pub(crate) weight: AtomicU64,
    /// CPU samples stored from the signal handler: stack walks, each standing for `weight`
    /// intervals in all. Ideally one walk per interval (perf events); tick-bound timers
    /// fold several intervals into one walk.
    pub(crate) cpu_walks: AtomicU64,
    /// Of those, the walks of Java threads (the application's, walked with
    /// AsyncGetCallTrace); the rest are the JVM's own threads and native ones.
    pub(crate) cpu_walks_java: AtomicU64,
    /// Wall-clock samples stored.
    pub(crate) wall_samples: AtomicU64,
    /// Threads the wall-clock thread visited.
    pub(crate) wall_visits: AtomicU64,
    /// Wall-clock signals sent (to RUNNABLE threads).
    pub(crate) wall_signals: AtomicU64,
    /// Wall-clock samples taken with GetStackTrace (of waiting threads).
    pub(crate) wall_stack_traces: AtomicU64,
    /// Idle visits that owed their time to a later idle sample instead of a signal.
    pub(crate) wall_thinned: AtomicU64,
    /// Wall-clock samples not taken: the thread ended between its visit and its sample.
    pub(crate) wall_thread_gone: AtomicU64,
    /// Wall-clock signals that found no wall time to record (an earlier signal, merged with
    /// them by the kernel or handled first, took it).
    pub(crate) wall_empty: AtomicU64,
    /// Wall samples of time spent in long garbage collection pauses (`[GC pause]`).
    pub(crate) wall_gc_pauses: AtomicU64,
    /// Allocation samples stored.
    pub(crate) alloc_samples: AtomicU64,
    /// Changes of the allocation sampling interval made to keep within `alloc_rate=`.
    pub(crate) alloc_interval_changes: AtomicU64,
    /// The largest allocation sampling interval set to keep within `alloc_rate=` (bytes).
    pub(crate) alloc_interval_max: AtomicU64,
    /// Allocated bytes estimated from every allocation sample JVMTI reported (before the
    /// allocation and live-heap profiles each keep their share): the allocation rate.
    pub(crate) alloc_estimated_bytes: AtomicU64,
    /// Allocation samples stored for the live heap only (`live=` kept them, `alloc=` not).
    pub(crate) live_samples: AtomicU64,
    /// Live-heap samples lost: no weak reference could be made, or the sample buffer was
    /// full or busy (the weak reference is then deleted at once).
    pub(crate) live_ref_failed: AtomicU64,
    pub(crate) live_dropped_buffer: AtomicU64,
    /// Entries in the live-heap table, and the live-heap sampling interval in force (bytes),
    /// as of the last drain.
    pub(crate) live_entries: AtomicU64,
    pub(crate) live_interval: AtomicU64,
    /// Bytes the live heap's stacks and names hold, as of the last drain.
    pub(crate) live_stack_bytes: AtomicU64,
    /// Times the table was near full and the live interval doubled, and entries dropped by
    /// the thinning that follows (each remaining one keeps an unbiased weight).
    pub(crate) live_interval_raises: AtomicU64,
    pub(crate) live_thinned: AtomicU64,
    /// Tracked objects found collected, and samples refused because the table was full.
    pub(crate) live_collected: AtomicU64,
    pub(crate) live_dropped_full: AtomicU64,
    /// Garbage collection pauses (JVMTI GarbageCollectionStart/Finish), their total and
    /// longest time in nanoseconds.
    pub(crate) gc_pauses: AtomicU64,
    pub(crate) gc_pause_ns: AtomicU64,
    pub(crate) gc_pause_max_ns: AtomicU64,
    /// Collections the JVM's collectors report (GarbageCollectorMXBean counts, pauses that
    /// only serve concurrent work left out), and the heap in use after the last one (bytes),
    /// as of the last read.
    pub(crate) gc_collections: AtomicU64,
    pub(crate) heap_after_gc: AtomicU64,
    /// Lock (contended monitor) samples stored.
    pub(crate) lock_samples: AtomicU64,
    /// Waits below the lock threshold that the sampling did not pick.
    pub(crate) lock_short: AtomicU64,
    /// Contended waits whose start could not be recorded.
    pub(crate) lock_untimed: AtomicU64,
    /// JVMTI GetStackTrace failures in allocation and lock samples.
    pub(crate) stack_trace_failed: AtomicU64,
    /// Signals dropped because the sample buffer was full.
    pub(crate) dropped_buffer_full: AtomicU64,
    /// Signals dropped because every buffer shard was busy.
    pub(crate) dropped_contended: AtomicU64,
    /// Records of a profile type that is off (never expected).
    pub(crate) dropped_kind_off: AtomicU64,
    /// Signals that arrived on a thread the agent does not know (thread ending, or a non-Java
    /// thread under `clock=itimer`).
    pub(crate) unknown_thread: AtomicU64,
    /// Failed stack walks by AsyncGetCallTrace code (index = -code).
    pub(crate) walk_failed: [AtomicU64; WALK_OUTCOMES],
    /// Walks AsyncGetCallTrace could only do from the interrupted code's caller
    /// ([`crate::sampling::signal_handler`]'s recovery of `unknown_Java` / `not_walkable_Java`).
    pub(crate) walks_recovered: AtomicU64,
    /// Walks AsyncGetCallTrace could only do from the first Java frame the native walk found.
    pub(crate) walks_from_native: AtomicU64,
    /// Native walks by how they ended (index = `End as u8`).
    pub(crate) native_walk_end: [AtomicU64; NATIVE_ENDS],
    /// Perf ring records read (one interval each), and intervals the kernel reported lost.
    pub(crate) perf_records: AtomicU64,
    pub(crate) perf_lost: AtomicU64,
    /// Perf signals with no record to read (an earlier signal's drain took them).
    pub(crate) perf_empty: AtomicU64,
    /// SIGIO-style signals from a descriptor that is not the thread's event (ignored).
    pub(crate) perf_foreign: AtomicU64,
    /// Intervals of perf records dropped because sampling was off when they were read.
    pub(crate) perf_discarded: AtomicU64,
    /// Libraries whose unwind table was read (or could not be), and module sets published.
    pub(crate) unwind_tables: AtomicU64,
    pub(crate) unwind_tables_failed: AtomicU64,
    pub(crate) module_sets: AtomicU64,
    pub(crate) perf_events_opened: AtomicU64,
    pub(crate) perf_events_closed: AtomicU64,
    /// Threads given a CPU timer because their perf event could not be opened.
    pub(crate) perf_fallbacks: AtomicU64,
    /// Stacks cut at `depth=`.
    pub(crate) truncated: AtomicU64,
    /// Samples taken while the thread was working for a span.
    pub(crate) samples_with_span: AtomicU64,
    /// Samples that found the thread's context record mid-write (taken without a span).
    pub(crate) context_torn: AtomicU64,
    pub(crate) threads_started: AtomicU64,
    pub(crate) threads_ended: AtomicU64,
    pub(crate) timers_created: AtomicU64,
    pub(crate) timers_deleted: AtomicU64,
    pub(crate) timer_errors: AtomicU64,
    /// Threads not profiled because the thread table was full.
    pub(crate) table_full: AtomicU64,
    pub(crate) profiles_written: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    /// CPU sample weight (intervals) of the threads that are not walked, by role
    /// (`crate::sampling::thread_roles`): GC, JIT compilers, the VM's own threads, the
    /// agent's threads, and any other native thread. Credits at discovery included.
    pub(crate) samples_gc: AtomicU64,
    pub(crate) samples_jit: AtomicU64,
    pub(crate) samples_vm: AtomicU64,
    pub(crate) samples_otelprof: AtomicU64,
    pub(crate) samples_native_other: AtomicU64,
    /// Threads without JVMTI ThreadStart found in `/proc/self/task`, and found gone.
    pub(crate) native_threads_found: AtomicU64,
    pub(crate) native_threads_ended: AtomicU64,
    /// CPU intervals such threads had used before they were found (credited then).
    pub(crate) native_cpu_credited: AtomicU64,
    /// Scans of `/proc/self/task`, and the CPU time they took in all (µs).
    pub(crate) thread_scans: AtomicU64,
    pub(crate) thread_scan_cpu_us: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);

pub(crate) static COUNTERS: Counters = Counters {
    samples: ZERO,
    weight: ZERO,
    cpu_walks: ZERO,
    cpu_walks_java: ZERO,
    wall_samples: ZERO,
    wall_visits: ZERO,
    wall_signals: ZERO,
    wall_stack_traces: ZERO,
    wall_thinned: ZERO,
    wall_thread_gone: ZERO,
    wall_empty: ZERO,
    wall_gc_pauses: ZERO,
    alloc_samples: ZERO,
    alloc_interval_changes: ZERO,
    alloc_interval_max: ZERO,
    alloc_estimated_bytes: ZERO,
    live_samples: ZERO,
    live_ref_failed: ZERO,
    live_dropped_buffer: ZERO,
    live_entries: ZERO,
    live_interval: ZERO,
    live_stack_bytes: ZERO,
    live_interval_raises: ZERO,
    live_thinned: ZERO,
    live_collected: ZERO,
    live_dropped_full: ZERO,
    gc_pauses: ZERO,
    gc_pause_ns: ZERO,
    gc_pause_max_ns: ZERO,
    gc_collections: ZERO,
    heap_after_gc: ZERO,
    lock_samples: ZERO,
    lock_short: ZERO,
    lock_untimed: ZERO,
    stack_trace_failed: ZERO,
    dropped_buffer_full: ZERO,
    dropped_contended: ZERO,
    dropped_kind_off: ZERO,
    unknown_thread: ZERO,
    walk_failed: [ZERO; WALK_OUTCOMES],
    walks_recovered: ZERO,
    walks_from_native: ZERO,
    native_walk_end: [ZERO; NATIVE_ENDS],
    perf_records: ZERO,
    perf_lost: ZERO,
    perf_empty: ZERO,
    perf_foreign: ZERO,
    perf_discarded: ZERO,
    unwind_tables: ZERO,
    unwind_tables_failed: ZERO,
    module_sets: ZERO,
    perf_events_opened: ZERO,
    perf_events_closed: ZERO,
    perf_fallbacks: ZERO,
    truncated: ZERO,
    samples_with_span: ZERO,
    context_torn: ZERO,
    threads_started: ZERO,
    threads_ended: ZERO,
    timers_created: ZERO,
    timers_deleted: ZERO,
    timer_errors: ZERO,
    table_full: ZERO,
    profiles_written: ZERO,
    write_errors: ZERO,
    samples_gc: ZERO,
    samples_jit: ZERO,
    samples_vm: ZERO,
    samples_otelprof: ZERO,
    samples_native_other: ZERO,
    native_threads_found: ZERO,
    native_threads_ended: ZERO,
    native_cpu_credited: ZERO,
    thread_scans: ZERO,
    thread_scan_cpu_us: ZERO,
};

/// Profiling sessions started in this process (never reset): the Java shim reads it (through
/// a direct buffer) to learn that profiling started again since a thread last asked for a
/// context record.
pub(crate) static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// Adds one. Signal safety: a relaxed atomic add.
#[inline]
pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Relaxed)
}

/// Counts a failed walk. Signal safety: a relaxed atomic add, no indexing panic (`get`).
#[inline]
pub(crate) fn walk_failed(code: i32) {
    let index = code.unsigned_abs() as usize;
    if let Some(c) = COUNTERS.walk_failed.get(index) {
        bump(c);
    }
}

/// Counts how a native walk ended. Signal safety: a relaxed atomic add, no indexing panic.
#[inline]
pub(crate) fn native_walk_ended(end: otelprof_native_frames::walk::End) {
    if let Some(c) = COUNTERS.native_walk_end.get(end as usize) {
        bump(c);
    }
}

/// Sets every counter to zero: each profiling session counts from its start (a stopped agent
/// started again reports what the new session did). Called while nothing samples.
pub(crate) fn reset() {
    let c = &COUNTERS;
    let all: [&AtomicU64; 73] = [
        &c.samples,
        &c.weight,
        &c.cpu_walks,
        &c.cpu_walks_java,
        &c.walks_from_native,
        &c.perf_records,
        &c.perf_lost,
        &c.perf_empty,
        &c.perf_foreign,
        &c.perf_discarded,
        &c.unwind_tables,
        &c.unwind_tables_failed,
        &c.module_sets,
        &c.perf_events_opened,
        &c.perf_events_closed,
        &c.perf_fallbacks,
        &c.wall_samples,
        &c.wall_visits,
        &c.wall_signals,
        &c.wall_stack_traces,
        &c.wall_thinned,
        &c.wall_thread_gone,
        &c.wall_empty,
        &c.wall_gc_pauses,
        &c.alloc_samples,
        &c.alloc_interval_changes,
        &c.alloc_interval_max,
        &c.alloc_estimated_bytes,
        &c.live_samples,
        &c.live_ref_failed,
        &c.live_dropped_buffer,
        &c.live_entries,
        &c.live_interval,
        &c.live_stack_bytes,
        &c.live_interval_raises,
        &c.live_thinned,
        &c.live_collected,
        &c.live_dropped_full,
        &c.gc_pauses,
        &c.gc_pause_ns,
        &c.gc_pause_max_ns,
        &c.gc_collections,
        &c.heap_after_gc,
        &c.lock_samples,
        &c.lock_short,
        &c.lock_untimed,
        &c.stack_trace_failed,
        &c.dropped_buffer_full,
        &c.dropped_contended,
        &c.dropped_kind_off,
        &c.unknown_thread,
        &c.walks_recovered,
        &c.truncated,
        &c.samples_with_span,
        &c.context_torn,
        &c.threads_started,
        &c.threads_ended,
        &c.timers_created,
        &c.timers_deleted,
        &c.timer_errors,
        &c.table_full,
        &c.profiles_written,
        &c.write_errors,
        &c.samples_gc,
        &c.samples_jit,
        &c.samples_vm,
        &c.samples_otelprof,
        &c.samples_native_other,
        &c.native_threads_found,
        &c.native_threads_ended,
        &c.native_cpu_credited,
        &c.thread_scans,
        &c.thread_scan_cpu_us,
    ];
    for counter in all
        .into_iter()
        .chain(c.walk_failed.iter())
        .chain(c.native_walk_end.iter())
    {
        counter.store(0, Relaxed);
    }
}

/// One line summarising the counters, for the exit log and for pprof comments.
pub(crate) fn summary() -> String {
    let c = &COUNTERS;
    let failed: u64 = c.walk_failed.iter().map(get).sum();
    let native_ends: String = otelprof_native_frames::walk::End::ALL
        .iter()
        .skip(1)
        .map(|&e| {
            let n = c.native_walk_end.get(e as usize).map_or(0, get);
            format!(" native_{}={n}", e.name())
        })
        .collect();
    format!(
        "samples_all_types={} cpu_ticks={} cpu_walks={} cpu_walks_java={} failed_walks={} walks_recovered={} walks_from_native={} \
         perf_records={} perf_lost={} perf_empty={} perf_foreign={} perf_discarded={} perf_events_opened={} perf_events_closed={} perf_fallbacks={} \
         unwind_tables={} unwind_tables_failed={} module_sets={}{native_ends} \
         truncated={} samples_with_span={} context_torn={} \
         dropped_buffer_full={} dropped_contended={} \
         unknown_thread={} threads_started={} threads_ended={} timers_created={} timers_deleted={} \
         timer_errors={} table_full={} profiles_written={} write_errors={} \
         wall_samples={} wall_visits={} wall_signals={} wall_stack_traces={} wall_thinned={} wall_thread_gone={} wall_empty={} wall_gc_pauses={} \
         alloc_samples={} alloc_interval_changes={} alloc_interval_max={} alloc_estimated_bytes={} \
         live_samples={} live_ref_failed={} live_dropped_buffer={} live_entries={} live_interval={} \
         live_stack_bytes={} live_interval_raises={} live_thinned={} live_collected={} live_dropped_full={} \
         gc_pauses={} gc_pause_ns={} gc_pause_max_ns={} gc_collections={} heap_after_gc={} \
         lock_samples={} lock_short={} \
         lock_untimed={} stack_trace_failed={} \
         samples_gc={} samples_jit={} samples_vm={} samples_otelprof={} samples_native_other={} \
         native_threads_found={} native_threads_ended={} native_cpu_credited={} thread_scans={} thread_scan_cpu_us={}",
        get(&c.samples),
        get(&c.weight),
        get(&c.cpu_walks),
        get(&c.cpu_walks_java),
        failed,
        get(&c.walks_recovered),
        get(&c.walks_from_native),
        get(&c.perf_records),
        get(&c.perf_lost),
        get(&c.perf_empty),
        get(&c.perf_foreign),
        get(&c.perf_discarded),
        get(&c.perf_events_opened),
        get(&c.perf_events_closed),
        get(&c.perf_fallbacks),
        get(&c.unwind_tables),
        get(&c.unwind_tables_failed),
        get(&c.module_sets),
        get(&c.truncated),
        get(&c.samples_with_span),
        get(&c.context_torn),
        get(&c.dropped_buffer_full),
        get(&c.dropped_contended),
        get(&c.unknown_thread),
        get(&c.threads_started),
        get(&c.threads_ended),
        get(&c.timers_created),
        get(&c.timers_deleted),
        get(&c.timer_errors),
        get(&c.table_full),
        get(&c.profiles_written),
        get(&c.write_errors),
        get(&c.wall_samples),
        get(&c.wall_visits),
        get(&c.wall_signals),
        get(&c.wall_stack_traces),
        get(&c.wall_thinned),
        get(&c.wall_thread_gone),
        get(&c.wall_empty),
        get(&c.wall_gc_pauses),
        get(&c.alloc_samples),
        get(&c.alloc_interval_changes),
        get(&c.alloc_interval_max),
        get(&c.alloc_estimated_bytes),
        get(&c.live_samples),
        get(&c.live_ref_failed),
        get(&c.live_dropped_buffer),
        get(&c.live_entries),
        get(&c.live_interval),
        get(&c.live_stack_bytes),
        get(&c.live_interval_raises),
        get(&c.live_thinned),
        get(&c.live_collected),
        get(&c.live_dropped_full),
        get(&c.gc_pauses),
        get(&c.gc_pause_ns),
        get(&c.gc_pause_max_ns),
        get(&c.gc_collections),
        get(&c.heap_after_gc),
        get(&c.lock_samples),
        get(&c.lock_short),
        get(&c.lock_untimed),
        get(&c.stack_trace_failed),
        get(&c.samples_gc),
        get(&c.samples_jit),
        get(&c.samples_vm),
        get(&c.samples_otelprof),
        get(&c.samples_native_other),
        get(&c.native_threads_found),
        get(&c.native_threads_ended),
        get(&c.native_cpu_credited),
        get(&c.thread_scans),
        get(&c.thread_scan_cpu_us),
    )
}
