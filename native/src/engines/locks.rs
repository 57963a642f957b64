//! Lock profiling: contended `synchronized` monitors (JVMTI MonitorContendedEnter/Entered).
//!
//! HotSpot posts MonitorContendedEnter on a thread that finds a monitor owned by another
//! thread and is about to block, and MonitorContendedEntered once it owns it. The time in
//! between is the wait. The start time is kept as a JVMTI tag on the waiting thread's
//! `Thread` object rather than in thread-local storage: since JDK 24 a virtual thread can
//! unmount while it waits for a monitor (JEP 491) and finish the wait on another carrier, and
//! the tag follows the virtual thread.
//!
//! Weighting (`lock=T`): a wait of at least `T` is recorded as it is (one contention, its
//! delay). A shorter wait `d` is recorded with probability `d / T`, standing for `T`
//! nanoseconds and `T / d` contentions. Both estimates are unbiased, so totals include short
//! waits too, while short waits, the frequent and cheap ones, rarely cost a stack walk.
//! `lock=0` records every contended wait.
//!
//! Recorded: the waiting thread's stack (top frame: the method that entered the monitor), the
//! monitor's class as the leaf frame, and the waiting thread's span context.
//!
//! `java.util.concurrent` locks (ReentrantLock and friends) park with `LockSupport.park`,
//! which no JVMTI event reports: [`crate::engines::parks`] times those.

use std::sync::atomic::{AtomicU64, Ordering};

use jni::sys::{jobject, JNIEnv};
use otelprof_primitives::rng::{fraction, SplitMix64};

use crate::ffi::guard;
use crate::jvm::jvmti::{delete_local_ref, object_class};
use crate::kinds::SampleKind;
use crate::sampling::event_sample::{self, EventSample};
use crate::sampling::os::monotonic_ns;
use crate::stats::{self, COUNTERS};
use crate::sys::JvmtiEnv;

/// The threshold `T`, in nanoseconds.
static THRESHOLD_NS: AtomicU64 = AtomicU64::new(0);
/// State of the sampling decisions' random numbers (SplitMix64, stepped atomically).
static RANDOM: AtomicU64 = AtomicU64::new(0x2545_F491_4F6C_DD1D);

/// CLOCK_MONOTONIC time lock profiling last started: a wait timed before it began in an
/// earlier session (its start tag outlived the stop) is not counted.
static STARTED_NS: AtomicU64 = AtomicU64::new(0);

pub(crate) fn set_threshold(t: std::time::Duration) {
    THRESHOLD_NS.store(t.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    STARTED_NS.store(monotonic_ns(), Ordering::Relaxed);
}

/// The threshold `T`, in nanoseconds.
pub(crate) fn threshold() -> u64 {
    THRESHOLD_NS.load(Ordering::Relaxed)
}

/// A uniform number in [0, 1): SplitMix64 over a shared counter (no lock).
pub(crate) fn uniform() -> f64 {
    let state = RANDOM
        .fetch_add(SplitMix64::GAMMA, Ordering::Relaxed)
        .wrapping_add(SplitMix64::GAMMA);
    fraction(SplitMix64::mix(state))
}

/// What a wait of `waited` ns is recorded as: `(delay ns, contentions x 1000)`, or `None`
/// if it is not recorded. `draw` is a uniform number in [0, 1).
pub(crate) fn weigh(waited: u64, threshold: u64, draw: f64) -> Option<(u64, u64)> {
    if waited >= threshold {
        return Some((waited, 1000));
    }
    if waited == 0 || draw * threshold as f64 >= waited as f64 {
        return None;
    }
    let contentions = (1000.0 * threshold as f64 / waited as f64).round() as u64;
    Some((threshold, contentions))
}

/// JVMTI `MonitorContendedEnter`: the thread is about to wait for `object`'s monitor.
///
/// # Safety
/// Called by the JVM with the event's arguments, on the waiting thread.
pub(crate) unsafe extern "C" fn monitor_contended_enter(
    _jvmti: *mut JvmtiEnv,
    _jni: *mut JNIEnv,
    thread: jobject,
    _object: jobject,
) {
    guard("MonitorContendedEnter", (), || {
        if event_sample::wanted().is_none() {
            return;
        }
        let Some(jvmti) = crate::jvm::jvmti::agent_env() else {
            return;
        };
        // SAFETY: `thread` is the event's live thread reference. A monotonic time is far
        // above 0 and below i64::MAX, so it is a valid non-zero tag.
        if unsafe { jvmti.set_tag(thread, monotonic_ns().max(1) as i64) }.is_err() {
            stats::bump(&COUNTERS.lock_untimed);
        }
    })
}

/// JVMTI `MonitorContendedEntered`: the thread owns the monitor it waited for.
///
/// # Safety
/// Called by the JVM with the event's arguments, on the thread that waited.
pub(crate) unsafe extern "C" fn monitor_contended_entered(
    _jvmti: *mut JvmtiEnv,
    jni: *mut JNIEnv,
    thread: jobject,
    object: jobject,
) {
    guard("MonitorContendedEntered", (), || {
        let Some(jvmti) = crate::jvm::jvmti::agent_env() else {
            return;
        };
        // SAFETY: `thread` is the event's live thread reference.
        let entered_at = unsafe { jvmti.tag(thread) }.unwrap_or(0);
        if entered_at <= 0 {
            // The wait began before profiling started (or its tag could not be set).
            return;
        }
        // SAFETY: as above; 0 removes the tag.
        let _ = unsafe { jvmti.set_tag(thread, 0) };
        if (entered_at as u64) < STARTED_NS.load(Ordering::Relaxed) {
            // Timed by an earlier session, before a stop.
            return;
        }
        let Some(tid) = event_sample::wanted() else {
            return;
        };
        let waited = monotonic_ns().saturating_sub(entered_at as u64);
        let Some((delay, contentions)) =
            weigh(waited, THRESHOLD_NS.load(Ordering::Relaxed), uniform())
        else {
            stats::bump(&COUNTERS.lock_short);
            return;
        };
        // SAFETY: `object` is the event's live monitor reference and `jni` this thread's
        // JNIEnv; the class reference is deleted after its last use.
        let class_id = unsafe {
            let class = object_class(jni, object);
            let id = crate::jvm::class_names::class_id(&jvmti, class);
            delete_local_ref(jni, class);
            id
        };
        let sample = EventSample {
            kind: SampleKind::Lock,
            weight: delay,
            count_milli: contentions,
            class_id,
        };
        // SAFETY: a JVMTI callback on the thread that waited.
        unsafe { event_sample::record(&jvmti, tid, sample) };
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_waits_are_exact_and_short_ones_unbiased() {
        let t = 10_000_000;
        assert_eq!(weigh(25_000_000, t, 0.99), Some((25_000_000, 1000)));
        assert_eq!(weigh(t, t, 0.99), Some((t, 1000)));
        // A 1 ms wait is kept for draws below 1/10, as 10 ms and 10 contentions.
        assert_eq!(weigh(1_000_000, t, 0.05), Some((t, 10_000)));
        assert_eq!(weigh(1_000_000, t, 0.5), None);
        assert_eq!(weigh(0, t, 0.0), None);
        // lock=0: everything, as it is.
        assert_eq!(weigh(5, 0, 0.99), Some((5, 1000)));

        // Totals over many short waits come out right.
        let (mut delay, mut count) = (0u64, 0u64);
        let n = 200_000u64;
        for i in 0..n {
            let waited = 100_000 + (i % 7) * 300_000; // 0.1 .. 1.9 ms
            if let Some((d, c)) = weigh(waited, t, uniform()) {
                delay += d;
                count += c;
            }
        }
        let true_delay: u64 = (0..n).map(|i| 100_000 + (i % 7) * 300_000).sum();
        let ratio = delay as f64 / true_delay as f64;
        assert!((0.97..1.03).contains(&ratio), "delay ratio {ratio}");
        let count_ratio = count as f64 / 1000.0 / n as f64;
        assert!(
            (0.9..1.1).contains(&count_ratio),
            "count ratio {count_ratio}"
        );
        assert!((0.0..1.0).contains(&uniform()));
    }
}
