//! The profile types the agent records, and what identifies each in its output.
//!
//! Every sample record carries a [`SampleKind`]; the aggregator builds one profile per kind
//! and period, written as its own pprof file (`<prefix>-<time>-pid<pid>-<seq>.pb.gz`) and sent
//! as its own OTLP request. Each kind's sample and period types are those of its entry in
//! [`otel_bridge::profile_types`], the one table of them (chosen there for the names
//! backends give them; docs/profile-types.md lists them).
#![forbid(unsafe_code)]

use otel_bridge::profile_types::{self, ProfileType};

/// What a sample record measures.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum SampleKind {
    /// A CPU-timer signal; weight = sampling intervals (1 + overruns).
    Cpu = 0,
    /// A wall-clock signal; weight = wall nanoseconds the sample stands for.
    Wall = 1,
    /// A JVMTI allocation sample; weight = estimated bytes, count = estimated objects (x1000).
    Alloc = 2,
    /// A contended monitor enter; weight = nanoseconds waited (or estimated), count =
    /// contentions (x1000).
    Lock = 3,
    /// A JVMTI allocation sample kept for the live heap only (the allocation profile did not
    /// keep it): no weight; the object is in the record's `object`.
    Live = 4,
}

impl SampleKind {
    pub(crate) const ALL: [SampleKind; 5] = [
        SampleKind::Cpu,
        SampleKind::Wall,
        SampleKind::Alloc,
        SampleKind::Lock,
        SampleKind::Live,
    ];

    pub(crate) fn from_u8(v: u8) -> Option<SampleKind> {
        Self::ALL.into_iter().find(|k| *k as u8 == v)
    }

    /// Index into per-kind arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The profile type this kind's samples make.
    pub(crate) fn profile_type(self) -> &'static ProfileType {
        match self {
            SampleKind::Cpu => &profile_types::CPU,
            SampleKind::Wall => &profile_types::WALL,
            SampleKind::Alloc => &profile_types::ALLOC,
            SampleKind::Lock => &profile_types::LOCK,
            SampleKind::Live => &profile_types::LIVE,
        }
    }

    /// File name prefix, and the name the CLI's `--type` uses.
    pub(crate) fn name(self) -> &'static str {
        self.profile_type().name
    }

    /// `(type, unit)` of each value, in order.
    pub(crate) fn sample_types(self) -> &'static [(&'static str, &'static str)] {
        self.profile_type().sample_types
    }

    pub(crate) fn period_type(self) -> (&'static str, &'static str) {
        self.profile_type().period_type
    }
}

/// A Java thread's state as `java.lang.Thread.State` names it, read with JVMTI
/// GetThreadState by the wall-clock thread (never in the signal handler).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ThreadState {
    Unknown = 0,
    /// Running or ready to run Java code.
    Runnable = 1,
    /// Waiting to enter a `synchronized` monitor.
    Blocked = 2,
    /// `Object.wait()`, `LockSupport.park()`, `Thread.join()` without a timeout.
    Waiting = 3,
    /// `Thread.sleep`, and the waits above with a timeout.
    TimedWaiting = 4,
    /// Stopped by a garbage collection pause (not a `Thread.State`: the wall-clock thread
    /// splits the pauses a thread sat through from the state it saw, see
    /// [`crate::engines::wall`]).
    GcPause = 5,
    /// `RUNNABLE` to the JVM but running no Java code: in native code (a socket read, a poll,
    /// a file write, a JNI library's work) or in the JVM's own. Told apart because a server's idle acceptors and pollers would
    /// otherwise fill the RUNNABLE time of every wall profile.
    Native = 6,
}

impl ThreadState {
    /// From `jvmtiThreadState` bits, the way `Thread.getState()` maps them. `None` for a
    /// thread that is not alive (new or terminated): it is not sampled.
    pub(crate) fn from_jvmti(bits: i32) -> Option<ThreadState> {
        use crate::sys::thread_state as s;
        if bits & s::ALIVE == 0 || bits & s::TERMINATED != 0 {
            return None;
        }
        // HotSpot reports a carrier thread that runs a virtual thread as exactly "waiting
        // indefinitely", without saying for what (JvmtiEnvBase::get_thread_state). A platform
        // thread that really waits says why: in Object.wait/join, or parked. The carrier is
        // running the virtual thread, so count it as runnable.
        let why = s::IN_OBJECT_WAIT | s::PARKED | s::SLEEPING;
        let carrying_virtual = bits & s::WAITING_INDEFINITELY != 0 && bits & why == 0;
        Some(if bits & s::BLOCKED_ON_MONITOR_ENTER != 0 {
            ThreadState::Blocked
        } else if carrying_virtual {
            ThreadState::Runnable
        } else if bits & s::WAITING_INDEFINITELY != 0 {
            ThreadState::Waiting
        } else if bits & s::WAITING_WITH_TIMEOUT != 0 {
            ThreadState::TimedWaiting
        } else if bits & s::RUNNABLE != 0 && bits & s::IN_NATIVE != 0 {
            ThreadState::Native
        } else if bits & s::RUNNABLE != 0 {
            ThreadState::Runnable
        } else {
            ThreadState::Unknown
        })
    }

    /// # Signal safety
    /// A comparison chain, no allocation.
    pub(crate) fn from_u8(v: u8) -> ThreadState {
        match v {
            1 => ThreadState::Runnable,
            2 => ThreadState::Blocked,
            3 => ThreadState::Waiting,
            4 => ThreadState::TimedWaiting,
            5 => ThreadState::GcPause,
            6 => ThreadState::Native,
            _ => ThreadState::Unknown,
        }
    }

    /// The `thread_state` label value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ThreadState::Unknown => "UNKNOWN",
            ThreadState::Runnable => "RUNNABLE",
            ThreadState::Blocked => "BLOCKED",
            ThreadState::Waiting => "WAITING",
            ThreadState::TimedWaiting => "TIMED_WAITING",
            ThreadState::GcPause => "GC_PAUSE",
            ThreadState::Native => "NATIVE",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::thread_state as s;

    #[test]
    fn kinds_round_trip_and_name_their_types() {
        for k in SampleKind::ALL {
            assert_eq!(SampleKind::from_u8(k as u8), Some(k));
            assert!(!k.sample_types().is_empty());
        }
        assert_eq!(SampleKind::from_u8(9), None);
        assert_eq!(SampleKind::Wall.sample_types(), &[("wall", "nanoseconds")]);
        assert_eq!(SampleKind::Alloc.name(), "alloc");
        assert_eq!(
            SampleKind::Live.sample_types(),
            &[("inuse_objects", "count"), ("inuse_space", "bytes")]
        );
    }

    #[test]
    fn thread_states_map_like_thread_get_state() {
        let alive = s::ALIVE;
        assert_eq!(
            ThreadState::from_jvmti(alive | s::RUNNABLE),
            Some(ThreadState::Runnable)
        );
        assert_eq!(
            ThreadState::from_jvmti(alive | s::RUNNABLE | s::IN_NATIVE),
            Some(ThreadState::Native)
        );
        assert_eq!(
            ThreadState::from_jvmti(alive | s::BLOCKED_ON_MONITOR_ENTER),
            Some(ThreadState::Blocked)
        );
        // WAITING (0x80) | INDEFINITELY | IN_OBJECT_WAIT
        assert_eq!(
            ThreadState::from_jvmti(alive | 0x80 | s::WAITING_INDEFINITELY | s::IN_OBJECT_WAIT),
            Some(ThreadState::Waiting)
        );
        assert_eq!(
            ThreadState::from_jvmti(alive | 0x80 | s::WAITING_INDEFINITELY | s::PARKED),
            Some(ThreadState::Waiting)
        );
        // WAITING | WITH_TIMEOUT | SLEEPING
        assert_eq!(
            ThreadState::from_jvmti(alive | 0x80 | s::WAITING_WITH_TIMEOUT | s::SLEEPING),
            Some(ThreadState::TimedWaiting)
        );
        // A carrier running a virtual thread: "waiting indefinitely" for no reason given.
        assert_eq!(
            ThreadState::from_jvmti(alive | 0x80 | s::WAITING_INDEFINITELY),
            Some(ThreadState::Runnable)
        );
        assert_eq!(ThreadState::from_jvmti(s::TERMINATED), None);
        assert_eq!(ThreadState::from_jvmti(0), None);
        for st in [
            ThreadState::Runnable,
            ThreadState::Blocked,
            ThreadState::Waiting,
            ThreadState::TimedWaiting,
            ThreadState::GcPause,
        ] {
            assert_eq!(ThreadState::from_u8(st as u8), st);
        }
        assert_eq!(ThreadState::from_u8(200), ThreadState::Unknown);
    }
}
