//! What an authenticated request passes before its body is read: one of a fixed number of
//! slots (so at most that many bodies are in memory and being stored at once, over every
//! connection), and a deadline for its body. A request that cannot get a slot in time is
//! answered "busy", which OTLP clients retry (gRPC UNAVAILABLE, HTTP 503).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::deadline_body::DeadlineBody;

#[derive(Debug)]
pub struct RequestGate {
    slots: Arc<Semaphore>,
    size: usize,
    wait: Duration,
    body_timeout: Duration,
}

/// Every slot stayed taken for the whole wait.
#[derive(Debug)]
pub struct Busy {
    pub slots: usize,
    pub waited: Duration,
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "busy: {} requests are being stored and none finished within {:?}; retry later",
            self.slots, self.waited
        )
    }
}

/// A request's slot, held until dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    body_timeout: Duration,
}

impl RequestGate {
    pub fn new(slots: usize, wait: Duration, body_timeout: Duration) -> RequestGate {
        RequestGate {
            slots: Arc::new(Semaphore::new(slots)),
            size: slots,
            wait,
            body_timeout,
        }
    }

    /// Waits for a slot, at most the gate's wait.
    pub async fn enter(&self) -> Result<Slot, Busy> {
        let busy = || Busy {
            slots: self.size,
            waited: self.wait,
        };
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Slot {
                _permit: permit,
                body_timeout: self.body_timeout,
            }),
            // The semaphore is never closed; a closed one is as good as no slot.
            Ok(Err(_)) | Err(_) => Err(busy()),
        }
    }
}

impl Slot {
    /// `body`, which must now arrive within the body timeout.
    pub fn read<B>(&self, body: B) -> DeadlineBody<B> {
        DeadlineBody::new(body, self.body_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn the_slots_are_few_and_a_full_gate_says_busy() {
        let gate = RequestGate::new(2, Duration::from_millis(50), Duration::from_secs(1));
        let a = gate.enter().await.unwrap();
        let _b = gate.enter().await.unwrap();
        let busy = gate.enter().await.err().unwrap();
        assert!(busy.to_string().contains("2 requests"), "{busy}");
        drop(a);
        assert!(gate.enter().await.is_ok(), "a slot freed is taken");
    }
}
