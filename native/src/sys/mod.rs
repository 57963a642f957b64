//! Every C declaration the agent uses: JVMTI (generated from the JDK header), the few JVMTI
//! structs it reads, AsyncGetCallTrace, and the Linux siginfo layout of timer signals.
//! Nothing else in the crate declares foreign types.

#[allow(clippy::all, clippy::undocumented_unsafe_blocks)]
pub mod jvmti;
pub mod jvmti_types;

pub use jvmti::{capability, error, event, JvmtiEventCallbacks, JvmtiInterface};
pub use jvmti_types::*;

use jni::sys::{jint, jmethodID, JNIEnv};

/// One frame as AsyncGetCallTrace reports it (HotSpot `ASGCT_CallFrame`).
///
/// `lineno` is the bytecode index for Java frames, -1 when unknown and -3 for native methods.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AsgctCallFrame {
    pub lineno: jint,
    pub method_id: jmethodID,
}

/// HotSpot `ASGCT_CallTrace`. `num_frames` < 0 is one of the `TICKS_*` codes below.
#[repr(C)]
pub struct AsgctCallTrace {
    pub env_id: *mut JNIEnv,
    pub num_frames: jint,
    pub frames: *mut AsgctCallFrame,
}

/// `void AsyncGetCallTrace(ASGCT_CallTrace*, jint depth, void* ucontext)`, exported by libjvm.
pub type AsyncGetCallTraceFn =
    unsafe extern "C" fn(trace: *mut AsgctCallTrace, depth: jint, ucontext: *mut libc::c_void);

/// The failure codes AsyncGetCallTrace stores in `num_frames` (HotSpot forte.cpp).
pub mod ticks {
    pub const NO_JAVA_FRAME: i32 = 0;
    pub const NO_CLASS_LOAD: i32 = -1;
    pub const GC_ACTIVE: i32 = -2;
    pub const UNKNOWN_NOT_JAVA: i32 = -3;
    pub const NOT_WALKABLE_NOT_JAVA: i32 = -4;
    pub const UNKNOWN_JAVA: i32 = -5;
    pub const NOT_WALKABLE_JAVA: i32 = -6;
    pub const UNKNOWN_STATE: i32 = -7;
    pub const THREAD_EXIT: i32 = -8;
    pub const DEOPT: i32 = -9;
    pub const SAFEPOINT: i32 = -10;
}

/// The prefix of Linux `siginfo_t` for POSIX timer signals (`_sigfault` would be a different
/// view of the same union). `libc::siginfo_t` does not expose `si_overrun`.
#[repr(C)]
pub struct TimerSigInfo {
    pub si_signo: libc::c_int,
    pub si_errno: libc::c_int,
    pub si_code: libc::c_int,
    _pad: libc::c_int,
    pub si_tid: libc::c_int,
    pub si_overrun: libc::c_int,
}

/// `si_code` of a signal sent by a POSIX timer.
pub const SI_TIMER: libc::c_int = -2;

/// The CPU-time clock of thread `tid` (Linux `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`):
/// what `pthread_getcpuclockid` returns, computable for any thread of the process from its tid.
pub fn thread_cpu_clock(tid: libc::pid_t) -> libc::clockid_t {
    const CPUCLOCK_SCHED: libc::clockid_t = 2;
    const CPUCLOCK_PERTHREAD: libc::clockid_t = 4;
    ((!tid) << 3) | CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_clock_matches_pthread_getcpuclockid() {
        let mut expected: libc::clockid_t = 0;
        // SAFETY: pthread_self() is the calling thread, and `expected` is a valid out pointer.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut expected) };
        assert_eq!(rc, 0);
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        assert_eq!(thread_cpu_clock(tid), expected);
    }

    #[test]
    fn siginfo_prefix_layout() {
        assert_eq!(std::mem::offset_of!(TimerSigInfo, si_overrun), 20);
        assert!(std::mem::size_of::<TimerSigInfo>() <= std::mem::size_of::<libc::siginfo_t>());
    }
}
