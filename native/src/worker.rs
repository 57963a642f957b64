//! Start/stop handshake of the agent's own threads (the aggregator, the wall-clock thread):
//! the owner asks for a stop and waits a bounded time for the thread to say it is done, so a
//! JVM never hangs at exit because of us.
#![forbid(unsafe_code)]

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the owner and the thread tell each other.
#[derive(Default)]
pub(crate) struct Control {
    /// Set by the owner: finish up and return.
    pub(crate) stop: bool,
    /// Set by the thread on its way out, whatever path it took.
    pub(crate) done: bool,
}

pub(crate) type Shared = (Mutex<Control>, Condvar);

/// Called by the thread as it ends.
pub(crate) fn mark_done(shared: &Shared) {
    let (lock, cv) = shared;
    lock.lock().unwrap_or_else(|p| p.into_inner()).done = true;
    cv.notify_all();
}

/// Asks the thread to stop and waits at most `timeout` for it. Returns false on timeout.
pub(crate) fn stop_and_wait(shared: &Shared, timeout: Duration) -> bool {
    let (lock, cv) = shared;
    let mut c = lock.lock().unwrap_or_else(|p| p.into_inner());
    c.stop = true;
    cv.notify_all();
    let deadline = Instant::now() + timeout;
    while !c.done {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        c = match cv.wait_timeout(c, deadline - now) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
    }
    true
}

/// A fresh handshake for a new thread (one side for the owner, a clone for the thread).
pub(crate) fn shared() -> std::sync::Arc<Shared> {
    std::sync::Arc::new((Mutex::new(Control::default()), Condvar::new()))
}
