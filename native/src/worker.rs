//! Start/stop handshake of the agent's own threads (the aggregator, the wall-clock thread,
//! the thread scan): the owner asks for a stop and waits a bounded time for the thread to say
//! it is done, then joins it, so a JVM never hangs at exit because of us and a stopped agent
//! leaves no thread behind.
#![forbid(unsafe_code)]

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the owner and the thread tell each other.
#[derive(Default)]
pub(crate) struct Control {
    /// Set by the owner: finish up and return.
    pub(crate) stop: bool,
    /// Set by the owner: do the on-demand work now (the aggregator's dump).
    pub(crate) poke: bool,
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

/// Wakes the thread for its on-demand work.
pub(crate) fn poke(shared: &Shared) {
    let (lock, cv) = shared;
    lock.lock().unwrap_or_else(|p| p.into_inner()).poke = true;
    cv.notify_all();
}

/// Asks the thread to stop and waits at most `timeout` for it. Returns false on timeout.
/// `wake` is called once the stop is asked, for a thread that sleeps on something other than
/// the handshake's condition variable.
pub(crate) fn stop_and_wait(shared: &Shared, timeout: Duration, wake: &dyn Fn()) -> bool {
    let (lock, cv) = shared;
    let mut c = lock.lock().unwrap_or_else(|p| p.into_inner());
    c.stop = true;
    cv.notify_all();
    wake();
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
pub(crate) fn shared() -> Arc<Shared> {
    Arc::new((Mutex::new(Control::default()), Condvar::new()))
}

/// One of the agent's threads, as its owner holds it.
pub(crate) struct Worker {
    pub(crate) control: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Worker {
    /// Spawns `body` as thread `name`; `body` gets the thread's side of the handshake and
    /// must call [`mark_done`] on its way out.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(Arc<Shared>) + Send + 'static,
    ) -> std::io::Result<Worker> {
        let control = shared();
        let theirs = control.clone();
        let handle = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || body(theirs))?;
        Ok(Worker {
            control,
            handle: Mutex::new(Some(handle)),
        })
    }

    /// Asks the thread to stop and waits at most `timeout` for it to finish; once it has, it
    /// is joined (at once: it has returned from its work). Returns false on timeout, when the
    /// thread is left to finish alone.
    pub(crate) fn stop(&self, timeout: Duration) -> bool {
        self.stop_waking(timeout, &|| {})
    }

    /// As [`Worker::stop`], calling `wake` once the stop is asked (see [`stop_and_wait`]).
    pub(crate) fn stop_waking(&self, timeout: Duration, wake: &dyn Fn()) -> bool {
        if !stop_and_wait(&self.control, timeout, wake) {
            return false;
        }
        let handle = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_stops_joins_and_a_stuck_one_is_given_up() {
        let w = Worker::spawn("test-worker", |c| {
            let (lock, cv) = &*c;
            let mut g = lock.lock().unwrap();
            while !g.stop {
                g = cv.wait(g).unwrap();
            }
            drop(g);
            mark_done(&c);
        })
        .unwrap();
        assert!(w.stop(Duration::from_secs(5)));
        assert!(w.handle.lock().unwrap().is_none(), "joined");
        let stuck = Worker::spawn("test-stuck", |c| {
            std::thread::sleep(Duration::from_millis(300));
            mark_done(&c);
        })
        .unwrap();
        assert!(!stuck.stop(Duration::from_millis(10)));
        assert!(stuck.stop(Duration::from_secs(5)));
    }
}
