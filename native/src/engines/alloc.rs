//! Allocation profiling with JVMTI heap sampling (JDK 11+, JEP 331).
//!
//! With `SetHeapSamplingInterval(I)` HotSpot samples allocations as a Poisson process over
//! allocated bytes: the next sample point lies an exponentially distributed number of bytes
//! (mean `I`) ahead, and the object that covers it is reported in `SampledObjectAlloc`, on the
//! allocating thread, after the object is initialised. An object of `s` bytes is therefore
//! sampled with probability `p = 1 - exp(-s / I)` (at most once, however large), and stands
//! for `s / p` bytes and `1 / p` objects: summed over samples, these estimate the bytes and
//! objects the code really allocated, without bias for small and large objects alike. With
//! `I = 0` every allocation is reported (`p = 1`).
//!
//! The callback records the stack (GetStackTrace), the allocated class as the leaf frame, and
//! the span context of the allocating thread, into the common sample buffer
//! ([`crate::sampling::event_sample`]).
//!
//! A sample costs several microseconds, most of it in GetStackTrace, so its cost follows the
//! allocation rate: at 1.8 GB/s and 512 KiB, 3,600 samples a second took 1.7 % of the CPU in
//! the benchmark. `alloc_rate=` bounds the samples per second (default 500): every quarter of
//! a second the callback that closes the window compares the window's rate with the bound and
//! sets the interval that would have met it (never below the interval asked for), raising it
//! when allocation is faster and lowering it back when it slows. The estimates stay unbiased:
//! each sample is weighted with the interval in force, and HotSpot draws each thread's next
//! sample point with the interval in force when it takes a sample, so only the one sample per
//! thread drawn before a change is weighted with the other interval.
//!
//! One sampler, two consumers: the allocation profile (`alloc=A`) and the live heap
//! (`live=L`, [`crate::live`]). JVMTI samples at `J`, the smaller of the two (the rate bound
//! may raise it). Each consumer keeps a sample of `s` bytes with probability
//! `p(s, max(T, J)) / p(s, J)` for its own interval `T`, by an independent draw: a Bernoulli
//! thinning of a Poisson sample is a Poisson sample, so each keeps exactly the inclusion
//! probability `p(s, max(T, J))` and weighs its samples with that interval. With the same
//! interval for both (`alloc=512k,live=512k`) both keep every sample: one stack walk serves
//! both, and the live heap's only extra is a JNI weak global reference to the object. A sample
//! neither keeps costs no stack walk.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use jni::sys::{jclass, jlong, jobject, JNIEnv};
use otelprof_primitives::rng::{fraction, SplitMix64};

use crate::ffi::guard;
use crate::jvm::jvmti::{delete_weak_global_ref, new_weak_global_ref, Jvmti};
use crate::kinds::SampleKind;
use crate::sampling::event_sample::{self, EventSample, TrackedObject};
use crate::stats::{self, COUNTERS};
use crate::sys::JvmtiEnv;

/// Mean bytes between samples, as given to `SetHeapSamplingInterval` last.
static INTERVAL: AtomicU64 = AtomicU64::new(0);
/// The interval asked for: the least the rate bound may bring it down to (the smaller of the
/// consumers' intervals).
static BASE: AtomicU64 = AtomicU64::new(0);
/// `alloc=`, when the allocation profile is on.
static ALLOC_ON: AtomicBool = AtomicBool::new(false);
static ALLOC_TARGET: AtomicU64 = AtomicU64::new(0);
/// The live heap's interval in force (`live=`, raised while its table is full), when on.
static LIVE_ON: AtomicBool = AtomicBool::new(false);
static LIVE_TARGET: AtomicU64 = AtomicU64::new(0);
/// Most samples per second (`alloc_rate=`); 0: no bound.
static MAX_RATE: AtomicU64 = AtomicU64::new(0);
/// Start of the current rate window, and the samples taken in it.
static WINDOW_START_NS: AtomicU64 = AtomicU64::new(0);
static WINDOW_SAMPLES: AtomicU64 = AtomicU64::new(0);
const WINDOW_NS: u64 = 250_000_000;
/// The largest interval `SetHeapSamplingInterval` takes (a jint), as the options' table says.
const MAX_INTERVAL: u64 = otelprof_agent_options::MAX_ALLOC;
/// The thinning draws: a counter that any thread advances, mixed (no TLS, no lock).
static DRAWS: AtomicU64 = AtomicU64::new(0x2545_F491_4F6C_DD1D);

/// Sets the consumers' intervals (`None`: that consumer is off) and the bound of samples per
/// second (0: none), before the first sample; returns the interval to sample at.
pub(crate) fn configure(alloc: Option<u32>, live: Option<u32>, max_rate: u32) -> u32 {
    ALLOC_ON.store(alloc.is_some(), Ordering::Relaxed);
    ALLOC_TARGET.store(u64::from(alloc.unwrap_or(0)), Ordering::Relaxed);
    LIVE_ON.store(live.is_some(), Ordering::Relaxed);
    LIVE_TARGET.store(u64::from(live.unwrap_or(0)), Ordering::Relaxed);
    let base = base_of(alloc.map(u64::from), live.map(u64::from));
    INTERVAL.store(base, Ordering::Relaxed);
    BASE.store(base, Ordering::Relaxed);
    MAX_RATE.store(u64::from(max_rate), Ordering::Relaxed);
    WINDOW_SAMPLES.store(0, Ordering::Relaxed);
    WINDOW_START_NS.store(crate::sampling::os::monotonic_ns(), Ordering::Relaxed);
    // `base` is one of the two u32 intervals.
    u32::try_from(base).unwrap_or(u32::MAX)
}

/// The interval JVMTI samples at when nothing bounds the rate: the smaller of the
/// consumers'.
fn base_of(alloc: Option<u64>, live: Option<u64>) -> u64 {
    match (alloc, live) {
        (Some(a), Some(l)) => a.min(l),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 0,
    }
}

/// Whether allocations are sampled at all, and whether for the live heap.
pub(crate) fn consumers() -> (bool, bool) {
    let (alloc, live) = (
        ALLOC_ON.load(Ordering::Relaxed),
        LIVE_ON.load(Ordering::Relaxed),
    );
    (alloc || live, live)
}

/// Raises the live heap's interval to `bytes` (its table is near full, [`crate::live`]);
/// the sampler follows when the live heap set its interval.
pub(crate) fn raise_live_interval(jvmti: &Jvmti, bytes: u64) {
    let bytes = bytes.min(MAX_INTERVAL);
    LIVE_TARGET.store(bytes, Ordering::Relaxed);
    let alloc = ALLOC_ON
        .load(Ordering::Relaxed)
        .then(|| ALLOC_TARGET.load(Ordering::Relaxed));
    let base = base_of(alloc, Some(bytes));
    BASE.store(base, Ordering::Relaxed);
    if INTERVAL.load(Ordering::Relaxed) < base {
        // `base` <= MAX_INTERVAL, so the cast is exact.
        if jvmti.set_heap_sampling_interval(base as i32).is_ok() {
            INTERVAL.store(base, Ordering::Relaxed);
        }
    }
}

/// The probability that HotSpot samples an object of `size` bytes at mean interval
/// `interval`: `1 - exp(-size / interval)`, 1 for `interval` 0 (every object).
pub(crate) fn inclusion(size: u64, interval: u64) -> f64 {
    if interval == 0 || size == 0 {
        return 1.0;
    }
    // Computed without cancellation for small s/I.
    -(-(size as f64) / interval as f64).exp_m1()
}

/// Whether a consumer whose interval is `target` keeps a sample of `size` bytes taken at
/// `sampled_at`: with probability `p(size, target) / p(size, sampled_at)` (1 when the
/// target is no longer than the interval sampled at). `draw` is uniform in [0, 1).
pub(crate) fn keeps(size: u64, target: u64, sampled_at: u64, draw: f64) -> bool {
    if target <= sampled_at {
        return true;
    }
    let at = inclusion(size, sampled_at);
    at <= 0.0 || draw < inclusion(size, target) / at
}

/// A uniform draw in [0, 1), from any thread without a lock: SplitMix64 over a counter that
/// every thread advances.
fn uniform() -> f64 {
    let state = DRAWS.fetch_add(SplitMix64::GAMMA, Ordering::Relaxed);
    fraction(SplitMix64::mix(state))
}

/// The interval for the next window, after `samples` in `window_ns` at `current`: unchanged
/// while the rate is between 40 % and 100 % of `max_rate`, otherwise the interval that would
/// have given 80 % of it, kept between `base` and the largest interval JVMTI takes. With no
/// bound (`max_rate` 0), or with every allocation sampled (`base` 0), always `base`.
pub(crate) fn next_interval(
    base: u64,
    current: u64,
    samples: u64,
    window_ns: u64,
    max_rate: u64,
) -> u64 {
    if max_rate == 0 || base == 0 || window_ns == 0 {
        return base;
    }
    let rate = samples as f64 * 1e9 / window_ns as f64;
    let limit = max_rate as f64;
    if rate <= limit && rate >= 0.4 * limit {
        return current.clamp(base, MAX_INTERVAL);
    }
    let wanted = current.max(1) as f64 * rate / (0.8 * limit);
    (wanted.round() as u64).clamp(base, MAX_INTERVAL)
}

/// Counts a sample in the rate window and, if this sample closes the window, adjusts the
/// interval. One thread per window adjusts (the one whose compare-exchange wins).
fn throttle(jvmti: &crate::jvm::jvmti::Jvmti) {
    let max_rate = MAX_RATE.load(Ordering::Relaxed);
    let base = BASE.load(Ordering::Relaxed);
    if max_rate == 0 || base == 0 {
        return;
    }
    WINDOW_SAMPLES.fetch_add(1, Ordering::Relaxed);
    let now = crate::sampling::os::monotonic_ns();
    let start = WINDOW_START_NS.load(Ordering::Relaxed);
    let elapsed = now.saturating_sub(start);
    if elapsed < WINDOW_NS
        || WINDOW_START_NS
            .compare_exchange(start, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let samples = WINDOW_SAMPLES.swap(0, Ordering::AcqRel);
    let current = INTERVAL.load(Ordering::Relaxed);
    let next = next_interval(base, current, samples, elapsed, max_rate);
    if next == current {
        return;
    }
    // `next` <= MAX_INTERVAL, so the cast is exact.
    if jvmti.set_heap_sampling_interval(next as i32).is_ok() {
        INTERVAL.store(next, Ordering::Relaxed);
        stats::bump(&COUNTERS.alloc_interval_changes);
        COUNTERS
            .alloc_interval_max
            .fetch_max(next, Ordering::Relaxed);
    }
}

/// Estimated `(bytes, objects x 1000)` that one sampled object of `size` bytes stands for.
pub(crate) fn estimate(size: u64, interval: u64) -> (u64, u64) {
    let p = inclusion(size, interval);
    if p <= 0.0 || p >= 1.0 {
        return (size, 1000);
    }
    (
        (size as f64 / p).round() as u64,
        (1000.0 / p).round() as u64,
    )
}

/// JVMTI `SampledObjectAlloc`.
///
/// # Safety
/// Called by the JVM with the event's arguments, on the allocating thread.
pub(crate) unsafe extern "C" fn sampled_object_alloc(
    _jvmti: *mut JvmtiEnv,
    jni: *mut JNIEnv,
    _thread: jobject,
    object: jobject,
    class: jclass,
    size: jlong,
) {
    guard("SampledObjectAlloc", (), || {
        let Some(tid) = event_sample::wanted() else {
            return;
        };
        let Some(jvmti) = crate::jvm::jvmti::agent_env() else {
            return;
        };
        // SAFETY: the event's own arguments, on the allocating thread.
        unsafe { sample(&jvmti, jni, tid, object, class, size.max(0) as u64) };
        throttle(&jvmti);
    })
}

/// One JVMTI sample: each consumer draws whether it keeps it; a kept one is recorded with its
/// stack, once for both.
///
/// # Safety
/// As for [`sampled_object_alloc`].
unsafe fn sample(
    jvmti: &Jvmti,
    jni: *mut JNIEnv,
    tid: i32,
    object: jobject,
    class: jclass,
    size: u64,
) {
    let at = INTERVAL.load(Ordering::Relaxed);
    COUNTERS
        .alloc_estimated_bytes
        .fetch_add(estimate(size, at).0, Ordering::Relaxed);
    let alloc = ALLOC_ON
        .load(Ordering::Relaxed)
        .then(|| ALLOC_TARGET.load(Ordering::Relaxed).max(at))
        .filter(|&a| keeps(size, a, at, uniform()));
    let live = LIVE_ON
        .load(Ordering::Relaxed)
        .then(|| LIVE_TARGET.load(Ordering::Relaxed).max(at))
        .filter(|&l| keeps(size, l, at, uniform()));
    let tracked = match live {
        Some(interval) => {
            // SAFETY: `jni` is this thread's JNIEnv and `object` the event's live reference.
            let weak = unsafe { new_weak_global_ref(jni, object) };
            if weak.is_null() {
                stats::bump(&COUNTERS.live_ref_failed);
            }
            TrackedObject {
                object: weak as u64,
                size,
                // At most MAX_INTERVAL, a jint.
                live_interval: u32::try_from(interval).unwrap_or(u32::MAX),
                // Wrapping: only differences of recent values are ever used.
                gc_seq: crate::engines::gc::finished() as u32,
            }
        }
        None => TrackedObject::default(),
    };
    if alloc.is_none() && tracked.object == 0 {
        return;
    }
    // SAFETY: `class` is the event's live class reference, on this attached thread.
    let class_id = unsafe { crate::jvm::class_names::class_id(jvmti, class) };
    let sample = match alloc {
        Some(interval) => {
            let (bytes, objects) = estimate(size, interval);
            EventSample {
                kind: SampleKind::Alloc,
                weight: bytes,
                count_milli: objects,
                class_id,
            }
        }
        None => EventSample {
            kind: SampleKind::Live,
            weight: 0,
            count_milli: 0,
            class_id,
        },
    };
    // SAFETY: a JVMTI callback on the allocating thread.
    let stored = unsafe { event_sample::record_object(jvmti, tid, sample, tracked) };
    if !stored && tracked.object != 0 {
        // SAFETY: made above on this thread, never handed on.
        unsafe { delete_weak_global_ref(jni, tracked.object as jobject) };
        stats::bump(&COUNTERS.live_dropped_buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_are_unbiased_for_small_and_large_objects() {
        // Every object sampled: the truth.
        assert_eq!(estimate(24, 0), (24, 1000));
        // Small objects: p ~ s/I, so each sample stands for about I bytes.
        let (bytes, objects) = estimate(16, 512 * 1024);
        assert!((bytes as f64 - 524_296.0).abs() < 16.0, "{bytes}");
        assert!(
            (objects as f64 / 1000.0 - 32_768.5).abs() < 1.0,
            "{objects}"
        );
        // Objects far larger than the interval are almost surely sampled: themselves, once.
        assert_eq!(estimate(100 << 20, 512 * 1024), (100 << 20, 1000));
        // In between: s = I gives p = 1 - 1/e.
        let (bytes, objects) = estimate(1000, 1000);
        assert_eq!(bytes, 1582);
        assert_eq!(objects, 1582);
    }

    #[test]
    fn the_interval_follows_the_rate_bound() {
        let (base, q) = (512 * 1024, 250_000_000);
        // No bound, or every allocation sampled: the interval asked for, always.
        assert_eq!(next_interval(base, 4 * base, 10_000, q, 0), base);
        assert_eq!(next_interval(0, 0, 10_000, q, 500), 0);
        // Within 40-100 % of the bound: unchanged.
        assert_eq!(next_interval(base, 3 * base, 100, q, 500), 3 * base);
        assert_eq!(next_interval(base, 3 * base, 125, q, 500), 3 * base);
        // 3,600/s against 500/s: the interval that gives 400/s, 9 times as long.
        assert_eq!(next_interval(base, base, 900, q, 500), 9 * base);
        // Allocation slowed to 100/s at 9x: back down to the interval that gives 400/s, but
        // never below alloc=.
        assert_eq!(next_interval(base, 9 * base, 25, q, 500), base * 9 / 4);
        assert_eq!(next_interval(base, 2 * base, 0, q, 500), base);
        // Never above what JVMTI takes.
        assert_eq!(next_interval(base, 1 << 30, 1 << 20, q, 1), MAX_INTERVAL);
    }

    /// Simulates HotSpot's sampler (exponential gaps over a stream of allocations of mixed
    /// sizes) and checks that the estimates add up to what was allocated.
    #[test]
    fn simulated_sampling_recovers_totals() {
        let interval = 4096u64;
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut until_sample = -(1.0 - uniform()).ln() * interval as f64;
        let (mut true_bytes, mut true_objects) = (0u64, 0u64);
        let (mut est_bytes, mut est_objects) = (0f64, 0f64);
        for i in 0..2_000_000u64 {
            let size = [16u64, 24, 48, 1024, 16_400][(i % 5) as usize];
            true_bytes += size;
            true_objects += 1;
            if (size as f64) < until_sample {
                until_sample -= size as f64;
                continue;
            }
            let (b, o) = estimate(size, interval);
            est_bytes += b as f64;
            est_objects += o as f64 / 1000.0;
            // Memoryless: the next point is a fresh exponential gap after this object.
            until_sample = -(1.0 - uniform()).ln() * interval as f64;
        }
        let bytes_ratio = est_bytes / true_bytes as f64;
        let objects_ratio = est_objects / true_objects as f64;
        assert!((0.98..1.02).contains(&bytes_ratio), "{bytes_ratio}");
        assert!((0.97..1.03).contains(&objects_ratio), "{objects_ratio}");
    }

    /// One sampler at 4 KiB, two consumers: one at the sampler's interval (keeps all), one at
    /// 16 KiB (keeps its share by draws). Each consumer's estimates add up to what was
    /// allocated, and the second keeps about what sampling at 16 KiB would have given.
    #[test]
    fn consumers_thin_the_shared_samples_without_bias() {
        let (at, target) = (4_096u64, 16_384u64);
        let mut r = otelprof_primitives::rng::SplitMix64(11);
        let sizes = [16u64, 24, 48, 1_024, 16_400, 100_000];
        let mut until = -(1.0 - r.next_f64()).ln() * at as f64;
        let mut truth = 0u64;
        let (mut all, mut thinned, mut kept, mut taken) = (0f64, 0f64, 0u64, 0u64);
        for i in 0..3_000_000u64 {
            let size = sizes[(i % 6) as usize];
            truth += size;
            if (size as f64) < until {
                until -= size as f64;
                continue;
            }
            until = -(1.0 - r.next_f64()).ln() * at as f64;
            taken += 1;
            assert!(keeps(size, at, at, r.next_f64()));
            all += estimate(size, at).0 as f64;
            if keeps(size, target, at, r.next_f64()) {
                kept += 1;
                thinned += estimate(size, target).0 as f64;
            }
        }
        for (what, est) in [("all", all), ("thinned", thinned)] {
            let ratio = est / truth as f64;
            assert!((0.98..1.02).contains(&ratio), "{what}: {ratio}");
        }
        // Expected samples at 16 KiB: the sum of p(s, 16 KiB) over the allocations.
        let per_cycle: f64 = sizes.iter().map(|&s| inclusion(s, target)).sum();
        let expected = per_cycle * 500_000.0;
        let ratio = kept as f64 / expected;
        assert!(
            (0.97..1.03).contains(&ratio),
            "{kept} kept, {expected:.0} expected"
        );
        assert!(kept < taken);
        // A consumer whose interval is shorter than the sampler's keeps everything.
        assert!(keeps(64, 1_024, 4_096, 0.999_999));
    }
}
