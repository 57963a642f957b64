//! The agent's own counters: what it sampled, what it dropped and why.
//!
//! Plain atomics in a static, so the signal handler can bump them.
//!
//! # Signal safety
//! Every counter here is a lock-free atomic (`AtomicU64` is lock-free on every target we
//! build for); incrementing one is async-signal-safe.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Number of distinct AsyncGetCallTrace outcomes we count (codes 0 ..= -10).
pub const WALK_OUTCOMES: usize = 11;

pub struct Counters {
    /// Signals that produced a sample record (including failed walks, which are recorded as
    /// pseudo-frames).
    pub samples: AtomicU64,
    /// Sample weight recorded (1 + timer overruns per signal).
    pub weight: AtomicU64,
    /// Signals dropped because the sample buffer was full.
    pub dropped_buffer_full: AtomicU64,
    /// Signals dropped because every buffer shard was busy.
    pub dropped_contended: AtomicU64,
    /// Signals that arrived on a thread the agent does not know (thread ending, or a non-Java
    /// thread under `clock=itimer`).
    pub unknown_thread: AtomicU64,
    /// Failed stack walks by AsyncGetCallTrace code (index = -code).
    pub walk_failed: [AtomicU64; WALK_OUTCOMES],
    /// Stacks cut at `depth=`.
    pub truncated: AtomicU64,
    /// Samples taken while the thread was working for a span.
    pub samples_with_span: AtomicU64,
    /// Samples that found the thread's context record mid-write (taken without a span).
    pub context_torn: AtomicU64,
    pub threads_started: AtomicU64,
    pub threads_ended: AtomicU64,
    pub timers_created: AtomicU64,
    pub timers_deleted: AtomicU64,
    pub timer_errors: AtomicU64,
    /// Threads not profiled because the thread table was full.
    pub table_full: AtomicU64,
    pub profiles_written: AtomicU64,
    pub write_errors: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);

pub static COUNTERS: Counters = Counters {
    samples: ZERO,
    weight: ZERO,
    dropped_buffer_full: ZERO,
    dropped_contended: ZERO,
    unknown_thread: ZERO,
    walk_failed: [ZERO; WALK_OUTCOMES],
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
};

/// Adds one. Signal safety: a relaxed atomic add.
#[inline]
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

pub fn get(c: &AtomicU64) -> u64 {
    c.load(Relaxed)
}

/// Counts a failed walk. Signal safety: a relaxed atomic add, no indexing panic (`get`).
#[inline]
pub fn walk_failed(code: i32) {
    let index = code.unsigned_abs() as usize;
    if let Some(c) = COUNTERS.walk_failed.get(index) {
        bump(c);
    }
}

/// One line summarising the counters, for the exit log and for pprof comments.
pub fn summary() -> String {
    let c = &COUNTERS;
    let failed: u64 = c.walk_failed.iter().map(get).sum();
    format!(
        "samples={} weight={} failed_walks={} truncated={} samples_with_span={} context_torn={} \
         dropped_buffer_full={} dropped_contended={} \
         unknown_thread={} threads_started={} threads_ended={} timers_created={} timers_deleted={} \
         timer_errors={} table_full={} profiles_written={} write_errors={}",
        get(&c.samples),
        get(&c.weight),
        failed,
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
    )
}
