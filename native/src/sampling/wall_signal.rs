//! The wall-clock signal: how the wall-clock thread ([`crate::engines::wall`]) asks the
//! signal handler for a sample, and how the handler tells that SIGPROF from a CPU timer's.
//!
//! Both sides use it, so it lives with the handler, below the engines.

use crate::kinds::ThreadState;
use crate::sys::{QueueSigInfo, SI_QUEUE};

/// What a wall-clock signal carries in its `si_value`: a tag (so that the handler tells it
/// from other SIGPROFs) and the thread state. The weight travels apart, in the thread's slot
/// ([`WallMarks::pending_ns`]): SIGPROF is not a queued signal, and the kernel drops one sent
/// while another SIGPROF is pending on the thread (a CPU timer's, or an earlier wall signal to
/// a thread that has been waiting for a CPU), so a weight in the signal could be lost.
///
/// [`WallMarks::pending_ns`]: crate::sampling::thread_table::WallMarks::pending_ns
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WallSignal {
    pub(crate) state: ThreadState,
}

const TAG: u64 = 0x6f74_656c_7770; // "otelwp"
const TAG_SHIFT: u32 = 8;

impl WallSignal {
    pub(crate) fn encode(&self) -> u64 {
        (TAG << TAG_SHIFT) | self.state as u64
    }

    /// # Signal safety
    /// Shifts and masks.
    pub(crate) fn decode(value: u64) -> Option<WallSignal> {
        if value >> TAG_SHIFT != TAG {
            return None;
        }
        Some(WallSignal {
            state: ThreadState::from_u8((value & 0xff) as u8),
        })
    }

    /// The wall signal in `info`, if it is one.
    ///
    /// # Safety
    /// `info` points to a siginfo the kernel passed to a handler.
    ///
    /// # Signal safety
    /// Reads two fields of the siginfo.
    pub(crate) unsafe fn from_siginfo(info: *const libc::siginfo_t) -> Option<WallSignal> {
        // SAFETY: QueueSigInfo is a prefix of siginfo_t (checked in sys tests).
        let q = unsafe { &*(info as *const QueueSigInfo) };
        if q.si_code != SI_QUEUE {
            return None;
        }
        Self::decode(q.si_value)
    }
}

/// Sends `signal` to thread `tid` of this process as SIGPROF.
pub(crate) fn send(tid: i32, signal: WallSignal) -> std::io::Result<()> {
    // SAFETY: an all-zero siginfo_t is valid; QueueSigInfo is its prefix (sys tests).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    {
        // SAFETY: as above.
        let q = unsafe { &mut *(&mut info as *mut libc::siginfo_t as *mut QueueSigInfo) };
        q.si_signo = libc::SIGPROF;
        q.si_code = SI_QUEUE;
        // SAFETY: getpid and getuid cannot fail.
        q.si_pid = unsafe { libc::getpid() };
        // SAFETY: as above.
        q.si_uid = unsafe { libc::getuid() };
        q.si_value = signal.encode();
    }
    // SAFETY: rt_tgsigqueueinfo(tgid, tid, sig, info) with our own tgid: the kernel accepts
    // any si_code from the process itself, and fails with ESRCH if `tid` is not one of our
    // threads (any more).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            libc::getpid(),
            tid,
            libc::SIGPROF,
            &info as *const libc::siginfo_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_round_trip_and_foreign_values_are_not_wall() {
        for state in [
            ThreadState::TimedWaiting,
            ThreadState::Runnable,
            ThreadState::Unknown,
        ] {
            let w = WallSignal { state };
            assert_eq!(WallSignal::decode(w.encode()), Some(w));
        }
        assert_eq!(WallSignal::decode(0), None);
        assert_eq!(WallSignal::decode(42), None);
        assert_eq!(WallSignal::decode(u64::MAX), None);
    }
}
