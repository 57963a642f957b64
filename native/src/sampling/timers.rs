//! The two CPU sampling engines.
//!
//! - [`ThreadCpuTimer`]: one POSIX timer per Java thread on that thread's CPU-time clock,
//!   delivering SIGPROF to that very thread (`SIGEV_THREAD_ID`). Each thread is sampled in
//!   proportion to the CPU it burns, whatever the other threads do.
//! - [`ProcessItimer`]: `setitimer(ITIMER_PROF)`, one timer for the process; the kernel sends
//!   SIGPROF to whichever thread was running. Cheaper to set up, coarser (and it also lands on
//!   JVM-internal threads).
//!
//! Timer expirations are checked on the scheduler tick, so intervals shorter than the tick are
//! rounded up by the kernel; the overrun count the kernel reports keeps the weights right.
//!
//! # The first expiration
//!
//! A per-thread timer counts whole intervals, so the CPU a thread uses after its last
//! expiration is never sampled. With the first expiration one full interval after the start,
//! every thread would lose half an interval on average, and a thread that never reaches one
//! interval would never be seen: on a JVM with a few dozen mostly idle threads (the VM's
//! housekeeping threads, compiler threads between compilations) that is a few percent of the
//! process's CPU missing from the profile, always in the same direction. So the first
//! expiration comes after a random fraction of the interval, drawn uniformly: a thread that
//! used `c` of CPU then gets `c / interval` expirations in expectation, whatever `c` is
//! (systematic sampling with a random start is unbiased). The later expirations keep the
//! regular interval, so what a thread's samples show is unchanged.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::sys::thread_cpu_clock;

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// A CPU-time timer of one thread.
pub(crate) struct ThreadCpuTimer;

impl ThreadCpuTimer {
    /// Creates and arms a timer on `tid`'s CPU clock that sends `signo` to `tid` every
    /// `interval` of that thread's CPU time, the first time after a random part of an
    /// interval (see the module docs). `tid` is any thread of this process. Returns the
    /// timer id.
    pub(crate) fn start(
        tid: libc::pid_t,
        signo: libc::c_int,
        interval: Duration,
    ) -> io::Result<u64> {
        // SAFETY: a zeroed sigevent is valid; we set the fields the kernel reads for
        // SIGEV_THREAD_ID.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = signo;
        sev.sigev_notify_thread_id = tid;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid clock id, sigevent and out pointer.
        if unsafe { libc::timer_create(thread_cpu_clock(tid), &mut sev, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let spec = libc::itimerspec {
            it_interval: timespec(interval),
            it_value: timespec(first_expiration(interval, random_fraction())),
        };
        // SAFETY: `timer` was just created; `spec` is valid.
        if unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } != 0 {
            let err = io::Error::last_os_error();
            // SAFETY: as above.
            unsafe { libc::timer_delete(timer) };
            return Err(err);
        }
        Ok(timer as usize as u64)
    }

    /// Deletes a timer made by [`ThreadCpuTimer::start`]. A signal it already queued may
    /// still arrive; the handler copes (the thread is unregistered or sampling is off).
    pub(crate) fn delete(id: u64) -> io::Result<()> {
        // SAFETY: deleting an unknown id fails with EINVAL, it cannot corrupt anything.
        if unsafe { libc::timer_delete(id as usize as libc::timer_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// When a timer with `interval` first expires: `fraction` (in [0, 1)) of the interval,
/// at least a nanosecond (a zero `it_value` would disarm the timer).
fn first_expiration(interval: Duration, fraction: f64) -> Duration {
    interval
        .mul_f64(fraction.clamp(0.0, 1.0))
        .max(Duration::from_nanos(1))
}

/// A number drawn uniformly from [0, 1): SplitMix64 over a shared counter, seeded from the
/// monotonic clock. Not for cryptography; only to place timer phases and round credits
/// without bias.
pub(crate) fn random_fraction() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    if STATE.load(Ordering::Relaxed) == 0 {
        let seed = crate::sampling::os::monotonic_ns() | 1;
        let _ = STATE.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
    }
    let mut z = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // The top 53 bits, as a double in [0, 1).
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Whole intervals standing for `cpu` (CPU a thread used before its timer started): the
/// whole intervals in it, plus one with the probability of the remainder's fraction of an
/// interval (`draw` uniform in [0, 1), e.g. [`random_fraction`]). Like the timers' own
/// samples, its expectation is exactly `cpu / interval`.
pub(crate) fn whole_intervals(cpu: Duration, interval: Duration, draw: f64) -> u64 {
    let interval = interval.as_nanos().max(1);
    let (whole, rest) = (cpu.as_nanos() / interval, cpu.as_nanos() % interval);
    let extra = draw < rest as f64 / interval as f64;
    u64::try_from(whole + u128::from(extra)).unwrap_or(u64::MAX)
}

/// The process-wide profiling interval timer.
pub(crate) struct ProcessItimer;

impl ProcessItimer {
    pub(crate) fn start(interval: Duration) -> io::Result<()> {
        Self::set(interval)
    }

    pub(crate) fn stop() -> io::Result<()> {
        Self::set(Duration::ZERO)
    }

    fn set(interval: Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: interval.as_secs() as libc::time_t,
            tv_usec: interval.subsec_micros() as libc::suseconds_t,
        };
        let it = libc::itimerval {
            it_interval: tv,
            it_value: tv,
        };
        // SAFETY: valid itimerval; the old value is not requested.
        if unsafe { libc::setitimer(libc::ITIMER_PROF, &it, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Burns `cpu` of this thread's CPU time (not wall time: a loaded machine stretches the
/// wall time, not the work). For tests.
#[cfg(test)]
pub(crate) fn burn_thread_cpu(cpu: Duration) {
    let now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let start = now();
    let mut x = 0u64;
    while now() - start < cpu {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    static HITS: AtomicU64 = AtomicU64::new(0);
    static WRONG_THREAD: AtomicU64 = AtomicU64::new(0);
    static TARGET: AtomicU64 = AtomicU64::new(0);
    /// The thread's CPU time when the last signal was handled.
    static CPU_AT_LAST_HIT_NS: AtomicU64 = AtomicU64::new(0);

    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out pointer; clock_gettime is async-signal-safe.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    extern "C" fn count(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo; TimerSigInfo is its timer prefix.
        let overrun = unsafe { (*(info as *const crate::sys::TimerSigInfo)).si_overrun };
        HITS.fetch_add(1 + overrun.max(0) as u64, Ordering::Relaxed);
        CPU_AT_LAST_HIT_NS.store(thread_cpu_ns(), Ordering::Relaxed);
        // SAFETY: gettid has no preconditions.
        if unsafe { libc::gettid() } as u64 != TARGET.load(Ordering::Relaxed) {
            WRONG_THREAD.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn thread_timer_fires_on_its_thread_in_proportion_to_cpu() {
        // Use SIGVTALRM for the test so it cannot collide with another test's SIGPROF.
        // SAFETY: installing a handler that only touches atomics.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = count as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigaction(libc::SIGVTALRM, &sa, std::ptr::null_mut());
        }
        const INTERVAL_NS: u64 = 5_000_000;
        let handle = std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            TARGET.store(tid as u64, Ordering::Relaxed);
            let start_ns = thread_cpu_ns();
            let id = ThreadCpuTimer::start(tid, libc::SIGVTALRM, Duration::from_nanos(INTERVAL_NS))
                .unwrap();
            // Sleep first: a sleeping thread burns no CPU, so no signal. (The first expiration
            // may come within the microseconds the thread runs before it sleeps, as it is
            // placed at random in the first interval: count only what the sleep brings.)
            let before_sleep = HITS.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(100));
            let after_sleep = HITS.load(Ordering::Relaxed) - before_sleep;
            // Burn until 60 expirations (300 ms of CPU) have been delivered. The kernel checks
            // CPU timers only on a tick that finds the thread running; on a loaded machine
            // that can be tens of ms apart, and expirations not yet delivered when the timer
            // is deleted are lost, so a fixed burn would test the machine's load.
            let mut burned = Duration::ZERO;
            while HITS.load(Ordering::Relaxed) < 60 && burned < Duration::from_secs(5) {
                burn_thread_cpu(Duration::from_millis(10));
                burned += Duration::from_millis(10);
            }
            ThreadCpuTimer::delete(id).unwrap();
            (
                after_sleep,
                CPU_AT_LAST_HIT_NS.load(Ordering::Relaxed) - start_ns,
            )
        });
        let (after_sleep, cpu_at_last_hit) = handle.join().unwrap();
        let hits = HITS.load(Ordering::Relaxed);
        assert_eq!(after_sleep, 0, "a sleeping thread got CPU-timer signals");
        assert!(hits >= 60, "5 s of CPU and only {hits} expirations at 5 ms");
        // Every signal's weight (1 + the expirations the kernel folded into it) adds up to the
        // CPU time the thread had used when the last one arrived, give or take the random
        // start (the first expiration comes after less than one interval) and the kernel's
        // check, which counts expirations a little before it delivers them.
        let counted = hits * INTERVAL_NS;
        assert!(
            counted <= cpu_at_last_hit + INTERVAL_NS + 1_000_000
                && counted + 2 * INTERVAL_NS >= cpu_at_last_hit,
            "{hits} expirations of 5 ms, {cpu_at_last_hit} ns of CPU at the last one"
        );
        assert_eq!(WRONG_THREAD.load(Ordering::Relaxed), 0);
        assert!(ThreadCpuTimer::delete(u32::MAX as u64).is_err());
    }

    #[test]
    fn credits_are_whole_intervals_with_the_right_expectation() {
        let ms = Duration::from_millis;
        assert_eq!(whole_intervals(ms(0), ms(10), 0.0), 0);
        assert_eq!(whole_intervals(ms(20), ms(10), 0.0), 2);
        assert_eq!(whole_intervals(ms(24), ms(10), 0.39), 3);
        assert_eq!(whole_intervals(ms(24), ms(10), 0.41), 2);
        assert_eq!(whole_intervals(ms(7), Duration::ZERO, 0.5), 7_000_000);
        // 3 ms of a 10 ms interval: one interval three times in ten, on average.
        let n = 100_000;
        let total: u64 = (0..n)
            .map(|_| whole_intervals(ms(3), ms(10), random_fraction()))
            .sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 0.3).abs() < 0.01, "{mean}");
    }

    #[test]
    fn first_expirations_are_spread_over_the_interval() {
        let interval = Duration::from_millis(10);
        assert_eq!(first_expiration(interval, 0.0), Duration::from_nanos(1));
        assert_eq!(
            first_expiration(interval, 0.25),
            Duration::from_micros(2_500)
        );
        assert_eq!(first_expiration(interval, 7.0), interval);
        // Uniform on [0, 1): the mean of many draws is 1/2, each tenth holds a tenth.
        let n = 100_000;
        let mut tenths = [0u32; 10];
        let mut sum = 0.0;
        for _ in 0..n {
            let f = random_fraction();
            assert!((0.0..1.0).contains(&f), "{f}");
            sum += f;
            tenths[(f * 10.0) as usize] += 1;
        }
        assert!(
            (sum / n as f64 - 0.5).abs() < 0.01,
            "mean {}",
            sum / n as f64
        );
        for t in tenths {
            assert!((9_000..11_000).contains(&t), "{tenths:?}");
        }
    }
}
