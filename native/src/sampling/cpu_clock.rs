//! What samples each thread's CPU: a perf event ([`super::perf_events`]) or a POSIX timer on
//! its CPU clock ([`super::timers`]), chosen once per session ([`CpuClock`]) and started per
//! thread ([`ThreadSampler`]). A thread whose event cannot be opened (descriptors or locked
//! memory exhausted) gets a timer instead, so it is still sampled, at the timer's resolution.
//!
//! Retiring a thread's event from another thread (a late start taking over the thread scan's
//! entry, or a session stop) closes its descriptor at once but keeps its ring mapped until no
//! handler can be reading it ([`unmap_retired`], after sampling is quiesced): only the
//! event's own thread reads a ring, in its handler, and that may be happening right then.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::sampling::perf_events::{PerfConfig, PerfEvent};
use crate::sampling::timers::ThreadCpuTimer;
use crate::stats::{self, COUNTERS};

/// How every thread's CPU is sampled in a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CpuClock {
    /// A POSIX timer on the thread's CPU clock.
    Timer {
        interval: Duration,
        signo: libc::c_int,
    },
    /// A perf `cpu-clock` event.
    Perf(PerfConfig),
}

impl CpuClock {
    pub(crate) fn interval(&self) -> Duration {
        match self {
            CpuClock::Timer { interval, .. } => *interval,
            CpuClock::Perf(c) => c.interval,
        }
    }

    /// Starts sampling thread `tid`.
    pub(crate) fn start(&self, tid: libc::pid_t) -> io::Result<ThreadSampler> {
        match self {
            CpuClock::Timer { interval, signo } => {
                let id = ThreadCpuTimer::start(tid, *signo, *interval)?;
                stats::bump(&COUNTERS.timers_created);
                Ok(ThreadSampler::Timer(id))
            }
            CpuClock::Perf(config) => match PerfEvent::open(tid, config) {
                Ok(event) => {
                    stats::bump(&COUNTERS.perf_events_opened);
                    Ok(ThreadSampler::Perf(event))
                }
                // A thread that ended since it was listed: no fallback either.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Err(e),
                Err(e) => {
                    stats::bump(&COUNTERS.perf_fallbacks);
                    note_fallback(tid, &e);
                    let id = ThreadCpuTimer::start(tid, config.signo, config.interval)?;
                    stats::bump(&COUNTERS.timers_created);
                    Ok(ThreadSampler::Timer(id))
                }
            },
        }
    }
}

/// One line the first time a thread falls back to a timer.
fn note_fallback(tid: libc::pid_t, e: &io::Error) {
    static TOLD: AtomicBool = AtomicBool::new(false);
    if !TOLD.swap(true, Ordering::Relaxed) {
        log_warn!(
            "cannot open a perf event for thread {tid}: {e}; such threads get a CPU timer \
             instead (tick-bound, no kernel frames)"
        );
    }
}

/// What samples one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadSampler {
    /// A POSIX timer id.
    Timer(u64),
    Perf(PerfEvent),
}

impl ThreadSampler {
    /// Stops it for good, called on the thread it samples, or once that thread has ended, or
    /// once no handler runs.
    pub(crate) fn stop(self) {
        match self {
            ThreadSampler::Timer(id) => delete_timer(id),
            ThreadSampler::Perf(event) => {
                event.close_fd();
                // SAFETY: per this function's contract, no handler reads the ring.
                unsafe { event.unmap() };
                stats::bump(&COUNTERS.perf_events_closed);
            }
        }
    }

    /// Stops it from any thread while handlers may run: a ring is unmapped later
    /// ([`unmap_retired`]).
    pub(crate) fn retire(self) {
        match self {
            ThreadSampler::Timer(id) => delete_timer(id),
            ThreadSampler::Perf(event) => {
                event.close_fd();
                stats::bump(&COUNTERS.perf_events_closed);
                RETIRED
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(event);
            }
        }
    }
}

fn delete_timer(id: u64) {
    match ThreadCpuTimer::delete(id) {
        Ok(()) => stats::bump(&COUNTERS.timers_deleted),
        Err(_) => stats::bump(&COUNTERS.timer_errors),
    }
}

/// Events closed by [`ThreadSampler::retire`] whose rings are still mapped.
static RETIRED: Mutex<Vec<PerfEvent>> = Mutex::new(Vec::new());

/// Unmaps the rings of retired events.
///
/// # Safety
/// No handler runs: sampling is off and quiesced.
pub(crate) unsafe fn unmap_retired() {
    let retired = std::mem::take(&mut *RETIRED.lock().unwrap_or_else(|p| p.into_inner()));
    for event in retired {
        // SAFETY: per this function's contract.
        unsafe { event.unmap() };
    }
}
