//! The Linux perf_events declarations the CPU engine uses (perf_event_open(2)): the
//! attribute struct, ioctls and record constants come from `perf-event-open-sys` (bindgen of
//! the kernel's `linux/perf_event.h`); what glibc's `fcntl.h` has and the `libc` crate lacks
//! for glibc targets (`F_SETSIG`, `F_SETOWN_EX`) and the siginfo layout of the overflow signal
//! are declared here.

pub(crate) use perf_event_open_sys::bindings::{
    perf_event_attr, perf_event_mmap_page, PERF_CONTEXT_MAX, PERF_COUNT_SW_CPU_CLOCK,
    PERF_FLAG_FD_CLOEXEC, PERF_RECORD_LOST, PERF_RECORD_SAMPLE, PERF_SAMPLE_CALLCHAIN,
    PERF_TYPE_SOFTWARE,
};
pub(crate) use perf_event_open_sys::{ioctls, perf_event_open};

/// `fcntl` command: the signal sent when I/O is possible on the descriptor (here: when the
/// event overflows), instead of SIGIO; with it, the siginfo carries `si_fd`.
pub(crate) const F_SETSIG: libc::c_int = 10;
/// `fcntl` command: who receives that signal, as a [`FOwnerEx`].
pub(crate) const F_SETOWN_EX: libc::c_int = 15;
/// [`FOwnerEx::kind`]: one thread, by its kernel id.
pub(crate) const F_OWNER_TID: libc::c_int = 0;

/// `struct f_owner_ex`.
#[repr(C)]
pub(crate) struct FOwnerEx {
    pub(crate) kind: libc::c_int,
    pub(crate) pid: libc::pid_t,
}

/// The prefix of Linux `siginfo_t` for SIGIO-style signals (`_sigpoll`): the band event and
/// the descriptor that became ready.
#[repr(C)]
pub(crate) struct PollSigInfo {
    pub(crate) si_signo: libc::c_int,
    pub(crate) si_errno: libc::c_int,
    pub(crate) si_code: libc::c_int,
    _pad: libc::c_int,
    pub(crate) si_band: libc::c_long,
    pub(crate) si_fd: libc::c_int,
}

/// `si_code`s of SIGIO-style signals: `POLL_IN` (1) to `POLL_HUP` (6). A perf event's
/// overflow sends `POLL_IN` (and `POLL_HUP` once disabled); other senders use other codes
/// (`SI_USER`, `SI_TKILL`, `SI_TIMER`, `SI_QUEUE`, `SI_KERNEL` for `ITIMER_PROF`).
pub(crate) const POLL_CODES: std::ops::RangeInclusive<libc::c_int> = 1..=6;

/// `perf_event_mmap_page` field offsets the signal handler reads and writes through raw
/// pointers (the struct is shared with the kernel, which moves `data_head`).
pub(crate) mod ring_page {
    pub(crate) const DATA_HEAD: usize =
        std::mem::offset_of!(super::perf_event_mmap_page, data_head);
    pub(crate) const DATA_TAIL: usize =
        std::mem::offset_of!(super::perf_event_mmap_page, data_tail);
    pub(crate) const DATA_OFFSET: usize =
        std::mem::offset_of!(super::perf_event_mmap_page, data_offset);
    pub(crate) const DATA_SIZE: usize =
        std::mem::offset_of!(super::perf_event_mmap_page, data_size);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_kernel_abi() {
        assert_eq!(std::mem::offset_of!(PollSigInfo, si_band), 16);
        assert_eq!(std::mem::offset_of!(PollSigInfo, si_fd), 24);
        assert!(std::mem::size_of::<PollSigInfo>() <= std::mem::size_of::<libc::siginfo_t>());
        // perf_event.h: data_head at 1024, then tail, offset, size.
        assert_eq!(ring_page::DATA_HEAD, 1024);
        assert_eq!(ring_page::DATA_TAIL, 1032);
        assert_eq!(ring_page::DATA_OFFSET, 1040);
        assert_eq!(ring_page::DATA_SIZE, 1048);
    }
}
