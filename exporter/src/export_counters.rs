//! What the exporter did: attempts, failures by disposition, bytes sent, drops by reason,
//! and the queue they happened around; read by logs, the agent's own metrics and tests.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::queue::ByteQueue;

/// What the exporter did, for logs, metrics and tests.
#[derive(Debug)]
pub struct ExportCounters {
    pub(crate) queue: ByteQueue,
    pub(crate) attempts: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) retryable: AtomicU64,
    pub(crate) throttled: AtomicU64,
    pub(crate) permanent: AtomicU64,
    /// Requests dropped after retrying for their whole retry budget.
    pub(crate) retries_exhausted: AtomicU64,
    pub(crate) partially_rejected: AtomicU64,
    pub(crate) encode_errors: AtomicU64,
    pub(crate) unsent_at_exit: AtomicU64,
    pub(crate) metrics_exports: AtomicU64,
    pub(crate) metrics_failures: AtomicU64,
}

/// A copy of [`ExportCounters`] at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    pub attempts: u64,
    pub sent: u64,
    pub bytes_sent: u64,
    pub retryable_failures: u64,
    pub throttled: u64,
    pub permanent_failures: u64,
    /// Requests dropped because they still failed when their retry budget ran out.
    pub retries_exhausted: u64,
    pub partially_rejected: u64,
    pub dropped_queue_full: u64,
    pub encode_errors: u64,
    pub unsent_at_exit: u64,
    pub queued: u64,
    pub queued_bytes: u64,
    pub metrics_exports: u64,
    pub metrics_failures: u64,
}

impl ExportCounters {
    pub(crate) fn new(queue_bytes: usize) -> ExportCounters {
        ExportCounters {
            queue: ByteQueue::new(queue_bytes),
            attempts: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            retryable: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            permanent: AtomicU64::new(0),
            retries_exhausted: AtomicU64::new(0),
            partially_rejected: AtomicU64::new(0),
            encode_errors: AtomicU64::new(0),
            unsent_at_exit: AtomicU64::new(0),
            metrics_exports: AtomicU64::new(0),
            metrics_failures: AtomicU64::new(0),
        }
    }

    pub(crate) fn attempts(&self) -> u64 {
        self.attempts.load(Relaxed)
    }

    pub(crate) fn bytes_sent(&self) -> u64 {
        self.bytes_sent.load(Relaxed)
    }

    pub(crate) fn queued_bytes(&self) -> u64 {
        self.queue.bytes() as u64
    }

    /// Failed attempts by what happened next.
    pub(crate) fn failures(&self) -> [(&'static str, u64); 3] {
        [
            ("retried", self.retryable.load(Relaxed)),
            ("throttled", self.throttled.load(Relaxed)),
            (
                "dropped",
                self.permanent.load(Relaxed) + self.retries_exhausted.load(Relaxed),
            ),
        ]
    }

    /// Profiles that never reached a receiver, by reason.
    pub(crate) fn dropped(&self) -> [(&'static str, u64); 5] {
        [
            (
                "queue_full",
                self.queue.counters.dropped_items.load(Relaxed),
            ),
            ("rejected", self.permanent.load(Relaxed)),
            ("retries_exhausted", self.retries_exhausted.load(Relaxed)),
            ("encode_error", self.encode_errors.load(Relaxed)),
            ("unsent_at_exit", self.unsent_at_exit.load(Relaxed)),
        ]
    }

    pub fn stats(&self) -> ExportStats {
        ExportStats {
            attempts: self.attempts(),
            sent: self.sent.load(Relaxed),
            bytes_sent: self.bytes_sent(),
            retryable_failures: self.retryable.load(Relaxed),
            throttled: self.throttled.load(Relaxed),
            permanent_failures: self.permanent.load(Relaxed),
            retries_exhausted: self.retries_exhausted.load(Relaxed),
            partially_rejected: self.partially_rejected.load(Relaxed),
            dropped_queue_full: self.queue.counters.dropped_items.load(Relaxed),
            encode_errors: self.encode_errors.load(Relaxed),
            unsent_at_exit: self.unsent_at_exit.load(Relaxed),
            queued: self.queue.len() as u64,
            queued_bytes: self.queued_bytes(),
            metrics_exports: self.metrics_exports.load(Relaxed),
            metrics_failures: self.metrics_failures.load(Relaxed),
        }
    }
}
