//! The table the signal handler uses to find the interrupted thread's record.
//!
//! Keyed by the kernel thread id (`gettid`), which the handler can get with one system call.
//! Thread-local storage is not an option in the handler: a `#[thread_local]` in a dlopened
//! library is dynamic TLS, and its first touch on a thread may allocate.
//!
//! Open addressing with linear probing over a fixed array. Writers serialise on a mutex;
//! readers (the handler) take no lock. Two kinds of entries:
//!
//! - **Java threads**, registered at JVMTI ThreadStart and removed at ThreadEnd on the thread
//!   itself. A thread only ever looks up its own tid, and only that thread inserts or removes
//!   it, so a handler that interrupts its own thread's insert or remove sees the slot either
//!   absent or complete: fields are written before the key is published (Release) and the key
//!   is retracted before fields are cleared.
//! - **Threads that are not walked** (GC, JIT compilers, the VM thread, …: a
//!   [`ThreadRole`] other than `Java`), registered and removed by the thread scan
//!   ([`crate::threads::native_threads`]) on behalf of the thread. The key is still published
//!   after the fields, so a handler that finds the tid sees them complete; such an entry is
//!   removed only once its thread has left `/proc/self/task`, when no handler can run on it.
//!   A Java thread that starts under a tid the scan registered (it saw the thread before its
//!   ThreadStart) takes the entry over ([`ThreadTable::insert`]): every mix of old and new
//!   fields a handler could see on it is still a valid description of the thread (no JNIEnv
//!   and a role, or its own JNIEnv), so its sample is right either way.
//!
//! Removal leaves a tombstone that later inserts reuse. Probing is bounded, so lookups cost at
//! most `MAX_PROBE` loads even after heavy thread churn.
#![forbid(unsafe_code)]
#![deny(clippy::indexing_slicing)]

use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Mutex, MutexGuard};

use jni::sys::JNIEnv;

use crate::context::record::ContextRecord;
use crate::sampling::cpu_clock::ThreadSampler;
use crate::sampling::perf_events::PerfEvent;
use crate::sampling::thread_roles::ThreadRole;

/// Slots in the table: the number of Java threads that can be profiled at once is about half
/// of this (probing stays short below ~50% load).
pub(crate) const CAPACITY: usize = 16384;
const MAX_PROBE: usize = 128;
const EMPTY: i32 = 0;
const TOMBSTONE: i32 = -1;
/// `timer` value meaning "no timer". glibc's kernel timer ids start at 0, so 0 is a real id.
const NO_TIMER: u64 = u64::MAX;
/// `perf_fd` value meaning "no perf event".
const NO_FD: i32 = -1;

pub(crate) struct ThreadSlot {
    tid: AtomicI32,
    env: AtomicPtr<JNIEnv>,
    /// Agent-wide unique number of this thread's life (tids are reused; serials are not).
    serial: AtomicU64,
    /// What samples the thread's CPU ([`ThreadSampler`]): a POSIX timer id (or
    /// [`NO_TIMER`]), or a perf event's descriptor (or [`NO_FD`]) and ring (0 for none). The
    /// signal handler reads the event's: the ring is stored before the descriptor
    /// (Release) and cleared after it.
    timer: AtomicU64,
    perf_fd: AtomicI32,
    perf_ring: AtomicUsize,
    /// The part of the thread's stack its handler has confirmed mapped, `[lo, hi)`
    /// ([`crate::sampling::native_walk`]): written only by the thread's own handler, reset at
    /// registration.
    stack_lo: AtomicU64,
    stack_hi: AtomicU64,
    /// The span context record the thread (or the virtual thread mounted on it) publishes,
    /// or null. Set by the thread itself.
    context: AtomicPtr<ContextRecord>,
    /// The platform thread's own record, kept while a virtual thread's record is mounted.
    own_context: AtomicPtr<ContextRecord>,
    /// Wall-clock bookkeeping ([`crate::engines::wall`]), touched only by the wall thread and reset
    /// by `insert`.
    pub(crate) wall: WallMarks,
    /// A [`ThreadRole`]: `Java` for threads registered at ThreadStart (walked with their
    /// `env`), another role for threads the scan registered (never walked).
    role: AtomicU8,
}

/// What the wall-clock thread remembers about a thread between its visits, and what it hands
/// to the signal handler.
pub(crate) struct WallMarks {
    /// CLOCK_MONOTONIC time of the last visit (registration time before the first).
    pub(crate) last_visit_ns: AtomicU64,
    /// Consecutive idle visits (see [`crate::engines::wall`]).
    pub(crate) idle_streak: AtomicU32,
    /// Wall time signalled but not yet taken by a sample: the wall thread adds to it before
    /// it signals, the handler takes all of it. A signal the kernel merges with one already
    /// pending (SIGPROF is not queued) thus loses no time: the next sample carries it.
    pub(crate) pending_ns: AtomicU64,
    /// Set by the handler when the thread's last wall sample found no Java frame (a JVM
    /// service thread that runs no Java code): such a thread counts as idle.
    pub(crate) no_java: AtomicBool,
}

impl WallMarks {
    const fn new() -> Self {
        WallMarks {
            last_visit_ns: AtomicU64::new(0),
            idle_streak: AtomicU32::new(0),
            pending_ns: AtomicU64::new(0),
            no_java: AtomicBool::new(false),
        }
    }

    fn reset(&self, now_ns: u64) {
        self.last_visit_ns.store(now_ns, Ordering::Relaxed);
        self.idle_streak.store(0, Ordering::Relaxed);
        self.pending_ns.store(0, Ordering::Relaxed);
        self.no_java.store(false, Ordering::Relaxed);
    }

    /// Takes the wall time handed to the next sample.
    ///
    /// # Signal safety
    /// One atomic swap.
    #[inline]
    pub(crate) fn take_pending(&self) -> u64 {
        self.pending_ns.swap(0, Ordering::AcqRel)
    }
}

impl ThreadSlot {
    const fn new() -> Self {
        ThreadSlot {
            tid: AtomicI32::new(EMPTY),
            env: AtomicPtr::new(std::ptr::null_mut()),
            serial: AtomicU64::new(0),
            timer: AtomicU64::new(NO_TIMER),
            perf_fd: AtomicI32::new(NO_FD),
            perf_ring: AtomicUsize::new(0),
            stack_lo: AtomicU64::new(0),
            stack_hi: AtomicU64::new(0),
            context: AtomicPtr::new(std::ptr::null_mut()),
            own_context: AtomicPtr::new(std::ptr::null_mut()),
            wall: WallMarks::new(),
            role: AtomicU8::new(ThreadRole::Java as u8),
        }
    }

    /// What the thread does: `Java` (walk it with its JNIEnv) or the role of a thread that is
    /// not walked.
    ///
    /// # Signal safety
    /// One atomic load.
    #[inline]
    pub(crate) fn role(&self) -> ThreadRole {
        ThreadRole::from_u8(self.role.load(Ordering::Relaxed))
    }

    /// The registered kernel thread id, or 0 / a negative value for a free slot.
    pub(crate) fn tid(&self) -> i32 {
        self.tid.load(Ordering::Acquire)
    }

    /// The record to sample.
    ///
    /// # Signal safety
    /// One atomic load.
    #[inline]
    pub(crate) fn context(&self) -> *mut ContextRecord {
        self.context.load(Ordering::Relaxed)
    }

    /// The platform thread's own record (null until the thread registers one).
    pub(crate) fn own_context(&self) -> *mut ContextRecord {
        self.own_context.load(Ordering::Relaxed)
    }

    /// Publishes `record` as the thread's own and current record. Call on the thread itself.
    pub(crate) fn set_own_context(&self, record: *mut ContextRecord) {
        self.own_context.store(record, Ordering::Relaxed);
        self.context.store(record, Ordering::Release);
    }

    /// Makes `record` (a mounted virtual thread's, or the own one) the one sampled. Call on
    /// the thread itself.
    pub(crate) fn set_current_context(&self, record: *mut ContextRecord) {
        self.context.store(record, Ordering::Release);
    }

    pub(crate) fn env(&self) -> *mut JNIEnv {
        self.env.load(Ordering::Relaxed)
    }

    pub(crate) fn serial(&self) -> u64 {
        self.serial.load(Ordering::Relaxed)
    }

    /// The ring of the thread's perf event if `fd` is that event's descriptor (the signal
    /// came from it), else `None`.
    ///
    /// # Signal safety
    /// Two atomic loads.
    #[inline]
    pub(crate) fn perf_ring_of(&self, fd: i32) -> Option<usize> {
        (fd != NO_FD && self.perf_fd.load(Ordering::Acquire) == fd)
            .then(|| self.perf_ring.load(Ordering::Relaxed))
    }

    /// The stack range confirmed mapped so far (`(0, 0)` for none).
    ///
    /// # Signal safety
    /// Two atomic loads.
    #[inline]
    pub(crate) fn stack_confirmed(&self) -> (u64, u64) {
        (
            self.stack_lo.load(Ordering::Relaxed),
            self.stack_hi.load(Ordering::Relaxed),
        )
    }

    /// Remembers that `[lo, hi)` of the thread's stack is mapped. Call from the thread's own
    /// handler only.
    ///
    /// # Signal safety
    /// Two atomic stores.
    #[inline]
    pub(crate) fn confirm_stack(&self, lo: u64, hi: u64) {
        self.stack_lo.store(lo, Ordering::Relaxed);
        self.stack_hi.store(hi, Ordering::Relaxed);
    }

    fn store_sampler(&self, sampler: ThreadSampler) {
        match sampler {
            ThreadSampler::Timer(id) => self.timer.store(id, Ordering::Relaxed),
            ThreadSampler::Perf(event) => {
                self.perf_ring.store(event.ring, Ordering::Relaxed);
                self.perf_fd.store(event.fd, Ordering::Release);
            }
        }
    }

    /// Takes the sampler out of the slot.
    fn take_sampler(&self) -> Option<ThreadSampler> {
        let fd = self.perf_fd.swap(NO_FD, Ordering::AcqRel);
        let ring = self.perf_ring.swap(0, Ordering::Relaxed);
        let timer = self.timer.swap(NO_TIMER, Ordering::Relaxed);
        if fd != NO_FD {
            return Some(ThreadSampler::Perf(PerfEvent { fd, ring }));
        }
        (timer != NO_TIMER).then_some(ThreadSampler::Timer(timer))
    }

    fn has_sampler(&self) -> bool {
        self.timer.load(Ordering::Relaxed) != NO_TIMER
            || self.perf_fd.load(Ordering::Relaxed) != NO_FD
    }
}

/// What a removed entry held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Removed {
    pub(crate) serial: u64,
    pub(crate) sampler: Option<ThreadSampler>,
    /// The thread's own context record (null if it never registered one).
    pub(crate) own_context: *mut ContextRecord,
}

pub(crate) struct ThreadTable {
    slots: [ThreadSlot; CAPACITY],
    writer: Mutex<()>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TableFull;

/// What [`ThreadTable::insert`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// A new entry.
    New,
    /// The scan's entry for the tid became this Java thread's; what it held is the caller's.
    TookOver(Removed),
    /// The tid was registered as a Java thread already: nothing changed.
    AlreadyJava,
}

/// Why [`ThreadTable::insert_native`] registered nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotInserted {
    /// The tid is registered already (a Java thread, or an earlier scan's entry).
    Present,
    Full,
}

fn home(tid: i32) -> usize {
    // Fibonacci hashing: consecutive tids land far apart.
    let h = (tid as u32).wrapping_mul(0x9E37_79B1);
    (h >> (32 - CAPACITY.trailing_zeros())) as usize
}

impl ThreadTable {
    pub(crate) const fn new() -> Self {
        ThreadTable {
            slots: [const { ThreadSlot::new() }; CAPACITY],
            writer: Mutex::new(()),
        }
    }

    fn probe(&self, tid: i32) -> impl Iterator<Item = &ThreadSlot> {
        let start = home(tid);
        (0..MAX_PROBE).filter_map(move |i| self.slots.get((start + i) % CAPACITY))
    }

    /// Finds the slot of `tid`.
    ///
    /// # Signal safety
    /// Async-signal-safe: at most `MAX_PROBE` atomic loads, no locks, no allocation.
    #[inline]
    pub(crate) fn lookup(&self, tid: i32) -> Option<&ThreadSlot> {
        if tid <= 0 {
            return None;
        }
        for slot in self.probe(tid) {
            let t = slot.tid.load(Ordering::Acquire);
            if t == tid {
                return Some(slot);
            }
            if t == EMPTY {
                return None;
            }
        }
        None
    }

    /// Registers the Java thread `tid`: on the thread itself at ThreadStart, or on its behalf
    /// for a thread already running when profiling starts (see the module docs).
    ///
    /// If the thread scan had registered `tid` as a thread that is not walked (it saw the
    /// thread before its ThreadStart, or the thread was a native thread that attached to the
    /// VM), the entry becomes this Java thread's and what the scan's entry held is returned:
    /// its timer is the caller's to delete. A tid registered as Java already is left as it is
    /// (two registrations of one thread, e.g. ThreadStart and the late registration, race).
    pub(crate) fn insert(
        &self,
        tid: i32,
        env: *mut JNIEnv,
        serial: u64,
    ) -> Result<Inserted, TableFull> {
        if tid <= 0 {
            return Err(TableFull);
        }
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let slot = match self.find_for_insert(tid) {
            Slot::Registered(slot) if slot.role() == ThreadRole::Java => {
                return Ok(Inserted::AlreadyJava)
            }
            Slot::Registered(slot) => {
                let taken_over = Removed {
                    serial: slot.serial.load(Ordering::Relaxed),
                    sampler: slot.take_sampler(),
                    own_context: std::ptr::null_mut(),
                };
                // Taken over from the scan: the JNIEnv first, so a handler that still sees
                // the old role has nothing to walk with, and one that sees the env walks it.
                slot.env.store(env, Ordering::Relaxed);
                slot.serial.store(serial, Ordering::Relaxed);
                slot.role.store(ThreadRole::Java as u8, Ordering::Relaxed);
                return Ok(Inserted::TookOver(taken_over));
            }
            Slot::Free(slot) => slot,
            Slot::Full => return Err(TableFull),
        };
        Self::fill(slot, env, serial, ThreadRole::Java);
        slot.tid.store(tid, Ordering::Release);
        Ok(Inserted::New)
    }

    /// Registers `tid`, a thread of this process that is not walked, on its behalf (the
    /// thread scan; see the module docs). Nothing changes if `tid` is registered already.
    pub(crate) fn insert_native(
        &self,
        tid: i32,
        serial: u64,
        role: ThreadRole,
    ) -> Result<(), NotInserted> {
        if tid <= 0 || role == ThreadRole::Java {
            return Err(NotInserted::Full);
        }
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match self.find_for_insert(tid) {
            Slot::Registered(_) => Err(NotInserted::Present),
            Slot::Full => Err(NotInserted::Full),
            Slot::Free(slot) => {
                Self::fill(slot, std::ptr::null_mut(), serial, role);
                slot.tid.store(tid, Ordering::Release);
                Ok(())
            }
        }
    }

    /// The slot of `tid` or the free slot to put it in. Call under the writer lock.
    fn find_for_insert(&self, tid: i32) -> Slot<'_> {
        let mut free: Option<&ThreadSlot> = None;
        for slot in self.probe(tid) {
            let t = slot.tid.load(Ordering::Relaxed);
            if t == tid {
                return Slot::Registered(slot);
            }
            if t == TOMBSTONE && free.is_none() {
                free = Some(slot);
            }
            if t == EMPTY {
                free = free.or(Some(slot));
                break;
            }
        }
        free.map_or(Slot::Full, Slot::Free)
    }

    /// Fills an unpublished slot. Call under the writer lock, before publishing the tid.
    fn fill(slot: &ThreadSlot, env: *mut JNIEnv, serial: u64, role: ThreadRole) {
        slot.env.store(env, Ordering::Relaxed);
        slot.serial.store(serial, Ordering::Relaxed);
        slot.timer.store(NO_TIMER, Ordering::Relaxed);
        slot.perf_fd.store(NO_FD, Ordering::Relaxed);
        slot.perf_ring.store(0, Ordering::Relaxed);
        slot.confirm_stack(0, 0);
        slot.context.store(std::ptr::null_mut(), Ordering::Relaxed);
        slot.own_context
            .store(std::ptr::null_mut(), Ordering::Relaxed);
        slot.role.store(role as u8, Ordering::Relaxed);
        slot.wall.reset(crate::sampling::os::monotonic_ns());
    }

    /// Holds off registrations and removals (ThreadStart / ThreadEnd wait) while the guard
    /// lives, so that a thread found registered through it cannot end meanwhile: its tid
    /// stays its own and can be signalled.
    pub(crate) fn hold_registrations(&self) -> Registrations<'_> {
        Registrations {
            table: self,
            _guard: self.writer.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Calls `visit` with each registered slot, starting at slot index `start` and going round
    /// the table once, until `visit` returns false. Returns the index after the last slot
    /// visited (where the next round should start). Lock-free: a slot may be registered or
    /// removed while it is looked at; callers re-check under [`Self::hold_registrations`].
    pub(crate) fn scan_from<'t>(
        &'t self,
        start: usize,
        mut visit: impl FnMut(&'t ThreadSlot) -> bool,
    ) -> usize {
        let start = start % CAPACITY;
        for i in 0..CAPACITY {
            let at = (start + i) % CAPACITY;
            let Some(slot) = self.slots.get(at) else {
                continue;
            };
            if slot.tid() > 0 && !visit(slot) {
                return (at + 1) % CAPACITY;
            }
        }
        start
    }

    /// Records what samples the CPU of `tid` if it is still registered as the life numbered
    /// `serial`. Returns false otherwise: the sampler is then the caller's to stop.
    pub(crate) fn set_sampler(&self, tid: i32, serial: u64, sampler: ThreadSampler) -> bool {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match self.lookup(tid).filter(|s| s.serial() == serial) {
            Some(slot) => {
                slot.store_sampler(sampler);
                true
            }
            None => false,
        }
    }

    /// Unregisters `tid`, returning what its slot held.
    pub(crate) fn remove(&self, tid: i32) -> Option<Removed> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let slot = self.lookup(tid)?;
        slot.tid.store(TOMBSTONE, Ordering::Release);
        slot.context.store(std::ptr::null_mut(), Ordering::Relaxed);
        let removed = Removed {
            serial: slot.serial.swap(0, Ordering::Relaxed),
            sampler: slot.take_sampler(),
            own_context: slot
                .own_context
                .swap(std::ptr::null_mut(), Ordering::Relaxed),
        };
        slot.env.store(std::ptr::null_mut(), Ordering::Relaxed);
        Some(removed)
    }

    /// Unregisters `tid` if the scan registered it as the life numbered `serial` (a Java thread
    /// may have taken the entry over since), returning what its slot held.
    pub(crate) fn remove_native(&self, tid: i32, serial: u64) -> Option<Removed> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let slot = self
            .lookup(tid)
            .filter(|s| s.serial() == serial && s.role() != ThreadRole::Java)?;
        slot.tid.store(TOMBSTONE, Ordering::Release);
        let removed = Removed {
            serial: slot.serial.swap(0, Ordering::Relaxed),
            sampler: slot.take_sampler(),
            own_context: std::ptr::null_mut(),
        };
        slot.role.store(ThreadRole::Java as u8, Ordering::Relaxed);
        Some(removed)
    }

    /// Takes every thread's sampler out of the table (at shutdown), leaving threads
    /// registered.
    pub(crate) fn take_all_samplers(&self) -> Vec<ThreadSampler> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.slots
            .iter()
            .filter(|s| s.tid.load(Ordering::Relaxed) > 0)
            .filter_map(|s| s.take_sampler())
            .collect()
    }

    /// Unregisters every thread (profiling stopped: see
    /// [`crate::threads::thread_registry::clear`]), returning each one's tid and sampler.
    /// Context records are left to their threads.
    pub(crate) fn remove_all(&self) -> Vec<(i32, Option<ThreadSampler>)> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut removed = Vec::new();
        for slot in self.slots.iter() {
            let tid = slot.tid.load(Ordering::Relaxed);
            if tid <= 0 {
                continue;
            }
            slot.tid.store(TOMBSTONE, Ordering::Release);
            slot.context.store(std::ptr::null_mut(), Ordering::Relaxed);
            slot.own_context
                .store(std::ptr::null_mut(), Ordering::Relaxed);
            slot.env.store(std::ptr::null_mut(), Ordering::Relaxed);
            slot.serial.store(0, Ordering::Relaxed);
            slot.role.store(ThreadRole::Java as u8, Ordering::Relaxed);
            removed.push((tid, slot.take_sampler()));
        }
        removed
    }

    /// Number of registered threads and of those with a CPU sampler.
    pub(crate) fn occupancy(&self) -> (usize, usize) {
        let live = self
            .slots
            .iter()
            .filter(|s| s.tid.load(Ordering::Relaxed) > 0);
        let (mut threads, mut sampled) = (0, 0);
        for s in live {
            threads += 1;
            if s.has_sampler() {
                sampled += 1;
            }
        }
        (threads, sampled)
    }
}

/// Where a tid is or would go.
enum Slot<'t> {
    Registered(&'t ThreadSlot),
    Free(&'t ThreadSlot),
    Full,
}

/// See [`ThreadTable::hold_registrations`].
pub(crate) struct Registrations<'a> {
    table: &'a ThreadTable,
    _guard: MutexGuard<'a, ()>,
}

impl<'t> Registrations<'t> {
    /// The slot of `tid` if it is registered as the life numbered `serial`.
    pub(crate) fn slot(&self, tid: i32, serial: u64) -> Option<&'t ThreadSlot> {
        self.table.lookup(tid).filter(|s| s.serial() == serial)
    }
}

impl Default for ThreadTable {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn env(n: usize) -> *mut JNIEnv {
        n as *mut JNIEnv
    }

    fn timer(id: u64) -> ThreadSampler {
        ThreadSampler::Timer(id)
    }

    #[test]
    fn perf_events_are_published_ring_first_and_found_by_descriptor() {
        static TABLE_G: ThreadTable = ThreadTable::new();
        let t = &TABLE_G;
        t.insert(400, env(8), 1).unwrap();
        let event = PerfEvent {
            fd: 33,
            ring: 0x7000,
        };
        assert!(t.set_sampler(400, 1, ThreadSampler::Perf(event)));
        let slot = t.lookup(400).unwrap();
        assert_eq!(slot.perf_ring_of(33), Some(0x7000));
        assert_eq!(slot.perf_ring_of(34), None, "another descriptor's signal");
        assert_eq!(slot.perf_ring_of(NO_FD), None);
        assert_eq!(t.occupancy(), (1, 1));
        assert_eq!(t.take_all_samplers(), vec![ThreadSampler::Perf(event)]);
        assert_eq!(slot.perf_ring_of(33), None);
        assert_eq!(t.occupancy(), (1, 0));
    }

    #[test]
    fn insert_lookup_remove() {
        static TABLE_A: ThreadTable = ThreadTable::new();
        let t = &TABLE_A;
        t.insert(100, env(8), 1).unwrap();
        t.insert(101, env(16), 2).unwrap();
        assert_eq!(t.lookup(100).unwrap().env(), env(8));
        assert_eq!(t.lookup(101).unwrap().serial(), 2);
        assert!(!t.set_sampler(100, 2, timer(7)), "another life's timer");
        assert!(t.set_sampler(100, 1, timer(7)));
        assert_eq!(t.occupancy(), (2, 1));
        assert_eq!(
            t.remove(100),
            Some(Removed {
                serial: 1,
                sampler: Some(timer(7)),
                own_context: std::ptr::null_mut()
            })
        );
        assert!(t.lookup(100).is_none());
        assert!(t.lookup(101).is_some());
        assert_eq!(t.remove(100), None);
        assert!(t.lookup(0).is_none() && t.lookup(-1).is_none());
    }

    #[test]
    fn scans_go_round_once_and_resume() {
        static TABLE_B: ThreadTable = ThreadTable::new();
        let t = &TABLE_B;
        for tid in 1..=10 {
            t.insert(tid, env(8), tid as u64).unwrap();
        }
        let mut all = Vec::new();
        let end = t.scan_from(0, |s| {
            all.push(s.tid());
            true
        });
        all.sort();
        assert_eq!(all, (1..=10).collect::<Vec<_>>());
        assert_eq!(end, 0, "a full round ends where it started");
        // Three at a time, resuming where the last batch stopped: every thread once per round.
        let (mut cursor, mut seen) = (0, Vec::new());
        for _ in 0..4 {
            let mut batch = 0;
            cursor = t.scan_from(cursor, |s| {
                seen.push(s.tid());
                batch += 1;
                batch < 3
            });
        }
        assert_eq!(seen.len(), 12);
        let mut first_round = seen[..10].to_vec();
        first_round.sort();
        assert_eq!(first_round, (1..=10).collect::<Vec<_>>());
        assert_eq!(seen[10..], seen[..2]);
        let held = t.hold_registrations();
        assert!(held.slot(3, 3).is_some());
        assert!(held.slot(3, 4).is_none());
        assert!(held.slot(99, 3).is_none());
    }

    #[test]
    fn scanned_threads_are_registered_taken_over_and_removed_by_serial() {
        static TABLE_E: ThreadTable = ThreadTable::new();
        let t = &TABLE_E;
        t.insert_native(200, 5, ThreadRole::Gc).unwrap();
        let slot = t.lookup(200).unwrap();
        assert_eq!((slot.role(), slot.serial()), (ThreadRole::Gc, 5));
        assert!(slot.env().is_null(), "a scanned thread is never walked");
        assert_eq!(
            t.insert_native(200, 6, ThreadRole::Vm),
            Err(NotInserted::Present)
        );
        assert!(t.set_sampler(200, 5, timer(70)));
        // The thread turns out to be a Java thread (ThreadStart after the scan saw it): the
        // Java registration takes the entry over and hands back the scan's timer.
        assert_eq!(
            t.insert(200, env(8), 9),
            Ok(Inserted::TookOver(Removed {
                serial: 5,
                sampler: Some(timer(70)),
                own_context: std::ptr::null_mut()
            }))
        );
        // A second Java registration of the same thread changes nothing.
        assert_eq!(t.insert(200, env(16), 10), Ok(Inserted::AlreadyJava));
        assert_eq!(t.lookup(200).unwrap().serial(), 9);
        let slot = t.lookup(200).unwrap();
        assert_eq!(
            (slot.role(), slot.serial(), slot.env()),
            (ThreadRole::Java, 9, env(8))
        );
        // The scan's later removal of its (old) entry leaves the Java thread alone.
        assert_eq!(t.remove_native(200, 5), None);
        assert_eq!(
            t.remove_native(200, 9),
            None,
            "Java threads end at ThreadEnd"
        );
        assert!(t.lookup(200).is_some());
        // A Java thread's tid is not taken by the scan.
        assert_eq!(
            t.insert_native(200, 10, ThreadRole::Jit),
            Err(NotInserted::Present)
        );
        // A scanned thread that ends is removed with its timer.
        t.insert_native(201, 11, ThreadRole::Jit).unwrap();
        assert!(t.set_sampler(201, 11, timer(71)));
        assert_eq!(t.occupancy(), (2, 1));
        assert_eq!(t.remove_native(201, 12), None, "another life");
        assert_eq!(
            t.remove_native(201, 11).map(|r| r.sampler),
            Some(Some(timer(71)))
        );
        assert!(t.lookup(201).is_none());
        // Its tombstone serves the next thread, registered as Java.
        assert_eq!(t.insert(201, env(16), 12), Ok(Inserted::New));
        assert_eq!(t.lookup(201).unwrap().role(), ThreadRole::Java);
        assert_eq!(
            t.insert_native(0, 1, ThreadRole::Gc),
            Err(NotInserted::Full)
        );
    }

    #[test]
    fn remove_all_empties_the_table_and_hands_back_timers() {
        static TABLE_F: ThreadTable = ThreadTable::new();
        let t = &TABLE_F;
        t.insert(300, env(8), 1).unwrap();
        t.insert_native(301, 2, ThreadRole::Gc).unwrap();
        assert!(t.set_sampler(301, 2, timer(9)));
        let mut removed = t.remove_all();
        removed.sort_by_key(|(tid, _)| *tid);
        assert_eq!(removed, vec![(300, None), (301, Some(timer(9)))]);
        assert_eq!(t.occupancy(), (0, 0));
        assert!(t.lookup(300).is_none() && t.lookup(301).is_none());
        // The tombstones serve the next registrations.
        assert_eq!(t.insert(301, env(8), 3), Ok(Inserted::New));
        assert_eq!(t.lookup(301).unwrap().role(), ThreadRole::Java);
    }

    #[test]
    fn churn_reuses_tombstones_and_stays_findable() {
        static TABLE_C: ThreadTable = ThreadTable::new();
        let t = &TABLE_C;
        // A long-lived population plus heavy churn of short-lived threads with fresh tids,
        // as when 10,000 short threads come and go.
        for tid in 1..=200 {
            t.insert(tid, env(8), tid as u64).unwrap();
        }
        for round in 0..100_000i32 {
            let tid = 1_000 + round;
            t.insert(tid, env(8), 0).unwrap();
            assert!(t.lookup(tid).is_some());
            t.remove(tid).unwrap();
        }
        for tid in 1..=200 {
            assert_eq!(t.lookup(tid).unwrap().serial(), tid as u64);
        }
        assert_eq!(t.occupancy().0, 200);
    }

    #[test]
    fn full_table_is_an_error_not_a_hang() {
        static TABLE_D: ThreadTable = ThreadTable::new();
        let t = &TABLE_D;
        let mut inserted = 0;
        for tid in 1..=(CAPACITY as i32 * 2) {
            if t.insert(tid, env(8), 0).is_ok() {
                inserted += 1;
            }
        }
        assert!(inserted >= CAPACITY / 2, "{inserted}");
        assert!(inserted <= CAPACITY);
    }
}
