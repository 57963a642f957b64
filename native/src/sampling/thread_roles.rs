//! What a thread that AsyncGetCallTrace cannot walk does for the JVM, told from its name.
//!
//! HotSpot names its own threads (`/proc/self/task/TID/comm`, cut by the kernel to 15
//! bytes): the garbage collector's workers and drivers, the JIT compilers, the VM thread and
//! its housekeeping threads. None of them gets a JVMTI ThreadStart (the compiler threads are
//! Java threads hidden from JVMTI; the others are not Java threads at all), and none may be
//! walked with AsyncGetCallTrace, so the CPU profile records their CPU under one frame per
//! role ([`ThreadRole::frame_name`]), with the thread's name as its `thread_name` label.
//!
//! The names below were read from running JVMs of OpenJDK 17 and Temurin 25 with G1,
//! Parallel, Serial, ZGC (generational or not), Shenandoah, string deduplication and JFR on.
//! A name outside the list is a thread of some native library (or a Java thread that was
//! already running when the agent started): [`ThreadRole::Other`].
#![forbid(unsafe_code)]

use std::sync::atomic::AtomicU64;

use otelprof_primitives::thread_role::ROLE_FRAMES;

use crate::stats::COUNTERS;

/// The role of a thread in the CPU profile. `Java` threads are walked; the others are
/// recorded under their role's frame.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ThreadRole {
    /// A Java thread registered at JVMTI ThreadStart: its stack is walked.
    Java = 0,
    /// Garbage collection: workers, concurrent markers, refinement, drivers.
    Gc = 1,
    /// The JIT compilers (C1, C2, JVMCI) and the code cache sweeper.
    Jit = 2,
    /// The VM thread (safepoint operations; the whole collection under Serial GC), periodic
    /// tasks, service, signal, reference and JFR threads.
    Vm = 3,
    /// The agent's own threads: what profiling costs, in plain sight.
    Agent = 4,
    /// Any other thread: native libraries, or Java threads started before the agent.
    Other = 5,
}

/// Name prefixes of each role, as `/proc/self/task/TID/comm` shows them (15 bytes at most).
const PREFIXES: &[(&str, ThreadRole)] = &[
    // G1 / Parallel / Serial workers: "GC Thread#0".
    ("GC Thread", ThreadRole::Gc),
    // "G1 Main Marker", "G1 Conc#0", "G1 Refine#0", "G1 Service".
    ("G1 ", ThreadRole::Gc),
    // JDK 17 "StringDedupProcessor", JDK 25 "StringDedupThread".
    ("StringDedup", ThreadRole::Gc),
    // ZGC: "ZWorker#0", "ZWorkerOld#0", "ZWorkerYoung#0", "ZDriver", "ZDriverMajor",
    // "ZDirector", "ZStat", "ZUnmapper", "ZUncommitter#0"; its "RuntimeWorker#0"s do GC
    // work inside safepoints.
    ("ZWorker", ThreadRole::Gc),
    ("ZDriver", ThreadRole::Gc),
    ("ZDirector", ThreadRole::Gc),
    ("ZStat", ThreadRole::Gc),
    ("ZUnmapper", ThreadRole::Gc),
    ("ZUncommitter", ThreadRole::Gc),
    ("RuntimeWorker", ThreadRole::Gc),
    // "Shenandoah GC Threads", "Shenandoah Control Thread".
    ("Shenandoah", ThreadRole::Gc),
    // "C1 CompilerThread0", "C2 CompilerThread0", "JVMCI CompilerThread0",
    // "JVMCI-native CompilerThread0", and JDK 17's code cache "Sweeper thread".
    ("C1 CompilerThre", ThreadRole::Jit),
    ("C2 CompilerThre", ThreadRole::Jit),
    ("JVMCI", ThreadRole::Jit),
    ("Sweeper thread", ThreadRole::Jit),
    // "VM Thread", "VM Periodic Task Thread".
    ("VM Thread", ThreadRole::Vm),
    ("VM Periodic Tas", ThreadRole::Vm),
    ("Service Thread", ThreadRole::Vm),
    ("Monitor Deflati", ThreadRole::Vm),
    ("Notification Th", ThreadRole::Vm),
    ("Signal Dispatch", ThreadRole::Vm),
    ("Attach Listener", ThreadRole::Vm),
    ("AsyncLog Thread", ThreadRole::Vm),
    // Java threads of the JDK, seen here only when the agent started after them.
    ("Reference Handl", ThreadRole::Vm),
    ("Finalizer", ThreadRole::Vm),
    ("Common-Cleaner", ThreadRole::Vm),
    // "JFR Recorder Thread", "JFR Periodic Tasks", "JFR Thread Sampler", "JFR Sampler Thread".
    ("JFR ", ThreadRole::Vm),
    // The agent's threads: "otelprof-aggregator", "otelprof-wall", "otelprof-export",
    // "otelprof-threads".
    ("otelprof-", ThreadRole::Agent),
];

impl ThreadRole {
    /// The role of a thread that is not walked, from its kernel name.
    pub(crate) fn of_name(name: &str) -> ThreadRole {
        PREFIXES
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix))
            .map_or(ThreadRole::Other, |&(_, role)| role)
    }

    /// # Signal safety
    /// A comparison chain.
    #[inline]
    pub(crate) fn from_u8(v: u8) -> ThreadRole {
        match v {
            1 => ThreadRole::Gc,
            2 => ThreadRole::Jit,
            3 => ThreadRole::Vm,
            4 => ThreadRole::Agent,
            5 => ThreadRole::Other,
            _ => ThreadRole::Java,
        }
    }

    /// The frame a sample of this role shows; `None` for Java threads (their stack is walked).
    /// The names are the readers' vocabulary ([`otelprof_primitives::thread_role::ROLE_FRAMES`]).
    pub(crate) fn frame_name(self) -> Option<&'static str> {
        let [gc, jit, vm, agent, other] = ROLE_FRAMES;
        match self {
            ThreadRole::Java => None,
            ThreadRole::Gc => Some(gc),
            ThreadRole::Jit => Some(jit),
            ThreadRole::Vm => Some(vm),
            ThreadRole::Agent => Some(agent),
            ThreadRole::Other => Some(other),
        }
    }

    /// The counter of CPU samples taken on threads of this role.
    ///
    /// # Signal safety
    /// Returns a reference to a static.
    #[inline]
    pub(crate) fn samples_counter(self) -> Option<&'static AtomicU64> {
        match self {
            ThreadRole::Java => None,
            ThreadRole::Gc => Some(&COUNTERS.samples_gc),
            ThreadRole::Jit => Some(&COUNTERS.samples_jit),
            ThreadRole::Vm => Some(&COUNTERS.samples_vm),
            ThreadRole::Agent => Some(&COUNTERS.samples_otelprof),
            ThreadRole::Other => Some(&COUNTERS.samples_native_other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every JVM-internal thread name seen on OpenJDK 17 and Temurin 25 (`comm`, 15 bytes).
    #[test]
    fn hotspot_thread_names_of_both_jdks_get_their_role() {
        let gc = [
            "GC Thread#0",
            "GC Thread#1",
            "G1 Main Marker",
            "G1 Conc#0",
            "G1 Refine#0",
            "G1 Service",
            "StringDedupProc",
            "StringDedupThre",
            "ZWorker#0",
            "ZWorkerOld#0",
            "ZWorkerYoung#0",
            "ZDriver",
            "ZDriverMajor",
            "ZDriverMinor",
            "ZDirector",
            "ZStat",
            "ZUnmapper",
            "ZUncommitter",
            "ZUncommitter#0",
            "RuntimeWorker#0",
            "Shenandoah GC T",
            "Shenandoah Cont",
        ];
        let jit = [
            "C1 CompilerThre",
            "C2 CompilerThre",
            "JVMCI CompilerT",
            "JVMCI-native Co",
            "Sweeper thread",
        ];
        let vm = [
            "VM Thread",
            "VM Periodic Tas",
            "Service Thread",
            "Monitor Deflati",
            "Notification Th",
            "Signal Dispatch",
            "Reference Handl",
            "Finalizer",
            "Common-Cleaner",
            "Attach Listener",
            "JFR Recorder Th",
            "JFR Periodic Ta",
            "JFR Thread Samp",
            "JFR Sampler Thr",
        ];
        for (names, role) in [
            (&gc[..], ThreadRole::Gc),
            (&jit[..], ThreadRole::Jit),
            (&vm[..], ThreadRole::Vm),
        ] {
            for name in names {
                assert_eq!(ThreadRole::of_name(name), role, "{name}");
            }
        }
        assert_eq!(ThreadRole::of_name("otelprof-aggreg"), ThreadRole::Agent);
        // The launcher's thread, application threads, a library's threads.
        for other in ["java", "churn-0", "main", "", "rocksdb:low0", "VM", "GC"] {
            assert_eq!(ThreadRole::of_name(other), ThreadRole::Other, "{other}");
        }
    }

    #[test]
    fn roles_round_trip_and_name_their_frame() {
        for role in [
            ThreadRole::Java,
            ThreadRole::Gc,
            ThreadRole::Jit,
            ThreadRole::Vm,
            ThreadRole::Agent,
            ThreadRole::Other,
        ] {
            assert_eq!(ThreadRole::from_u8(role as u8), role);
            assert_eq!(role.frame_name().is_some(), role != ThreadRole::Java);
            assert_eq!(role.samples_counter().is_some(), role != ThreadRole::Java);
        }
        assert_eq!(ThreadRole::from_u8(200), ThreadRole::Java);
        assert_eq!(ThreadRole::Gc.frame_name(), Some("[GC]"));
        assert_eq!(ThreadRole::Jit.frame_name(), Some("[JIT compiler]"));
        assert_eq!(ThreadRole::Vm.frame_name(), Some("[VM]"));
    }
}
