//! The collections the JVM has run, and its heap after them, as the aggregator thread
//! follows them: after every pause end ([`gc::finished`] moved) it asks the management
//! beans ([`crate::jvm::management`]) for the collection count, and at most once a second
//! for the heap used after collection. The counts tell the live heap which objects have
//! outlived a collection ([`Survival`]); the figures go out as OTLP metrics
//! (`otelprof.jvm.*`, see docs/metrics.md) through the agent's counters.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use jni::sys::JNIEnv;

use crate::engines::gc;
use crate::jvm::management::Management;
use crate::stats::COUNTERS;

/// Without the management beans: pause ends that must follow an object. On G1 the only
/// pauses that collect nothing are Remark and Cleanup, at most one each between two
/// collections, so three pause ends include a collection.
const PAUSES_NEEDED: u64 = 3;
/// Least time between two reads of the heap used after collection.
const HEAP_READ_EVERY: Duration = Duration::from_secs(1);

/// How the live heap tells that a collection has run since an object was sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Survival {
    /// Pause ends ([`gc::finished`]) read just before `count`.
    finished_at_read: u64,
    /// Collections counted (or pause ends, without the beans).
    pub(crate) count: u64,
    /// Collections an object must outlive.
    pub(crate) needed: u64,
}

impl Survival {
    /// The count an object allocated after `gc_seq` pause ends must see exceeded by
    /// `needed`. Pauses that ended after the last read but before the allocation may each
    /// have been a collection the count does not hold yet: each raises the epoch by one
    /// (an object is never credited with a collection that came before it).
    pub(crate) fn epoch(&self, gc_seq: u32) -> u64 {
        let ahead = gc_seq.wrapping_sub(self.finished_at_read as u32) as i32;
        self.count + u64::from(ahead.max(0) as u32)
    }

    pub(crate) fn survived(&self, epoch: u64) -> bool {
        self.count >= epoch.saturating_add(self.needed)
    }
}

pub(crate) struct GcWatch {
    /// The collector and heap beans; `None` without `java.management`.
    management: Option<Management>,
    survival: Survival,
    /// The count at the last heap read, and its time.
    heap_read: Option<(u64, Instant)>,
}

impl GcWatch {
    /// Finds the beans and reads the count.
    ///
    /// # Safety
    /// `jni` is the calling (aggregator) thread's JNIEnv, in the live phase.
    pub(crate) unsafe fn open(jni: *mut JNIEnv) -> GcWatch {
        // SAFETY: per this function's contract.
        let management = match unsafe { Management::open(jni) } {
            Ok(m) => {
                log_debug!("collections counted by {}", m.described);
                if m.generational_concurrent {
                    log_warn!(
                        "live heap under generational ZGC: a snapshot taken between two major \
                         cycles may count objects that died young, and the heap may hold them \
                         until a major cycle (only major cycles clear the weak references it \
                         keeps); snapshots after a major cycle are exact; G1 and Parallel have \
                         neither limit"
                    );
                }
                Some(m)
            }
            Err(e) => {
                log_warn!(
                    "the JVM's collector beans cannot be read ({e}): no heap-after-collection \
                     metric, and the live heap counts an object as live after {PAUSES_NEEDED} \
                     collection pauses (exact for G1, approximate for concurrent collectors)"
                );
                None
            }
        };
        let finished = gc::finished();
        let mut watch = GcWatch {
            survival: Survival {
                finished_at_read: finished,
                count: finished,
                needed: management
                    .as_ref()
                    .map_or(PAUSES_NEEDED, |m| m.survivals_needed),
            },
            management,
            heap_read: None,
        };
        // SAFETY: per this function's contract.
        if !unsafe { watch.read_now(jni) } {
            // Found but unreadable: count pause ends from the start, never a mix of both.
            if let Some(m) = watch.management.take() {
                // SAFETY: per this function's contract.
                unsafe { m.close(jni) };
            }
            watch.survival = Survival {
                finished_at_read: finished,
                count: finished,
                needed: PAUSES_NEEDED,
            };
            log_warn!("the collector beans cannot be read; the live heap counts pause ends");
        }
        watch
    }

    pub(crate) fn survival(&self) -> &Survival {
        &self.survival
    }

    /// Reads the count when a pause ended since the last read, and the heap after
    /// collection when due. Before each drain: the samples about to be taken in get their
    /// epoch from a fresh count.
    ///
    /// # Safety
    /// As for [`GcWatch::open`].
    pub(crate) unsafe fn follow(&mut self, jni: *mut JNIEnv) {
        if gc::finished() != self.survival.finished_at_read {
            // SAFETY: per this function's contract.
            unsafe { self.read_now(jni) };
        }
        let now = Instant::now();
        let count = self.survival.count;
        let due = self
            .heap_read
            .is_none_or(|(c, at)| c != count && now - at >= HEAP_READ_EVERY);
        if let (true, Some(m)) = (due, &self.management) {
            // SAFETY: per this function's contract.
            if let Some(used) = unsafe { m.heap_used_after_gc(jni) } {
                COUNTERS.heap_after_gc.store(used, Relaxed);
            }
            self.heap_read = Some((count, now));
        }
    }

    /// Reads the collections counted; false if the beans could not be read (the last count
    /// stands).
    ///
    /// # Safety
    /// As for [`GcWatch::open`].
    unsafe fn read_now(&mut self, jni: *mut JNIEnv) -> bool {
        // Pause ends first: the count read after them holds at least their collections.
        let finished = gc::finished();
        let count = match &self.management {
            // SAFETY: per this function's contract.
            Some(m) => unsafe { m.collections(jni) },
            None => Some(finished),
        };
        let Some(count) = count else {
            return false;
        };
        self.survival.finished_at_read = finished;
        self.survival.count = count;
        if self.management.is_some() {
            COUNTERS.gc_collections.store(count, Relaxed);
        }
        true
    }

    /// Deletes the beans' references.
    ///
    /// # Safety
    /// As for [`GcWatch::open`].
    pub(crate) unsafe fn close(self, jni: *mut JNIEnv) {
        if let Some(m) = self.management {
            // SAFETY: per this function's contract.
            unsafe { m.close(jni) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survival_needs_a_collection_after_the_allocation() {
        // 10 collections counted when 20 pauses had ended; one collection needed.
        let s = Survival {
            finished_at_read: 20,
            count: 10,
            needed: 1,
        };
        // Allocated before the read: the read's count is its epoch.
        assert_eq!(s.epoch(18), 10);
        // Allocated after two more pauses ended: either may have been a collection.
        assert_eq!(s.epoch(22), 12);
        let later = Survival { count: 11, ..s };
        assert!(!s.survived(10));
        assert!(later.survived(10));
        assert!(!later.survived(12));
        // Pause ends wrap in the record (u32): still ordered.
        let wrapped = Survival {
            finished_at_read: u64::from(u32::MAX) - 1,
            count: 5,
            needed: 2,
        };
        assert_eq!(wrapped.epoch(1), 5 + 3);
        assert_eq!(wrapped.epoch(u32::MAX - 3), 5);
    }
}
