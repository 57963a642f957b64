//! Garbage collection pauses, as JVMTI brackets them: `GarbageCollectionStart` and
//! `GarbageCollectionFinish`.
//!
//! Both events are sent by the VM thread while the application is stopped, and "the event
//! handler must not use JNI functions and must not use JVM TI functions" then (JVM TI,
//! Events). So the callbacks only read the monotonic clock and store into atomics: the pause
//! count, total and longest time (the agent's counters, exported as OTLP metrics), and a ring
//! of the last [`RING`] pauses that the wall-clock thread reads to show the pauses a thread
//! sat through as `[GC pause]` ([`crate::engines::wall`]). The finish count also tells the
//! aggregator that a collection may have cleared objects: it then asks the JVM, from its own
//! thread, how many collections really ran ([`crate::jvm::management`]) and checks the live
//! heap's weak references ([`crate::live`]).
//!
//! What a pause is here: HotSpot posts the pair from `SvcGCMarker`, i.e. around each
//! stop-the-world VM operation of a collector, including G1's Remark and Cleanup and ZGC's
//! short pauses, which collect nothing. The time is the operation's, not the time threads took
//! to reach the safepoint before it. Pause events never overlap (JVM TI: "no garbage collection
//! events will occur" between a matched pair), so the callbacks have one writer at a time.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ffi::guard;
use crate::sampling::os::monotonic_ns;
use crate::stats::{self, COUNTERS};
use crate::sys::JvmtiEnv;

/// Pauses remembered for the wall-clock thread: at a pause every 10 ms it covers 2.5 s,
/// far longer than the wall thread takes to come back to a thread.
pub(crate) const RING: usize = 256;

/// Start of the pause under way (CLOCK_MONOTONIC ns).
static STARTED_NS: AtomicU64 = AtomicU64::new(0);
/// Pauses finished since the agent was loaded (never reset: a sequence number).
static FINISHED: AtomicU64 = AtomicU64::new(0);

struct Pause {
    start_ns: AtomicU64,
    end_ns: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_PAUSE: Pause = Pause {
    start_ns: AtomicU64::new(0),
    end_ns: AtomicU64::new(0),
};
static PAUSES: [Pause; RING] = [NO_PAUSE; RING];

/// JVMTI `GarbageCollectionStart`.
///
/// # Safety
/// Called by the JVM (VM thread, application stopped).
pub(crate) unsafe extern "C" fn garbage_collection_start(_jvmti: *mut JvmtiEnv) {
    guard("GarbageCollectionStart", (), || {
        STARTED_NS.store(monotonic_ns(), Ordering::Relaxed)
    })
}

/// JVMTI `GarbageCollectionFinish`.
///
/// # Safety
/// Called by the JVM (VM thread, application stopped).
pub(crate) unsafe extern "C" fn garbage_collection_finish(_jvmti: *mut JvmtiEnv) {
    guard("GarbageCollectionFinish", (), || {
        let end = monotonic_ns();
        let start = STARTED_NS.load(Ordering::Relaxed);
        // A finish without its start (events enabled in between) is counted, not timed.
        let start = if start == 0 || start > end {
            end
        } else {
            start
        };
        record(start, end);
    })
}

/// Records one pause: counters, then the ring slot, then the sequence number that publishes
/// it.
fn record(start: u64, end: u64) {
    let d = end - start;
    stats::bump(&COUNTERS.gc_pauses);
    COUNTERS.gc_pause_ns.fetch_add(d, Ordering::Relaxed);
    COUNTERS.gc_pause_max_ns.fetch_max(d, Ordering::Relaxed);
    let seq = FINISHED.load(Ordering::Relaxed);
    if let Some(slot) = PAUSES.get((seq % RING as u64) as usize) {
        slot.start_ns.store(start, Ordering::Relaxed);
        slot.end_ns.store(end, Ordering::Relaxed);
    }
    FINISHED.store(seq + 1, Ordering::Release);
}

/// Pauses finished so far: when it moves, a collection may have freed objects.
pub(crate) fn finished() -> u64 {
    FINISHED.load(Ordering::Acquire)
}

/// Nanoseconds of `(since, until]` spent in pauses at least `min_ns` long, as far as the
/// ring still remembers them. Pauses are read from the newest back; a slot overwritten while
/// it was read (the ring went round meanwhile) is left out.
pub(crate) fn paused_within(since: u64, until: u64, min_ns: u64) -> u64 {
    if until <= since {
        return 0;
    }
    let seq = FINISHED.load(Ordering::Acquire);
    let mut total = 0;
    for back in 1..=(RING as u64).min(seq) {
        let n = seq - back;
        let Some(slot) = PAUSES.get((n % RING as u64) as usize) else {
            break;
        };
        let (start, end) = (
            slot.start_ns.load(Ordering::Relaxed),
            slot.end_ns.load(Ordering::Relaxed),
        );
        // Overwritten since `seq` was read: this and every older slot are unreliable.
        if FINISHED.load(Ordering::Acquire) >= n + RING as u64 {
            break;
        }
        if end <= since {
            break;
        }
        if end - start < min_ns.max(1) {
            continue;
        }
        total += end.min(until).saturating_sub(start.max(since));
    }
    total
}

/// The longest pause that ended within the last `window` (as far as the ring remembers),
/// in nanoseconds.
pub(crate) fn longest_recent(window: std::time::Duration) -> u64 {
    let now = monotonic_ns();
    let since = now.saturating_sub(u64::try_from(window.as_nanos()).unwrap_or(u64::MAX));
    let seq = FINISHED.load(Ordering::Acquire);
    let mut longest = 0;
    for back in 1..=(RING as u64).min(seq) {
        let Some(slot) = PAUSES.get(((seq - back) % RING as u64) as usize) else {
            break;
        };
        let (start, end) = (
            slot.start_ns.load(Ordering::Relaxed),
            slot.end_ns.load(Ordering::Relaxed),
        );
        if end <= since {
            break;
        }
        longest = longest.max(end.saturating_sub(start));
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test owns the ring (the statics are process-wide).
    #[test]
    fn pauses_are_counted_and_found_by_overlap() {
        let base = 1_000_000_000_000u64;
        let before = stats::get(&COUNTERS.gc_pauses);
        // A short pause, a long one, another long one.
        record(base + 100, base + 200);
        record(base + 1_000, base + 6_000);
        record(base + 10_000, base + 13_000);
        assert!(stats::get(&COUNTERS.gc_pauses) >= before + 3);
        assert!(COUNTERS.gc_pause_max_ns.load(Ordering::Relaxed) >= 5_000);
        // Pauses of 1,000 ns or more within (base, base + 20_000]: both long ones.
        assert_eq!(paused_within(base, base + 20_000, 1_000), 8_000);
        // Every pause, the short one too.
        assert_eq!(paused_within(base, base + 20_000, 0), 8_100);
        // Cut at both ends.
        assert_eq!(paused_within(base + 3_000, base + 11_000, 1_000), 4_000);
        // Outside every pause, or an empty window.
        assert_eq!(paused_within(base + 6_000, base + 10_000, 1), 0);
        assert_eq!(paused_within(base + 5, base + 5, 1), 0);
        // The ring goes round: old pauses are forgotten, recent ones still found.
        for i in 0..(RING as u64 + 10) {
            let s = base + 100_000 + i * 1_000;
            record(s, s + 500);
        }
        assert_eq!(paused_within(base, base + 20_000, 1), 0);
        let last = base + 100_000 + (RING as u64 + 9) * 1_000;
        assert_eq!(paused_within(last - 1, last + 1_000, 1), 500);
        assert!(finished() >= RING as u64 + 13);
    }
}
