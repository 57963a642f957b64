//! The live heap's table: one entry per tracked object, bounded, owned by the aggregator
//! thread (no lock: only that thread inserts, checks and removes).
//!
//! When the table is nearly full the live heap raises its sampling interval and thins the
//! table to match ([`LiveTable::thin`]): an entry sampled at interval `I` (inclusion
//! probability `p(s, I)`) is kept with probability `p(s, I') / p(s, I)` for the new interval
//! `I'`, and weighs `s / p(s, I')` from then on. Two independent draws compose: a kept entry
//! was included with probability exactly `p(s, I')`, so the estimates stay unbiased, and the
//! table keeps a fair sample of old and young objects alike (refusing new samples instead
//! would keep the oldest survivors only).
#![forbid(unsafe_code)]

use crate::engines::alloc::{estimate, inclusion};
use crate::live::SpanKey;

/// One tracked object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The JNI weak global reference to the object (owned: deleted when the entry goes).
    pub(crate) weak: u64,
    pub(crate) size: u64,
    /// The interval its inclusion probability is computed with (bytes).
    pub(crate) interval: u64,
    /// The collection count the object must exceed to count as live ([`super::Survival`]).
    pub(crate) epoch: u64,
    /// Allocation stack, allocated class and thread name ([`super::stacks::LiveStacks`] ids).
    pub(crate) stack: u32,
    pub(crate) class_id: u32,
    /// The thread's registration serial and kernel id; its name once known (0 before).
    pub(crate) serial: u64,
    pub(crate) tid: i32,
    pub(crate) thread_name: u32,
    pub(crate) span: Option<SpanKey>,
    /// The endpoint's name id once known (0: none yet, or none).
    pub(crate) endpoint: u32,
}

impl Entry {
    /// Estimated `(bytes, objects x 1000)` the entry stands for.
    pub(crate) fn estimate(&self) -> (u64, u64) {
        estimate(self.size, self.interval)
    }
}

pub(crate) struct LiveTable {
    entries: Vec<Entry>,
    capacity: usize,
}

impl LiveTable {
    /// A table of at most `capacity` entries, allocated now.
    pub(crate) fn new(capacity: usize) -> LiveTable {
        LiveTable {
            entries: Vec::with_capacity(capacity),
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether at least `percent` % of the table is used.
    pub(crate) fn filled(&self, percent: usize) -> bool {
        self.entries.len() * 100 >= self.capacity * percent
    }

    /// Adds an entry; a full table gives it back.
    pub(crate) fn push(&mut self, entry: Entry) -> Result<(), Entry> {
        if self.entries.len() >= self.capacity {
            return Err(entry);
        }
        self.entries.push(entry);
        Ok(())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.entries.iter_mut()
    }

    /// Keeps the entries `keep` says to keep; hands every other to `removed`. Returns the
    /// number removed.
    pub(crate) fn retain(
        &mut self,
        mut keep: impl FnMut(&Entry) -> bool,
        mut removed: impl FnMut(Entry),
    ) -> usize {
        let mut gone = 0;
        let mut i = 0;
        while i < self.entries.len() {
            if keep(&self.entries[i]) {
                i += 1;
            } else {
                removed(self.entries.swap_remove(i));
                gone += 1;
            }
        }
        gone
    }

    /// Thins the table to interval `interval`: each entry sampled at a shorter one is kept
    /// with probability `p(size, interval) / p(size, its interval)` (`draw` gives uniform
    /// numbers in [0, 1)) and then weighs as sampled at `interval`. Returns the number dropped
    /// (handed to `removed`).
    pub(crate) fn thin(
        &mut self,
        interval: u64,
        mut draw: impl FnMut() -> f64,
        removed: impl FnMut(Entry),
    ) -> usize {
        let gone = self.retain(
            |e| {
                if e.interval >= interval {
                    return true;
                }
                let was = inclusion(e.size, e.interval);
                was <= 0.0 || draw() < inclusion(e.size, interval) / was
            },
            removed,
        );
        for e in &mut self.entries {
            e.interval = e.interval.max(interval);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use otelprof_primitives::rng::SplitMix64;

    fn entry(weak: u64, size: u64, interval: u64) -> Entry {
        Entry {
            weak,
            size,
            interval,
            epoch: 0,
            stack: 0,
            class_id: 0,
            serial: 0,
            tid: 0,
            thread_name: 0,
            span: None,
            endpoint: 0,
        }
    }

    #[test]
    fn the_table_is_bounded_and_gives_back_what_it_removes() {
        let mut t = LiveTable::new(4);
        for w in 1..=4 {
            t.push(entry(w, 16, 1024)).unwrap();
        }
        assert!(t.filled(100));
        assert_eq!(t.push(entry(5, 16, 1024)).unwrap_err().weak, 5);
        let mut removed = Vec::new();
        assert_eq!(t.retain(|e| e.weak % 2 == 0, |e| removed.push(e.weak)), 2);
        removed.sort();
        assert_eq!(removed, [1, 3]);
        assert_eq!(t.len(), 2);
        assert!(t.filled(50) && !t.filled(51));
    }

    /// Objects of mixed sizes sampled (in a simulation of HotSpot's sampler) at one interval,
    /// then the table thinned twice: the estimated bytes and objects still add up to the
    /// truth, and what is left matches the new interval.
    #[test]
    fn thinning_keeps_the_estimates_unbiased() {
        let sizes = [24u64, 48, 512, 4_096, 65_536];
        let (first, later) = (1_024u64, 8_192u64);
        let mut r = SplitMix64(7);
        let mut t = LiveTable::new(1 << 20);
        let mut truth = (0u64, 0u64);
        let mut until = -(1.0 - r.next_f64()).ln() * first as f64;
        for i in 0..400_000u64 {
            let size = sizes[(i % 5) as usize];
            truth.0 += size;
            truth.1 += 1;
            if (size as f64) < until {
                until -= size as f64;
                continue;
            }
            t.push(entry(i + 1, size, first)).unwrap();
            until = -(1.0 - r.next_f64()).ln() * first as f64;
        }
        let sum = |t: &LiveTable| {
            t.iter().fold((0.0, 0.0), |(b, o), e| {
                let (eb, eo) = e.estimate();
                (b + eb as f64, o + eo as f64 / 1000.0)
            })
        };
        let before = t.len();
        let small = |t: &LiveTable| t.iter().filter(|e| e.size == 24).count() as f64;
        let small_before = small(&t);
        let mut dropped = 0;
        for interval in [2 * first, later] {
            dropped += t.thin(interval, || r.next_f64(), |_| {});
        }
        assert_eq!(before - t.len(), dropped);
        // Small objects, sampled in proportion to the interval, thin out eightfold; objects
        // far above both intervals stay.
        let kept = small(&t) / small_before;
        assert!((0.10..0.15).contains(&kept), "{kept}");
        // p(64 KiB, 8 KiB) = 1 - exp(-8): all but about 27 of 80,000 stay.
        let large = t.iter().filter(|e| e.size == 65_536).count();
        assert!((79_900..=80_000).contains(&large), "{large}");
        assert!(t.iter().all(|e| e.interval == later));
        let (bytes, objects) = sum(&t);
        let (b, o) = (bytes / truth.0 as f64, objects / truth.1 as f64);
        assert!((0.97..1.03).contains(&b), "bytes {b}");
        assert!((0.95..1.05).contains(&o), "objects {o}");
    }
}
