//! How a signal handler wakes the thread that drains the sample buffer.
//!
//! The drainer sleeps on a futex word with a timeout. A writer that finds an arena past half
//! full rings: one atomic swap, and, for the first ring since the drainer last listened,
//! an increment and a `FUTEX_WAKE` system call, both async-signal-safe. So the drainer wakes
//! at its timeout, or sooner when the arenas fill faster than that, and a ring costs a system
//! call once per drain at most, however many writers pass the mark.
//!
//! Owners (a stop, a dump) call [`Doorbell::wake`], which always increments and wakes.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

pub(crate) struct Doorbell {
    /// The futex word: changes on every ring that wakes and on every owner's wake, so a
    /// drainer that read it before sleeping never sleeps through one.
    seq: AtomicU32,
    /// Set by the first ring since the drainer last listened; cleared by [`Doorbell::wait`].
    rung: AtomicBool,
}

impl Doorbell {
    pub(crate) const fn new() -> Doorbell {
        Doorbell {
            seq: AtomicU32::new(0),
            rung: AtomicBool::new(false),
        }
    }

    /// Asks the drainer to drain now.
    ///
    /// # Signal safety
    /// An atomic swap, and at most one atomic add and one `futex` system call; no allocation,
    /// no lock, no thread-local.
    #[inline]
    pub(crate) fn ring(&self) {
        if !self.rung.swap(true, Ordering::AcqRel) {
            self.wake();
        }
    }

    /// Ends a [`Doorbell::wait`] under way, or the next one.
    ///
    /// # Signal safety
    /// As [`Doorbell::ring`].
    pub(crate) fn wake(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        // SAFETY: FUTEX_WAKE on a live, aligned u32 of this process.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.seq.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            )
        };
    }

    /// Sleeps until a ring or a wake, or for `timeout`, unless `asked` (the owner's flags,
    /// set before its [`Doorbell::wake`]) says there is work already. Returns whether a writer
    /// rang (since the last call, or during this one). Spurious returns are harmless: the
    /// caller drains.
    pub(crate) fn wait(&self, timeout: Duration, asked: impl FnOnce() -> bool) -> bool {
        // Read before the flags: a wake that comes after the flags were read changes the
        // word, and the futex call below then returns at once.
        let seen = self.seq.load(Ordering::Acquire);
        if self.rung.swap(false, Ordering::AcqRel) {
            return true;
        }
        if asked() {
            return false;
        }
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: FUTEX_WAIT on a live, aligned u32 of this process, with a relative timeout
        // that outlives the call. It returns at once when the word is no longer `seen` (a ring
        // or a wake came between the load above and the call), else on a wake or the timeout.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.seq.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                &ts as *const libc::timespec,
            )
        };
        self.rung.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_quiet_bell_waits_the_timeout_and_a_ring_ends_the_wait() {
        let bell = Arc::new(Doorbell::new());
        let start = Instant::now();
        assert!(!bell.wait(Duration::from_millis(60), || false));
        assert!(start.elapsed() >= Duration::from_millis(60));

        // A ring before the wait is not lost, and is answered once.
        bell.ring();
        bell.ring();
        let start = Instant::now();
        assert!(bell.wait(Duration::from_secs(10), || false));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!bell.wait(Duration::from_millis(10), || false));

        // A ring from another thread during the wait ends it.
        let other = bell.clone();
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.ring();
        });
        let start = Instant::now();
        assert!(bell.wait(Duration::from_secs(10), || false));
        assert!(start.elapsed() < Duration::from_secs(5));
        ringer.join().unwrap();

        // An owner's wake ends the wait without counting as a ring.
        let other = bell.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.wake();
        });
        let start = Instant::now();
        assert!(!bell.wait(Duration::from_secs(10), || false));
        assert!(start.elapsed() < Duration::from_secs(5));
        waker.join().unwrap();

        // Work the owner asked for before the wait does not wait.
        let start = Instant::now();
        assert!(!bell.wait(Duration::from_secs(10), || true));
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
