//! What the sampler asks the operating system: the calling thread's kernel id and the
//! monotonic clock. The signal handler, the thread table and registry, the engines and the
//! aggregator all need them, so they live here, in a module that imports nothing else of the
//! crate (async-profiler keeps the same two in its `os` layer).

/// Current thread's kernel id.
///
/// # Signal safety
/// A raw system call.
#[inline]
pub(crate) fn gettid() -> i32 {
    // SAFETY: SYS_gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// CLOCK_MONOTONIC in nanoseconds.
///
/// # Signal safety
/// `clock_gettime` is async-signal-safe (POSIX.1-2008).
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}
