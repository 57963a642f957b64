//! The bounded queue between the profile producer (the agent's aggregator thread) and the
//! export thread.
//!
//! Bounded in bytes, not items: a profile's size varies with the application. When a new
//! item would exceed the bound, the oldest items are dropped and counted: fresh data is
//! worth more than old, and Pyroscope refuses data older than an hour anyway. `push` never
//! waits for the consumer; its lock is only ever held for a few pointer moves.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use bytes::Bytes;

/// An encoded export request waiting to be sent.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub(crate) seq: u64,
    pub(crate) bytes: Bytes,
}

#[derive(Debug, Default)]
struct State {
    items: VecDeque<Item>,
    bytes: usize,
    next_seq: u64,
}

/// Counters of what the queue refused or dropped.
#[derive(Debug, Default)]
pub(crate) struct QueueCounters {
    pub(crate) dropped_items: AtomicU64,
    pub(crate) dropped_bytes: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct ByteQueue {
    state: Mutex<State>,
    limit: usize,
    pub(crate) counters: QueueCounters,
}

impl ByteQueue {
    pub(crate) fn new(limit: usize) -> ByteQueue {
        ByteQueue {
            state: Mutex::new(State::default()),
            limit,
            counters: QueueCounters::default(),
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves the queue consistent (every mutation is
        // a single push/pop plus a counter), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count_drop(&self, bytes: usize) {
        self.counters.dropped_items.fetch_add(1, Relaxed);
        self.counters.dropped_bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// Appends `bytes`, dropping the oldest items while over the bound. An item larger than
    /// the whole bound is dropped itself. Returns the number of items dropped.
    pub(crate) fn push(&self, bytes: Bytes) -> usize {
        if bytes.len() > self.limit {
            self.count_drop(bytes.len());
            return 1;
        }
        let mut s = self.lock();
        let mut dropped = 0;
        while s.bytes + bytes.len() > self.limit {
            let Some(old) = s.items.pop_front() else {
                break;
            };
            s.bytes -= old.bytes.len();
            self.count_drop(old.bytes.len());
            dropped += 1;
        }
        s.bytes += bytes.len();
        let seq = s.next_seq;
        s.next_seq += 1;
        s.items.push_back(Item { seq, bytes });
        dropped
    }

    /// The oldest item, left in the queue (it stays subject to dropping while it is being
    /// sent, so a long outage cannot hold more than the bound plus this one item).
    pub(crate) fn peek(&self) -> Option<Item> {
        self.lock().items.front().cloned()
    }

    /// Removes the item `seq` if it is still queued (it may have been dropped meanwhile).
    pub(crate) fn remove(&self, seq: u64) -> bool {
        let mut s = self.lock();
        match s.items.iter().position(|i| i.seq == seq) {
            Some(pos) => {
                if let Some(item) = s.items.remove(pos) {
                    s.bytes -= item.bytes.len();
                }
                true
            }
            None => false,
        }
    }

    /// Bytes queued now.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().items.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn drops_oldest_when_full() {
        let q = ByteQueue::new(10);
        assert_eq!(q.push(Bytes::from(vec![1; 4])), 0);
        assert_eq!(q.push(Bytes::from(vec![2; 4])), 0);
        assert_eq!(q.push(Bytes::from(vec![3; 4])), 1);
        assert_eq!(q.peek().unwrap().bytes[0], 2);
        assert_eq!(q.bytes(), 8);
        assert_eq!(q.push(Bytes::from(vec![4; 11])), 1, "larger than the bound");
        assert_eq!(q.counters.dropped_items.load(Relaxed), 2);
        assert_eq!(q.counters.dropped_bytes.load(Relaxed), 15);
        let head = q.peek().unwrap();
        assert!(q.remove(head.seq));
        assert!(!q.remove(head.seq));
        assert_eq!(q.len(), 1);
    }

    proptest! {
        #[test]
        fn never_exceeds_its_bound(sizes in prop::collection::vec(0usize..40, 0..200), limit in 1usize..100) {
            let q = ByteQueue::new(limit);
            let mut total = 0u64;
            for (i, n) in sizes.iter().enumerate() {
                q.push(Bytes::from(vec![0; *n]));
                total += *n as u64;
                prop_assert!(q.bytes() <= limit);
                if i % 7 == 0 {
                    if let Some(h) = q.peek() { q.remove(h.seq); total -= h.bytes.len() as u64; }
                }
            }
            prop_assert_eq!(q.bytes() as u64 + q.counters.dropped_bytes.load(Relaxed), total);
        }
    }
}
