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
//! ([`crate::event_sample`]).

use std::sync::atomic::{AtomicU64, Ordering};

use jni::sys::{jclass, jlong, jobject, JNIEnv};

use crate::event_sample::{self, EventSample};
use crate::ffi::guard;
use crate::kinds::SampleKind;
use crate::sys::JvmtiEnv;

/// Mean bytes between samples, as given to `SetHeapSamplingInterval`.
static INTERVAL: AtomicU64 = AtomicU64::new(0);

pub fn set_interval(bytes: u32) {
    INTERVAL.store(u64::from(bytes), Ordering::Relaxed);
}

/// Estimated `(bytes, objects x 1000)` that one sampled object of `size` bytes stands for.
pub fn estimate(size: u64, interval: u64) -> (u64, u64) {
    if interval == 0 || size == 0 {
        return (size, 1000);
    }
    // p = 1 - exp(-s/I), computed without cancellation for small s/I.
    let p = -(-(size as f64) / interval as f64).exp_m1();
    if p <= 0.0 {
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
pub unsafe extern "C" fn sampled_object_alloc(
    _jvmti: *mut JvmtiEnv,
    _jni: *mut JNIEnv,
    _thread: jobject,
    _object: jobject,
    class: jclass,
    size: jlong,
) {
    guard("SampledObjectAlloc", (), || {
        let Some(tid) = event_sample::wanted() else {
            return;
        };
        let Some(jvmti) = crate::agent::jvmti() else {
            return;
        };
        let (bytes, objects) = estimate(size.max(0) as u64, INTERVAL.load(Ordering::Relaxed));
        // SAFETY: `class` is the event's live class reference, on this attached thread.
        let class_id = unsafe { crate::class_names::class_id(&jvmti, class) };
        let sample = EventSample {
            kind: SampleKind::Alloc,
            weight: bytes,
            count_milli: objects,
            class_id,
        };
        // SAFETY: a JVMTI callback on the allocating thread.
        unsafe { event_sample::record(&jvmti, tid, sample) };
    })
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
}
