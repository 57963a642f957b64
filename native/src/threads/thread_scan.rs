//! The `otelprof-threads` thread: scans `/proc/self/task` from profiling start to stop, so
//! that the CPU profile covers every thread of the process, not only the Java threads JVMTI
//! announces ([`crate::threads::native_threads`] says what a scan does).
//!
//! A plain native thread: it makes no JVMTI or JNI call, so it is not attached to the VM.
//! It is itself one of the threads it finds (role `[otelprof]`), like the agent's other
//! threads: what profiling costs shows in the profile.
//!
//! # How often
//!
//! The first scan runs at once (the JVM's threads have been running since before the agent
//! started). After that, a scan is repeated after 1000 times the CPU time the last one took,
//! but at least every [`MAX_EVERY`] and at most every [`MIN_EVERY`]. Listing
//! `/proc/self/task` is most of a scan's cost, and it grows with the number of threads:
//! about 80 µs of CPU for a JVM with 20 threads, 0.3 ms with 200 and 2.5 ms with 2000 (on
//! a virtual machine with 2 vCPUs). So scanning costs at most 0.1 % of one CPU up to
//! about a thousand threads, 0.25 % at 2000, and a thread started between two scans waits
//! 100 ms to 1 s to be seen. The CPU it used meanwhile is credited when it is found, so the
//! interval bounds how late that CPU is dated, not how much of it is counted.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::sampling::signal_handler::Sampler;
use crate::stats::COUNTERS;
use crate::threads::native_threads::NativeThreads;
use crate::threads::{process_threads, thread_registry};
use crate::worker::{self, Shared, Worker};

/// Shortest time between two scans.
const MIN_EVERY: Duration = Duration::from_millis(100);
/// Longest time between two scans.
const MAX_EVERY: Duration = Duration::from_secs(1);
/// Scans cost at most 1/SCAN_COST_RATIO of one CPU.
const SCAN_COST_RATIO: u32 = 1000;

/// Handle to the running `otelprof-threads` thread.
pub(crate) struct ThreadScan {
    worker: Worker,
}

/// What the scan needs.
pub(crate) struct Config {
    pub(crate) sampler: &'static Sampler,
    /// What samples the CPU of the threads found; `None` under `clock=itimer`.
    pub(crate) clock: Option<crate::sampling::cpu_clock::CpuClock>,
    /// Whether the CPU the threads of the first scan used before it is credited: yes when
    /// profiling starts with the JVM (that CPU is its start-up), no when it starts later (that
    /// CPU was spent before anyone asked for a profile).
    pub(crate) credit_first_scan: bool,
}

impl ThreadScan {
    pub(crate) fn start(config: Config) -> std::io::Result<ThreadScan> {
        // Java threads that end from now on leave their CPU time for the scan; set before
        // the first scan, so no end falls between.
        thread_registry::note_ends(true);
        let spawned = Worker::spawn("otelprof-threads", move |control| {
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(config, &control)));
            if result.is_err() {
                log_error!(
                    "internal error in the thread scan; only Java threads are profiled from now on"
                );
            }
            thread_registry::note_ends(false);
            worker::mark_done(&control);
        });
        match spawned {
            Ok(worker) => Ok(ThreadScan { worker }),
            Err(e) => {
                thread_registry::note_ends(false);
                Err(e)
            }
        }
    }

    /// Stops the scan and waits at most `timeout` for it. Returns false on timeout.
    pub(crate) fn stop(&self, timeout: Duration) -> bool {
        self.worker.stop(timeout)
    }
}

/// The pause after a scan that took `cost` of CPU (see the module docs).
fn pause_after(cost: Duration) -> Duration {
    cost.saturating_mul(SCAN_COST_RATIO)
        .clamp(MIN_EVERY, MAX_EVERY)
}

fn run(config: Config, control: &Shared) {
    let mut threads = NativeThreads::new(config.sampler, config.clock);
    threads.credit_next_scan(config.credit_first_scan);
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let (lock, cv) = control;
    loop {
        if !thread_registry::running() {
            return;
        }
        let before = process_threads::cpu_time(me).unwrap_or_default();
        match threads.scan() {
            Ok(outcome) => {
                if outcome.found > 0 || outcome.gone > 0 {
                    log_debug!(
                        "thread scan: {} threads, {} found, {} gone",
                        outcome.listed,
                        outcome.found,
                        outcome.gone
                    );
                }
            }
            Err(e) => {
                log_warn!(
                    "cannot list this process's threads in /proc/self/task: {e}; only Java threads are profiled"
                );
                return;
            }
        }
        let cost = process_threads::cpu_time(me)
            .unwrap_or_default()
            .saturating_sub(before);
        COUNTERS.thread_scan_cpu_us.fetch_add(
            u64::try_from(cost.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let c = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (c, _) = match cv.wait_timeout_while(c, pause_after(cost), |c| !c.stop) {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        if c.stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_cost_a_thousandth_of_a_cpu_between_bounds() {
        assert_eq!(pause_after(Duration::ZERO), MIN_EVERY);
        assert_eq!(pause_after(Duration::from_micros(50)), MIN_EVERY);
        assert_eq!(
            pause_after(Duration::from_micros(300)),
            Duration::from_millis(300)
        );
        assert_eq!(pause_after(Duration::from_millis(5)), MAX_EVERY);
    }
}
