//! The SIGPROF handler: walk the interrupted thread's stack and store it.
//!
//! Three sources send SIGPROF: the per-thread perf events (`si_code` `POLL_IN`, `si_fd` the
//! event's descriptor: [`crate::sampling::perf_events`]), the per-thread CPU timers
//! (`si_code == SI_TIMER`, or the kernel for `clock=itimer`) and the wall-clock thread
//! ([`crate::engines::wall`], `si_code == SI_QUEUE` with a tagged `si_value` carrying the
//! thread state; the weight waits in the thread's slot). The handler tells them apart by the
//! siginfo and records a CPU or a wall sample.
//!
//! A sample's stack, leaf first: the kernel frames of a perf event's record, the native
//! frames from the interrupted pc up to the first Java frame ([`native_walk`]), then the Java
//! frames from AsyncGetCallTrace. A thread with no JNIEnv (a GC, JIT compiler or VM thread)
//! gets kernel and native frames and its role ([`RecordHeader::role`]).
//!
//! Everything reachable from [`on_signal`] is async-signal-safe. The calls it makes:
//! - `syscall(SYS_gettid)`, `clock_gettime(CLOCK_MONOTONIC)` (async-signal-safe per POSIX;
//!   a vDSO read on Linux), reading and writing `errno`;
//! - reads of the kernel's siginfo ([`WallSignal::decode`]: shifts and masks), and for wall
//!   signals an atomic swap and store in the thread's slot
//!   ([`crate::sampling::thread_table::WallMarks::take_pending`], `no_java`);
//! - for perf signals, loads and stores in the thread's own ring buffer
//!   ([`perf_ring::drain`]), never a system call;
//! - the native walk ([`native_walk::walk`]): searches of the module set, aligned loads
//!   inside the thread's stack, and one `msync` system call the first time a thread's stack
//!   reaches a new depth;
//! - AsyncGetCallTrace (HotSpot's walker, designed to be called from a signal handler), on
//!   Java threads only: a thread registered without a JNIEnv (a GC, JIT compiler or VM
//!   thread, found by [`crate::threads::native_threads`]) is never given to it; when it
//!   fails on the interrupted frame, again from the first Java frame the native walk found
//!   ([`walk_from_frame`]);
//! - atomics, and bounds-checked copies into preallocated memory ([`SampleBuffer`]);
//! - volatile loads of the thread's span context record ([`crate::context::reader::read`]),
//!   memory that is never freed;
//! - when AsyncGetCallTrace cannot place the top frame, volatile reads of the top of the
//!   interrupted thread's own stack and writes to the signal's ucontext, restored before the
//!   handler returns ([`crate::sampling::caller_walk`]).
//!
//! It never allocates, never blocks (the buffer uses try-locks), never touches thread-local
//! storage, and cannot panic: indexing is denied in this module and every lookup is `get`.
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use otelprof_native_frames::walk::{End, Walked};

use crate::kinds::SampleKind;
use crate::sampling::caller_walk::{walk_from_caller, walk_from_frame};
use crate::sampling::native_walk;
use crate::sampling::os::{gettid, monotonic_ns};
use crate::sampling::perf_events::MAX_KERNEL_FRAMES;
use crate::sampling::perf_ring;
use crate::sampling::sample_buffer::{self, RecordHeader, SampleBuffer, Scratch};
use crate::sampling::thread_roles::ThreadRole;
use crate::sampling::thread_table::{ThreadSlot, ThreadTable};
use crate::sampling::wall_signal::WallSignal;
use crate::stats::{self, COUNTERS};
use crate::sys::perf::{PollSigInfo, POLL_CODES};
use crate::sys::{AsgctCallTrace, AsyncGetCallTraceFn, TimerSigInfo, SI_TIMER};

/// `num_frames` code for a sample of a thread that is not walked: one the agent has not
/// registered (a thread started since the last thread scan, under `clock=itimer`; or one
/// ending), or one registered with a role ([`RecordHeader::role`] then names it). Outside
/// AsyncGetCallTrace's own codes.
pub(crate) const NOT_A_JAVA_THREAD: i32 = -100;

/// What the handler needs, built once before the handler is installed and never freed, so a
/// late signal can never see freed memory.
pub(crate) struct Sampler {
    pub(crate) table: &'static ThreadTable,
    pub(crate) buffer: SampleBuffer,
    pub(crate) walk: AsyncGetCallTraceFn,
    /// Deepest stack recorded (`depth=` of the running session, at most what the buffer was
    /// made for: [`SampleBuffer::max_frames`]).
    pub(crate) depth: AtomicI32,
}

impl Sampler {
    /// Deepest stack recorded now.
    ///
    /// # Signal safety
    /// One atomic load.
    #[inline]
    pub(crate) fn max_depth(&self) -> i32 {
        self.depth.load(Ordering::Relaxed)
    }

    /// Sets the deepest stack recorded, within what the buffer holds; returns the depth set.
    pub(crate) fn set_max_depth(&self, depth: u32) -> u32 {
        let depth = depth.clamp(1, self.buffer.max_frames());
        self.depth
            .store(i32::try_from(depth).unwrap_or(i32::MAX), Ordering::Relaxed);
        depth
    }
}

static SAMPLER: AtomicPtr<Sampler> = AtomicPtr::new(std::ptr::null_mut());
/// Samples are taken only while this is set.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Handlers currently running; shutdown waits for zero before the final drain.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// Publishes the sampler the handler uses. Called once; later calls are ignored (the first
/// sampler stays, because a handler may be using it).
pub(crate) fn install(sampler: &'static Sampler) -> bool {
    SAMPLER
        .compare_exchange(
            std::ptr::null_mut(),
            sampler as *const Sampler as *mut Sampler,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
}

pub(crate) fn installed() -> Option<&'static Sampler> {
    let p = SAMPLER.load(Ordering::Acquire);
    // SAFETY: the only non-null value ever stored is a `&'static Sampler` (see `install`).
    (!p.is_null()).then(|| unsafe { &*p })
}

pub(crate) fn set_active(on: bool) {
    ACTIVE.store(on, Ordering::SeqCst);
}

pub(crate) fn is_active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

/// Waits until no handler is running (after `set_active(false)`), at most `timeout`.
pub(crate) fn quiesce(timeout: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    while IN_HANDLER.load(Ordering::SeqCst) != 0 {
        if start.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    true
}

/// The path of another copy of this library whose handler holds SIGPROF, if one does: a
/// second `libotelprof.so` (loaded from another path, so with statics of its own) must not
/// start a second sampler beside it.
pub(crate) fn other_copy() -> Option<String> {
    // SAFETY: a zeroed sigaction is a valid out value; a null new action only reads.
    let current = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) != 0 {
            return None;
        }
        old.sa_sigaction
    };
    let ours = on_signal as *const () as usize;
    if current == libc::SIG_DFL || current == libc::SIG_IGN || current == ours {
        return None;
    }
    let file_of = |addr: usize| -> Option<std::ffi::CString> {
        // SAFETY: all-zero Dl_info is valid; dladdr only reads the address.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0
            || info.dli_fname.is_null()
        {
            return None;
        }
        // SAFETY: dladdr returned a NUL-terminated path of a loaded object.
        Some(unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_owned())
    };
    let theirs = file_of(current)?;
    if file_of(ours).as_ref() == Some(&theirs) {
        return None;
    }
    // SAFETY: RTLD_NOLOAD only finds an object already loaded; the reference it takes is
    // dropped right after the lookup.
    let is_otelprof = unsafe {
        let handle = libc::dlopen(theirs.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if handle.is_null() {
            return None;
        }
        let sym = libc::dlsym(
            handle,
            c"Java_otelprof_internal_NativeBridge_active0".as_ptr(),
        );
        libc::dlclose(handle);
        !sym.is_null()
    };
    is_otelprof.then(|| theirs.to_string_lossy().into_owned())
}

/// Installs [`on_signal`] for `signo`. Returns the previous handler if it was someone else's.
pub(crate) fn install_handler(signo: libc::c_int) -> std::io::Result<Option<usize>> {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; we fill the fields
    // sigaction(2) reads. `on_signal` has the SA_SIGINFO signature.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signo, &sa, &mut old) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let prev = old.sa_sigaction;
        let ours = on_signal as *const () as usize;
        Ok((prev != libc::SIG_DFL && prev != libc::SIG_IGN && prev != ours).then_some(prev))
    }
}

/// The SIGPROF handler.
///
/// # Safety
/// Only the kernel calls this, with the siginfo and ucontext of the signal it delivers.
///
/// # Signal safety
/// This is the signal handler; see the module docs for every call it makes. It saves and
/// restores `errno`, because the code it interrupted may be about to read it.
pub(crate) unsafe extern "C" fn on_signal(
    _signo: libc::c_int,
    info: *mut libc::siginfo_t,
    ucontext: *mut libc::c_void,
) {
    // SAFETY: __errno_location returns the calling thread's errno slot; it is
    // async-signal-safe (a TLS address computed by the C library for every thread at start).
    let errno = unsafe { *libc::__errno_location() };
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    if let Some(sampler) = installed() {
        // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers.
        let trigger = unsafe { trigger(info) };
        if ACTIVE.load(Ordering::SeqCst) {
            // SAFETY: `ucontext` is the kernel's context for this signal.
            unsafe { sampler.sample(trigger, ucontext) };
        } else {
            sampler.discard(trigger);
        }
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Why the handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// A CPU timer: the sample stands for this many intervals (1 plus the expirations the
    /// kernel merged into the signal when the thread could not take it in time).
    Cpu { intervals: u64 },
    /// A perf event's overflow, from descriptor `fd`: the records in the thread's ring say
    /// how many intervals the sample stands for.
    Perf { fd: i32 },
    /// The wall-clock thread.
    Wall(WallSignal),
}

/// Least time between two drains asked for by walks that met code the module watch has not
/// prepared ([`Sampler::ask_to_look_at_code`]).
const CODE_LOOK_EVERY_NS: u64 = 50_000_000;
/// CLOCK_MONOTONIC time of the last such request.
static CODE_LOOK_ASKED_NS: AtomicU64 = AtomicU64::new(0);

/// Reads what sent this signal.
///
/// # Safety
/// `info` is null or points to the siginfo the kernel passed to the handler.
///
/// # Signal safety
/// Reads a few integers.
pub(crate) unsafe fn trigger(info: *const libc::siginfo_t) -> Trigger {
    if info.is_null() {
        return Trigger::Cpu { intervals: 1 };
    }
    // SAFETY: the wall thread's signals carry a queued siginfo; WallSignal::from_siginfo reads
    // only the QueueSigInfo prefix, which every siginfo_t has room for (checked in sys tests).
    if let Some(wall) = unsafe { WallSignal::from_siginfo(info) } {
        return Trigger::Wall(wall);
    }
    // SAFETY: PollSigInfo is a prefix of siginfo_t's layout (checked in sys tests).
    let poll = unsafe { &*(info as *const PollSigInfo) };
    if POLL_CODES.contains(&poll.si_code) {
        return Trigger::Perf { fd: poll.si_fd };
    }
    // SAFETY: TimerSigInfo is a prefix of siginfo_t's layout (checked in sys tests).
    let t = unsafe { &*(info as *const TimerSigInfo) };
    let intervals = if t.si_code == SI_TIMER && t.si_overrun > 0 {
        1u64.saturating_add(t.si_overrun as u64)
    } else {
        1
    };
    Trigger::Cpu { intervals }
}

/// What a sample records of the thread, besides its stack.
struct Taken {
    kind: SampleKind,
    weight: u64,
    /// A [`crate::kinds::ThreadState`] for wall samples.
    state: u8,
    /// The role of a thread that is not walked with AsyncGetCallTrace.
    role: ThreadRole,
}

impl Sampler {
    /// Takes one sample of the calling thread.
    ///
    /// # Safety
    /// `ucontext` is the context of the signal being handled on this thread.
    ///
    /// # Signal safety
    /// See the module docs. `ucontext` is passed to AsyncGetCallTrace unchanged (or changed
    /// and restored before the handler returns).
    pub(crate) unsafe fn sample(&self, trigger: Trigger, ucontext: *mut libc::c_void) {
        let tid = gettid();
        let slot = self.table.lookup(tid);
        if slot.is_none() {
            stats::bump(&COUNTERS.unknown_thread);
        }
        let mut kernel = [0u64; MAX_KERNEL_FRAMES as usize];
        let Some((taken, kernel_frames)) = Self::what(trigger, slot, &mut kernel) else {
            return;
        };
        let (env, serial, record) = slot
            .map_or((std::ptr::null_mut(), 0, std::ptr::null_mut()), |s| {
                (s.env(), s.serial(), s.context())
            });
        let header = RecordHeader {
            num_frames: 0,
            tid,
            serial,
            time_ns: monotonic_ns(),
            weight: taken.weight,
            kind: taken.kind as u8,
            state: taken.state,
            role: taken.role as u8,
            // SAFETY: slots only ever point to records from the never-freed pool, and this
            // thread's slot to a record this thread (or the virtual thread it runs) owns.
            context: unsafe { crate::context::reader::read(record) },
            ..Default::default()
        };
        let kernel = kernel.get(..kernel_frames).unwrap_or(&[]);
        let (mut walked, mut native_end) = (0, 0);
        let result = self
            .buffer
            .write_mixed(tid as usize, header, |header, scratch| {
                // SAFETY: `ucontext` is this handler's; `env` this thread's JNIEnv (or null).
                walked = unsafe { self.fill(header, scratch, kernel, slot, env, ucontext) };
                native_end = header.native_end;
                walked
            });
        if native_end == End::TablePending as u8 || native_end == End::NoModule as u8 {
            self.ask_to_look_at_code(header.time_ns);
        }
        if let (SampleKind::Wall, Some(slot)) = (taken.kind, slot) {
            // A thread that runs no Java code (a JVM service thread) is idle to the wall clock.
            let no_java = walked == crate::sys::ticks::NO_JAVA_FRAME
                || walked == crate::sys::ticks::UNKNOWN_NOT_JAVA;
            slot.wall.no_java.store(no_java, Ordering::Relaxed);
        }
        if sample_buffer::counted(result) {
            match taken.kind {
                SampleKind::Wall => stats::bump(&COUNTERS.wall_samples),
                _ => {
                    stats::bump(&COUNTERS.cpu_walks);
                    if !env.is_null() {
                        stats::bump(&COUNTERS.cpu_walks_java);
                    }
                    COUNTERS.weight.fetch_add(taken.weight, Ordering::Relaxed);
                    if let Some(c) = taken.role.samples_counter() {
                        c.fetch_add(taken.weight, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// A walk met a library whose unwind table is not built, or code in no known library:
    /// the aggregator's drain wakes the module watch for it, so ask for a drain now rather
    /// than at the aggregator's timeout, but at most once per [`CODE_LOOK_EVERY_NS`] (code
    /// that stays in no known library must not turn every sample into a wake).
    ///
    /// # Signal safety
    /// An atomic load and compare-exchange, and [`SampleBuffer::ask_for_drain`].
    #[inline]
    fn ask_to_look_at_code(&self, now_ns: u64) {
        let last = CODE_LOOK_ASKED_NS.load(Ordering::Relaxed);
        if now_ns.wrapping_sub(last) >= CODE_LOOK_EVERY_NS
            && CODE_LOOK_ASKED_NS
                .compare_exchange(last, now_ns, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.buffer.ask_for_drain();
        }
    }

    /// Empties the thread's perf ring while sampling is off (before a session starts, or
    /// after it stopped): the CPU it stands for was used while nobody asked for a profile,
    /// and left in the ring it would all be credited to the first sample taken later.
    ///
    /// # Signal safety
    /// As [`Sampler::what`].
    fn discard(&self, trigger: Trigger) {
        let Trigger::Perf { fd } = trigger else {
            return;
        };
        let ring = self.table.lookup(gettid()).and_then(|s| s.perf_ring_of(fd));
        if let Some(ring) = ring {
            // SAFETY: as in `what`: this thread's own ring, mapped while published.
            let drained = unsafe { perf_ring::drain(ring, &mut []) };
            COUNTERS
                .perf_discarded
                .fetch_add(drained.intervals(), Ordering::Relaxed);
        }
    }

    /// What the signal asks to record, with the kernel frames of a perf sample copied to
    /// `kernel`; `None` when there is nothing to record.
    ///
    /// # Signal safety
    /// Atomics of the thread's slot, and a drain of its perf ring ([`perf_ring::drain`]).
    fn what(
        trigger: Trigger,
        slot: Option<&ThreadSlot>,
        kernel: &mut [u64],
    ) -> Option<(Taken, usize)> {
        // A thread with a JNIEnv is walked, whatever else its slot says (a Java thread
        // taking over the scan's entry sets its JNIEnv first).
        let role = match slot {
            Some(s) if s.env().is_null() => s.role(),
            _ => ThreadRole::Java,
        };
        let cpu = |weight| Taken {
            kind: SampleKind::Cpu,
            weight,
            state: 0,
            role,
        };
        match trigger {
            Trigger::Cpu { intervals } => Some((cpu(intervals), 0)),
            Trigger::Perf { fd } => {
                let Some(ring) = slot.and_then(|s| s.perf_ring_of(fd)) else {
                    stats::bump(&COUNTERS.perf_foreign);
                    return None;
                };
                // SAFETY: the ring of this thread's own event, published in its slot; only
                // this thread's handler drains it, and it stays mapped while the thread is
                // registered with it (see crate::sampling::cpu_clock).
                let drained = unsafe { perf_ring::drain(ring, kernel) };
                COUNTERS
                    .perf_records
                    .fetch_add(drained.records, Ordering::Relaxed);
                COUNTERS
                    .perf_lost
                    .fetch_add(drained.lost, Ordering::Relaxed);
                if drained.intervals() == 0 {
                    stats::bump(&COUNTERS.perf_empty);
                    return None;
                }
                Some((cpu(drained.intervals()), drained.kernel_frames))
            }
            Trigger::Wall(w) => {
                // The wall time of every wall signal since the last sample (see WallSignal).
                let weight = slot.map_or(0, |s| s.wall.take_pending());
                if weight == 0 {
                    stats::bump(&COUNTERS.wall_empty);
                    return None;
                }
                Some((
                    Taken {
                        kind: SampleKind::Wall,
                        weight,
                        state: w.state as u8,
                        role,
                    },
                    0,
                ))
            }
        }
    }

    /// Fills a record's scratch arrays: the kernel frames, the native walk, then the Java
    /// frames of a thread with a JNIEnv. Returns the AsyncGetCallTrace result (or
    /// [`NOT_A_JAVA_THREAD`]).
    ///
    /// # Safety
    /// `ucontext` is the context of the signal being handled on this thread; `env` is null
    /// or this thread's JNIEnv; `slot` is this thread's.
    ///
    /// # Signal safety
    /// Copies, the native walk ([`native_walk::walk`]) and AsyncGetCallTrace.
    unsafe fn fill(
        &self,
        header: &mut RecordHeader,
        scratch: Scratch<'_>,
        kernel: &[u64],
        slot: Option<&ThreadSlot>,
        env: *mut jni::sys::JNIEnv,
        ucontext: *mut libc::c_void,
    ) -> i32 {
        let k = kernel.len().min(scratch.pcs.len());
        if let (Some(dst), Some(src)) = (scratch.pcs.get_mut(..k), kernel.get(..k)) {
            dst.copy_from_slice(src);
        }
        header.kernel_frames = k as u16;
        let native = match (slot, scratch.pcs.get_mut(k..)) {
            // SAFETY: per this function's contract.
            (Some(slot), Some(out)) if slot.role() == ThreadRole::Agent => unsafe {
                native_walk::leaf(ucontext, out)
            },
            // SAFETY: per this function's contract.
            (Some(slot), Some(out)) => unsafe { native_walk::walk(ucontext, slot, out) },
            _ => Walked {
                frames: 0,
                end: End::NotWalked,
                at: Default::default(),
                guessed: 0,
            },
        };
        header.native_frames = native.frames as u16;
        header.native_end = native.end as u8;
        if native.end != End::NotWalked {
            stats::native_walk_ended(native.end);
        }
        if env.is_null() {
            return NOT_A_JAVA_THREAD;
        }
        let mut trace = AsgctCallTrace {
            env_id: env,
            num_frames: 0,
            frames: scratch.frames,
        };
        let depth = self.max_depth().min(scratch.capacity);
        // SAFETY: `frames` has room for `capacity` entries and we ask for at most that many;
        // `env` is this thread's JNIEnv (cached at ThreadStart); `ucontext` is the context the
        // kernel gave this handler.
        unsafe { (self.walk)(&mut trace, depth, ucontext) };
        let failed = |n: i32| {
            n == crate::sys::ticks::UNKNOWN_JAVA
                || n == crate::sys::ticks::NOT_WALKABLE_JAVA
                || n == crate::sys::ticks::UNKNOWN_NOT_JAVA
        };
        if failed(trace.num_frames) && native.end == End::ReachedJava && native.frames > 0 {
            // SAFETY: as above; the context is restored before the call returns.
            if unsafe { walk_from_frame(self.walk, &mut trace, depth, ucontext, native.at) } {
                stats::bump(&COUNTERS.walks_from_native);
            }
        }
        if trace.num_frames == crate::sys::ticks::UNKNOWN_JAVA
            || trace.num_frames == crate::sys::ticks::NOT_WALKABLE_JAVA
        {
            // SAFETY: as above; `ucontext` is this handler's context, restored before the
            // call returns.
            if unsafe { walk_from_caller(self.walk, &mut trace, depth, ucontext) } {
                stats::bump(&COUNTERS.walks_recovered);
            }
        }
        trace.num_frames
    }

    /// Records `intervals` of CPU used by `tid`, a thread that is not walked, under its
    /// role's frame: the CPU a thread used before it was found by the thread scan, or before
    /// its sampler started. Returns whether the sample was stored.
    ///
    /// # Signal safety
    /// A buffer write (try-locks, bounds-checked copies) and relaxed atomic adds.
    pub(crate) fn record_unwalked(
        &self,
        tid: i32,
        serial: u64,
        role: ThreadRole,
        intervals: u64,
    ) -> bool {
        let header = RecordHeader {
            tid,
            serial,
            time_ns: monotonic_ns(),
            weight: intervals,
            kind: SampleKind::Cpu as u8,
            role: role as u8,
            ..Default::default()
        };
        let result = self
            .buffer
            .write(tid as usize, header, |_, _| NOT_A_JAVA_THREAD);
        let stored = sample_buffer::counted(result);
        if stored {
            COUNTERS.weight.fetch_add(intervals, Ordering::Relaxed);
            if let Some(c) = role.samples_counter() {
                c.fetch_add(intervals, Ordering::Relaxed);
            }
        }
        stored
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::undocumented_unsafe_blocks
)]
mod tests {
    //! Proof that the sampling path does not allocate: a counting global allocator watches
    //! this test's thread while the real handler runs, fed by real signals (tgkill and a real
    //! per-thread CPU timer). AsyncGetCallTrace is replaced by a stand-in that fills frames the
    //! way HotSpot does; the JVM's own walker is designed for signal handlers.
    use super::*;
    use crate::sampling::timers::ThreadCpuTimer;
    use crate::sys::AsgctCallFrame;
    use jni::sys::{jint, JNIEnv};
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicI32, AtomicU64};

    struct CountingAllocator;
    static WATCHED_TID: AtomicI32 = AtomicI32::new(0);
    static ALLOCS_IN_HANDLER: AtomicU64 = AtomicU64::new(0);
    static ALLOCATE_IN_WALK: AtomicBool = AtomicBool::new(false);
    static FAIL_FIRST_WALK: AtomicBool = AtomicBool::new(false);
    static WALKS: AtomicU64 = AtomicU64::new(0);

    fn note() {
        if IN_HANDLER.load(Ordering::SeqCst) > 0 && gettid() == WATCHED_TID.load(Ordering::SeqCst) {
            ALLOCS_IN_HANDLER.fetch_add(1, Ordering::SeqCst);
        }
    }

    unsafe impl GlobalAlloc for CountingAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            note();
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            note();
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            note();
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            note();
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    const FAKE_DEPTH: usize = 40;

    unsafe extern "C" fn fake_walk(
        trace: *mut AsgctCallTrace,
        depth: jint,
        _uc: *mut libc::c_void,
    ) {
        let trace = unsafe { &mut *trace };
        if FAIL_FIRST_WALK.load(Ordering::SeqCst)
            && WALKS.fetch_add(1, Ordering::SeqCst).is_multiple_of(2)
        {
            // HotSpot could not place the top frame: the handler retries from the caller.
            trace.num_frames = crate::sys::ticks::UNKNOWN_JAVA;
            return;
        }
        if ALLOCATE_IN_WALK.load(Ordering::SeqCst) {
            // The control case: a walker that allocates must be caught.
            std::hint::black_box(Box::new(depth));
        }
        let n = FAKE_DEPTH.min(depth as usize);
        for i in 0..n {
            unsafe {
                *trace.frames.add(i) = AsgctCallFrame {
                    lineno: i as i32,
                    method_id: (0x1000 + i) as _,
                }
            };
        }
        trace.num_frames = n as i32;
    }

    fn thread_cpu() -> std::time::Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    fn signal_self(times: usize) {
        let (pid, tid) = (unsafe { libc::getpid() }, gettid());
        for _ in 0..times {
            // The handler runs before tgkill returns to us.
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGPROF) };
        }
    }

    static COMPARISONS: AtomicU64 = AtomicU64::new(0);

    /// A qsort comparator that burns a little CPU, and signals its own thread every 5,000th
    /// call: samples land in it, under glibc's qsort (built without frame pointers).
    extern "C" fn compare(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
        let (a, b) = unsafe { (*(a as *const u64), *(b as *const u64)) };
        let mut x = a ^ b;
        for _ in 0..50 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        std::hint::black_box(x);
        if COMPARISONS
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(5_000)
        {
            signal_self(1);
        }
        a.cmp(&b) as libc::c_int
    }

    /// The handler's native walk (with the unwind tables of this process's libraries, built as
    /// walks meet them) and a real perf event on this thread, when the kernel allows one:
    /// samples taken in the comparator of a libc qsort walk through qsort to the thread's
    /// first frame, and the perf records' intervals are the samples' weight.
    fn native_walks_and_perf_events(sampler: &'static Sampler, table: &ThreadTable, tid: i32) {
        use crate::code_map::names::NativeNames;
        use crate::sampling::cpu_clock::ThreadSampler;
        use crate::sampling::perf_events::{self, PerfConfig, PerfEvent, Probe, Scope};
        // The libraries' tables are built only once walks have met them, as the module watch
        // does: the first walks end at a library without one.
        let mut scanner = crate::code_map::module_scan::ModuleScanner::new(None);
        scanner.scan().unwrap();
        let interval = std::time::Duration::from_millis(1);
        let scope = match perf_events::probe(interval) {
            Probe::Kernel => Some(Scope::Kernel),
            Probe::UserOnly(_) => Some(Scope::User),
            Probe::Refused(_) => None,
        };
        let event = scope.map(|scope| {
            let config = PerfConfig {
                interval,
                scope,
                signo: libc::SIGPROF,
            };
            PerfEvent::open(tid, &config).unwrap()
        });
        if let Some(event) = event {
            assert!(table.set_sampler(tid, 7, ThreadSampler::Perf(event)));
        }
        let records_before = stats::get(&COUNTERS.perf_records);
        let mut data: Vec<u64> = (0..20_000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let (mut native, mut weight, mut bottom, mut with_kernel) = (Vec::new(), 0, 0, 0);
        let mut ends = [0usize; End::ALL.len()];
        let start = thread_cpu();
        let records = || stats::get(&COUNTERS.perf_records) - records_before;
        let enough = |n: usize| n >= 200 && (scope.is_none() || records() >= 200);
        while !enough(native.len()) && thread_cpu() - start < std::time::Duration::from_secs(10) {
            data.reverse();
            // SAFETY: a valid array of u64 and a comparator for u64.
            unsafe {
                libc::qsort(
                    data.as_mut_ptr() as *mut libc::c_void,
                    data.len(),
                    8,
                    Some(compare),
                )
            };
            scanner.build_wanted();
            sampler.buffer.drain(|r| {
                weight += r.header.weight;
                if let Some(e) = ends.get_mut(usize::from(r.header.native_end)) {
                    *e += 1;
                }
                if r.header.native_end == End::TablePending as u8 {
                    return;
                }
                with_kernel += usize::from(!r.kernel.is_empty());
                if r.header.native_end == End::StackBottom as u8 {
                    bottom += 1;
                }
                native.push(r.native.to_vec());
            });
        }
        for s in table.take_all_samplers() {
            s.stop();
        }
        // Records stored after the loop's last drain (a perf signal or a comparator's tgkill
        // before the event stopped) are this walk's, not the caller's timer samples.
        sampler.buffer.drain(|r| {
            weight += r.header.weight;
            if r.header.native_end != End::TablePending as u8 {
                with_kernel += usize::from(!r.kernel.is_empty());
            }
        });
        // Named off the handler, as the aggregator does.
        let mut names = NativeNames::default();
        let named: Vec<Vec<String>> = native
            .iter()
            .map(|pcs| {
                pcs.iter()
                    .enumerate()
                    .map(|(i, &pc)| names.native(pc, i == 0).name)
                    .collect()
            })
            .collect();
        let through_qsort = named
            .iter()
            .filter(|f| {
                f.iter().any(|n| n.ends_with("tests::compare"))
                    && f.iter().any(|n| n.contains("qsort"))
                    && f.iter()
                        .any(|n| n.contains("the_sampling_path_does_not_allocate"))
            })
            .count();
        println!(
            "{} samples, {bottom} walked to the thread's start, {through_qsort} through qsort, \
             {with_kernel} with kernel frames, weight {weight}, {} before a table was built; \
             e.g. {:?}",
            named.len(),
            ends[End::TablePending as usize],
            named.iter().find(|f| f.iter().any(|n| n.contains("qsort")))
        );
        assert!(named.len() >= 200, "{} samples", named.len());
        assert!(
            through_qsort >= named.len() / 2,
            "{through_qsort} of {} samples walked from the comparator through qsort",
            named.len()
        );
        assert!(
            bottom >= named.len() * 9 / 10,
            "{bottom} reached the thread's start; ends {ends:?}"
        );
        if scope.is_some() {
            let records = records();
            assert!(records >= 200, "{records} perf records");
            // Every record's interval is in some sample's weight (the tgkill ones weigh 1).
            assert!(weight >= records, "weight {weight} for {records} records");
        }
    }

    #[test]
    fn the_sampling_path_does_not_allocate() {
        static TABLE_A: ThreadTable = ThreadTable::new();
        let table: &'static ThreadTable = &TABLE_A;
        let sampler: &'static Sampler = Box::leak(Box::new(Sampler {
            table,
            buffer: SampleBuffer::new(2, 64, 1 << 20),
            walk: fake_walk,
            depth: AtomicI32::new(64),
        }));
        assert!(install(sampler));
        install_handler(libc::SIGPROF).unwrap();
        let tid = gettid();
        table.insert(tid, 0x1000 as *mut JNIEnv, 7).unwrap();
        WATCHED_TID.store(tid, Ordering::SeqCst);
        set_active(true);

        // The detector works: an allocating walker is seen.
        ALLOCATE_IN_WALK.store(true, Ordering::SeqCst);
        signal_self(10);
        ALLOCATE_IN_WALK.store(false, Ordering::SeqCst);
        assert!(
            ALLOCS_IN_HANDLER.swap(0, Ordering::SeqCst) >= 10,
            "the allocation detector is blind"
        );
        sampler.buffer.drain(|_| {});

        // The real path: signals from tgkill, then from a real CPU timer while burning CPU.
        signal_self(1_000);
        let mut java = 0;
        sampler.buffer.drain(|_| java += 1);
        assert_eq!(java, 1_000);
        // Walks that fail at the top frame and are retried from the caller (reading the top of
        // this thread's stack, rewriting and restoring the signal context).
        let recovered_before = stats::get(&COUNTERS.walks_recovered);
        FAIL_FIRST_WALK.store(true, Ordering::SeqCst);
        signal_self(100);
        FAIL_FIRST_WALK.store(false, Ordering::SeqCst);
        let mut full = 0;
        sampler.buffer.drain(|r| {
            if r.frames.len() == FAKE_DEPTH {
                full += 1;
            }
        });
        assert_eq!(full, 100);
        assert_eq!(
            stats::get(&COUNTERS.walks_recovered) - recovered_before,
            100
        );
        // Burn CPU until 300 ms worth of expirations are stored (the kernel checks CPU timers
        // on ticks that find the thread running, tens of ms apart on a loaded machine, and
        // expirations still undelivered when the timer is deleted are lost: a fixed burn
        // would test the machine's load, not the handler).
        let cpu_start = thread_cpu();
        let timer =
            ThreadCpuTimer::start(tid, libc::SIGPROF, std::time::Duration::from_millis(1)).unwrap();
        let (mut timer_samples, mut timer_weight) = (0u64, 0u64);
        while timer_weight < 300 && thread_cpu() - cpu_start < std::time::Duration::from_secs(5) {
            crate::sampling::timers::burn_thread_cpu(std::time::Duration::from_millis(10));
            sampler.buffer.drain(|r| {
                assert_eq!(r.header.serial, 7);
                assert_eq!(r.frames.len(), FAKE_DEPTH);
                assert_eq!(r.frames[3].lineno, 3);
                timer_samples += 1;
                timer_weight += r.header.weight;
            });
        }
        ThreadCpuTimer::delete(timer).unwrap();
        let cpu_used_ms = (thread_cpu() - cpu_start).as_millis() as u64;
        // Records of the timer's signals are checked below; those of the native walk and
        // the perf event here.
        let mut parked = Vec::new();
        sampler
            .buffer
            .drain(|r| parked.push((r.header, r.frames.len())));
        native_walks_and_perf_events(sampler, table, tid);
        // Wall-clock signals (rt_tgsigqueueinfo, SI_QUEUE) take the wall time left in the slot.
        let slot = table.lookup(tid).unwrap();
        for i in 1..=20u64 {
            slot.wall.pending_ns.fetch_add(1_000 * i, Ordering::SeqCst);
            let state = crate::kinds::ThreadState::Blocked;
            crate::sampling::wall_signal::send(tid, WallSignal { state }).unwrap();
        }
        // One with nothing pending records nothing.
        crate::sampling::wall_signal::send(
            tid,
            WallSignal {
                state: crate::kinds::ThreadState::Runnable,
            },
        )
        .unwrap();
        assert!(!slot.wall.no_java.load(Ordering::SeqCst));
        // A thread the table does not know is recorded, not dropped.
        table.remove(tid).unwrap();
        signal_self(5);
        set_active(false);
        signal_self(5); // ignored while inactive
        WATCHED_TID.store(0, Ordering::SeqCst);

        assert_eq!(
            ALLOCS_IN_HANDLER.load(Ordering::SeqCst),
            0,
            "the handler allocated"
        );
        let (mut unknown, mut weight, mut wall, mut wall_ns) = (0, 0, 0, 0);
        for (header, frames) in parked {
            assert_eq!(header.serial, 7);
            assert_eq!(frames, FAKE_DEPTH);
            timer_samples += 1;
            timer_weight += header.weight;
        }
        sampler.buffer.drain(|r| {
            if r.header.kind == SampleKind::Wall as u8 {
                wall += 1;
                wall_ns += r.header.weight;
                assert_eq!(r.header.state, crate::kinds::ThreadState::Blocked as u8);
                assert_eq!(r.frames.len(), FAKE_DEPTH);
                return;
            }
            if r.header.num_frames == NOT_A_JAVA_THREAD {
                unknown += 1;
                weight += r.header.weight;
                return;
            }
            // A timer signal the kernel had queued before the timer was deleted.
            assert_eq!(r.header.serial, 7);
            assert_eq!(r.frames.len(), FAKE_DEPTH);
            timer_samples += 1;
            timer_weight += r.header.weight;
        });
        assert_eq!(unknown, 5);
        assert_eq!(weight, 5, "unknown-thread samples weigh one interval each");
        assert_eq!((wall, wall_ns), (20, 210_000));
        // The timer's signals at 1 ms: how many arrive varies with load (the kernel folds
        // expirations between its checks into one signal's overrun count), but their weight
        // reached 300 and never exceeds the CPU time used since the timer started.
        assert!(timer_samples >= 1);
        assert!(
            timer_weight >= 300 && timer_weight <= cpu_used_ms + 1,
            "weight {timer_weight} for {cpu_used_ms} ms of CPU"
        );
    }
}
