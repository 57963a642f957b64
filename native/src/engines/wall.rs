//! Wall-clock profiling: every thread sampled wherever it is, running or not.
//!
//! A native thread, `otelprof-wall` (attached to the VM as a daemon, not itself profiled),
//! wakes every `wall=` interval and visits the next registered Java threads in the thread
//! table, round-robin, so that every thread gets its turn in order. For each visited thread
//! it reads the Java thread state with JVMTI GetThreadState (here, never in the signal
//! handler), decides whether to sample it, and takes the sample in one of two ways:
//!
//! - **RUNNABLE** (running Java code) and **NATIVE** (`RUNNABLE` to the JVM, but in native
//!   code: a socket read, an epoll wait, a JNI library): a SIGPROF sent with
//!   `rt_tgsigqueueinfo`, `si_code = SI_QUEUE` and a tagged `si_value` ([`WallSignal`]), so the
//!   handler tells it from a CPU timer's (`SI_TIMER`) and records a wall sample like a CPU one:
//!   AsyncGetCallTrace wherever the thread is (no safepoint bias), its span context, its state.
//! - **BLOCKED, WAITING, TIMED_WAITING**: sampled from here, with JVMTI GetStackTrace (a
//!   handshake that the VM completes at once for a thread that waits, whose stack does not
//!   move) and a double-read snapshot of its context record ([`crate::context::reader::snapshot`]).
//!   AsyncGetCallTrace is not reliable on such threads: on a thread blocked on a monitor from
//!   C2-compiled code it fails (`not_walkable_not_Java`) for about a third of the samples, on
//!   JDK 17 and 25 alike, which would hide exactly the contention a wall profile is for. And
//!   no signal interrupts the thread's wait (no spurious wake-ups, no EINTR in blocking calls).
//!
//! # Weights
//!
//! A visit stands for the wall time since the thread's previous visit (or since it
//! registered, or since wall profiling started, whichever is later). The weights of a
//! thread's visits therefore add up to its wall time however many threads share the
//! `wall_threads` signals per interval and however late the wall thread runs; threads that
//! are visited less often get proportionally heavier samples.
//!
//! # Idle threads
//!
//! A thread that waits (BLOCKED, WAITING, TIMED_WAITING, NATIVE such as a socket read or an
//! epoll wait, or running no Java code at all) and is not working for a span
//! is idle. Most of a service's threads are pool threads that stay idle for long stretches
//! with the same stack; sampling each of them on every visit would spend the signal budget on
//! them. So once a thread has been idle for more than [`IDLE_AFTER`] visits in a row, each
//! further idle visit is sampled only with probability `1 / IDLE_EVERY`, and a sampled one
//! weighs `IDLE_EVERY` times its elapsed time (a Horvitz-Thompson estimate: every visit's
//! expected weight is its own elapsed time, so totals stay unbiased, whatever the stacks;
//! only their variance grows, and only for long-idle threads). Visits that are busy, have a
//! span, or belong to a short wait are always sampled, with their own elapsed time, so
//! request threads and the waits inside requests are measured exactly as sampled. Thinned
//! visits do not count against `wall_threads` (samples per interval): the rotation reaches
//! more threads per interval
//! when many are idle, which is where the budget is best spent.
//!
//! An earlier design carried the time of skipped idle visits to the next idle sample; that
//! gave the time of one idle stack to another, and a periodic workload (sleep, then block,
//! then wait, every 100 ms) aliased with the every-k-th choice: in the wall accuracy test the
//! wait's share came out 3.8 pp low. Independent random choices cannot alias.
//!
//! # Garbage collection pauses
//!
//! The wall thread is a Java thread to the VM: a stop-the-world pause stops it too, and the
//! next visit's elapsed time covers the pause, which would be charged to whatever the thread
//! does after it. So the part of a visit's time spent in pauses at least one wall interval
//! long ([`crate::engines::gc`] keeps the recent ones) is split off: it is recorded as its own
//! sample with the state `GC_PAUSE` and the thread's stack and span, which the aggregator
//! marks with a `[GC pause]` leaf frame. A request that sat through a collection shows it in
//! its wall profile. The stack is the one the thread shows at the visit: a waiting thread's
//! GetStackTrace serves both samples; a running thread, signalled for the rest, is walked
//! with GetStackTrace for the pause's sample (only when a long pause happened: rarely).
//! Shorter pauses stay folded into the samples, as do safepoint waits before a pause (JVMTI
//! brackets the collector's work only).
//!
//! # Safety of the signal
//!
//! A thread is signalled only while [`ThreadTable::hold_registrations`] shows it still
//! registered under the same serial: ThreadEnd removes the thread under the same lock before
//! the thread exits, so its tid cannot have been reused. A signal that still reaches a
//! thread after it unregistered is recorded as an unknown thread; one to a thread that is
//! gone fails with ESRCH (counted). Threads sampled with GetStackTrace are named by their
//! `Thread` object (from the global reference kept in [`thread_registry::NAMES`]), never by
//! tid, and their sample is kept only if their slot shows the same thread life before and
//! after.
//!
//! [`ThreadTable::hold_registrations`]:
//!     crate::sampling::thread_table::ThreadTable::hold_registrations

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jni::sys::{jobject, JNIEnv, JavaVM};
use otelprof_primitives::rng::SplitMix64;

use crate::engines::gc;
use crate::jvm::jvmti::{self, delete_local_ref, new_local_ref, Jvmti};
use crate::kinds::{SampleKind, ThreadState};
use crate::sampling::os::{gettid, monotonic_ns};
use crate::sampling::own_threads;
use crate::sampling::sample_buffer::{self, RecordHeader};
use crate::sampling::signal_handler::{self, Sampler};
use crate::sampling::thread_roles::ThreadRole;
use crate::sampling::thread_table::ThreadSlot;
use crate::sampling::wall_signal::{self, WallSignal};
use crate::stats::{self, COUNTERS};
use crate::sys::{AsgctCallFrame, JvmtiFrameInfo};
use crate::threads::thread_registry;

/// After this many idle visits in a row, a thread counts as long idle (see the module docs).
pub(crate) const IDLE_AFTER: u32 = 8;
/// A long-idle thread's visit is sampled with probability 1 / IDLE_EVERY.
pub(crate) const IDLE_EVERY: u32 = 4;

pub(crate) struct Config {
    pub(crate) vm: *mut JavaVM,
    pub(crate) jvmti: Jvmti,
    pub(crate) interval: Duration,
    /// Most samples per interval (`wall_threads=`).
    pub(crate) max_samples: usize,
}

// SAFETY: `vm` is the process-wide JavaVM*, valid on any thread.
unsafe impl Send for Config {}

/// Handle to the running `otelprof-wall` thread.
pub(crate) struct WallClock {
    worker: crate::worker::Worker,
}

impl WallClock {
    pub(crate) fn start(config: Config) -> std::io::Result<WallClock> {
        let worker = crate::worker::Worker::spawn("otelprof-wall", move |control| {
            let tid = gettid();
            own_threads::add_own_tid(tid);
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(config, &control)));
            if result.is_err() {
                log_error!("internal error in the wall-clock thread; wall profiling stopped");
            }
            own_threads::remove_own_tid(tid);
            crate::worker::mark_done(&control);
        })?;
        Ok(WallClock { worker })
    }

    /// Stops the thread and waits for it at most `timeout`. Returns false on timeout.
    pub(crate) fn stop(&self, timeout: Duration) -> bool {
        self.worker.stop(timeout)
    }
}

fn run(config: Config, control: &crate::worker::Shared) {
    // SAFETY: config.vm is the live JavaVM*.
    let jni = unsafe { jvmti::attach_current_thread_as_daemon(config.vm, c"otelprof-wall") };
    let Some(jni) = jni else {
        log_error!("cannot attach the wall-clock thread to the JVM; wall profiling is off");
        return;
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tick_until_stopped(&config, jni, control)
    }));
    // SAFETY: this thread attached itself above; detached on every path, a panic included.
    unsafe { jvmti::detach_current_thread(config.vm) };
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

fn tick_until_stopped(config: &Config, jni: *mut JNIEnv, control: &crate::worker::Shared) {
    let mut wall = Rotation::new(config.jvmti, jni, config.max_samples, config.interval);
    let (lock, cv) = control;
    let mut next = Instant::now() + config.interval;
    loop {
        {
            let mut c = lock.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if c.stop {
                    return;
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                c = match cv.wait_timeout(c, next - now) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                };
            }
        }
        // A fixed rate, not a fixed pause: the visits' weights measure real time anyway,
        // but a steady rate spreads the samples evenly. After a stall, do not catch up.
        next = (next + config.interval).max(Instant::now());
        if signal_handler::is_active() {
            wall.tick();
        }
    }
}

/// A visit's outcome, planned under the names lock and carried out after it is released.
struct Planned {
    tid: i32,
    serial: u64,
    slot: &'static ThreadSlot,
    /// Wall time the visit stands for, the pauses in it included.
    weight_ns: u64,
    /// Of which spent in long garbage collection pauses.
    pause_ns: u64,
    /// Set once the pause is recorded as a sample of its own.
    pause_taken: std::cell::Cell<bool>,
    how: How,
}

enum How {
    /// A RUNNABLE thread: signal it (and, with a pause to record, walk `thread`, a local
    /// reference as below, for the pause's sample; null without).
    Signal(WallSignal, jobject),
    /// A waiting thread: GetStackTrace on `thread`, a local reference of the wall thread
    /// (taken from the names table's global reference, so that neither the table's lock
    /// nor the thread's end can get in the way of the stack walk).
    StackTrace { thread: jobject, state: ThreadState },
}

/// The round-robin over the thread table.
struct Rotation {
    jvmti: Jvmti,
    /// The wall thread's own JNIEnv (for its local references).
    jni: *mut JNIEnv,
    max_samples: usize,
    max_visits: usize,
    cursor: usize,
    started_ns: u64,
    planned: Vec<Planned>,
    random: SplitMix64,
    /// GetStackTrace's output for waiting threads (allocated once).
    frames: Vec<JvmtiFrameInfo>,
    /// Pauses at least this long are split from the samples (the wall interval).
    long_pause_ns: u64,
}

impl Rotation {
    fn new(jvmti: Jvmti, jni: *mut JNIEnv, max_samples: usize, interval: Duration) -> Rotation {
        let depth = signal_handler::installed().map_or(1, |s| s.max_depth().max(1) as usize);
        Rotation {
            jvmti,
            jni,
            max_samples: max_samples.max(1),
            max_visits: max_samples.max(1) * IDLE_EVERY as usize,
            cursor: 0,
            started_ns: monotonic_ns(),
            planned: Vec::with_capacity(max_samples),
            random: SplitMix64(monotonic_ns()),
            frames: (0..depth)
                .map(|_| JvmtiFrameInfo {
                    method: std::ptr::null_mut(),
                    location: 0,
                })
                .collect(),
            long_pause_ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    fn tick(&mut self) {
        let Some(sampler) = signal_handler::installed() else {
            return;
        };
        self.planned.clear();
        let now = monotonic_ns();
        let (mut visits, mut sampled) = (0, 0);
        {
            // Thread objects are used under the names lock: their global references live
            // until the entry is evicted, which needs this lock. Only quick calls here
            // (GetThreadState, NewLocalRef); stack walks come after the lock is released.
            let mut names = thread_registry::NAMES
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let (jvmti, jni, started_ns, max_samples, max_visits) = (
                self.jvmti,
                self.jni,
                self.started_ns,
                self.max_samples,
                self.max_visits,
            );
            let long_pause_ns = self.long_pause_ns;
            let pauses = |since, until| gc::paused_within(since, until, long_pause_ns);
            let (planned, random) = (&mut self.planned, &mut self.random);
            self.cursor = thread_registry::TABLE.scan_from(self.cursor, |slot| {
                let (tid, serial) = (slot.tid(), slot.serial());
                // Java threads only: the GC, JIT and VM threads in the table are there for
                // the CPU profile.
                if own_threads::is_own_tid(tid) || slot.role() != ThreadRole::Java {
                    return true;
                }
                visits += 1;
                let thread = names
                    .get_mut(serial)
                    .map(|info| info.thread)
                    .filter(|t| !t.is_null());
                // SAFETY: a global reference from the names table, alive under its lock.
                let bits = thread.and_then(|t| unsafe { jvmti.thread_state(t) }.ok());
                let draw = random.next_u64();
                let Some(v) = visit(slot, bits, now, started_ns, draw, &pauses) else {
                    return visits < max_visits;
                };
                // SAFETY: `jni` is this thread's; `t` is alive under the lock.
                let local = |t| unsafe { new_local_ref(jni, t) };
                let how = match (v.signal.state, thread) {
                    // Running threads, in Java or native code, are walked by the signal.
                    (ThreadState::Runnable | ThreadState::Native, Some(t)) if v.pause_ns > 0 => {
                        How::Signal(v.signal, local(t))
                    }
                    (ThreadState::Runnable | ThreadState::Native, _) | (_, None) => {
                        How::Signal(v.signal, std::ptr::null_mut())
                    }
                    (state, Some(t)) => {
                        let thread = local(t);
                        if thread.is_null() {
                            return visits < max_visits;
                        }
                        How::StackTrace { thread, state }
                    }
                };
                sampled += 1;
                planned.push(Planned {
                    tid,
                    serial,
                    slot,
                    weight_ns: v.weight_ns,
                    pause_ns: v.pause_ns,
                    pause_taken: std::cell::Cell::new(false),
                    how,
                });
                sampled < max_samples && visits < max_visits
            });
        }
        COUNTERS
            .wall_visits
            .fetch_add(visits as u64, Ordering::Relaxed);
        self.walk_planned(sampler);
        self.signal_planned();
    }

    /// Takes the samples the wall thread walks itself: waiting threads (their state, and the
    /// pauses split from it), and the pauses of running threads (the signal records the
    /// rest). Deletes the local references the plan made.
    fn walk_planned(&mut self, sampler: &Sampler) {
        for p in &self.planned {
            let (thread, parts) = match p.how {
                How::StackTrace { thread, state } => (
                    thread,
                    [
                        (state, p.weight_ns.saturating_sub(p.pause_ns)),
                        (ThreadState::GcPause, p.pause_ns),
                    ],
                ),
                How::Signal(_, thread) => (
                    thread,
                    [
                        (ThreadState::Runnable, 0),
                        (ThreadState::GcPause, p.pause_ns),
                    ],
                ),
            };
            if thread.is_null() {
                continue;
            }
            // SAFETY: `thread` is our live local reference, deleted right after.
            unsafe {
                sample_by_stack_trace(sampler, &self.jvmti, p, thread, &parts, &mut self.frames);
                delete_local_ref(self.jni, thread);
            }
        }
    }

    /// Signals the running threads planned, each with the wall time its sample stands for.
    fn signal_planned(&self) {
        if !self
            .planned
            .iter()
            .any(|p| matches!(p.how, How::Signal(..)))
        {
            return;
        }
        let held = thread_registry::TABLE.hold_registrations();
        for p in &self.planned {
            let How::Signal(signal, _) = p.how else {
                continue;
            };
            let Some(slot) = held.slot(p.tid, p.serial) else {
                stats::bump(&COUNTERS.wall_thread_gone);
                continue;
            };
            // A running thread's pause went to its own sample (when it could be walked).
            let pause = if p.pause_taken.get() { p.pause_ns } else { 0 };
            slot.wall
                .pending_ns
                .fetch_add(p.weight_ns.saturating_sub(pause), Ordering::AcqRel);
            match wall_signal::send(p.tid, signal) {
                Ok(()) => stats::bump(&COUNTERS.wall_signals),
                Err(_) => stats::bump(&COUNTERS.wall_thread_gone),
            }
        }
    }
}

/// Samples a thread from the wall thread: its stack by GetStackTrace, its context by
/// snapshot, written as one record per `(state, weight)` part with a weight (a waiting
/// thread's state, and the garbage collection pauses split from it). The slot must show the
/// same thread life (tid and serial) before and after, or the sample is dropped: the thread
/// may have ended and its slot gone to another.
///
/// # Safety
/// `thread` is a live reference to the Java thread `p` visited; the caller is attached to
/// the VM.
unsafe fn sample_by_stack_trace(
    sampler: &Sampler,
    jvmti: &Jvmti,
    p: &Planned,
    thread: jobject,
    parts: &[(ThreadState, u64)],
    frames: &mut [JvmtiFrameInfo],
) {
    let slot = p.slot;
    let same_life = || slot.tid() == p.tid && slot.serial() == p.serial;
    if !same_life() {
        stats::bump(&COUNTERS.wall_thread_gone);
        return;
    }
    let max = i32::try_from(frames.len()).unwrap_or(i32::MAX);
    // SAFETY: `frames` has room for `max` entries; `thread` per the contract.
    let walked = match unsafe { jvmti.stack_trace(thread, frames.as_mut_ptr(), max) } {
        Ok(n) => n.clamp(0, max),
        Err(_) => {
            // Typically: the thread ended meanwhile.
            stats::bump(&COUNTERS.stack_trace_failed);
            return;
        }
    };
    // SAFETY: slots only point to never-freed pool records.
    let context = unsafe { crate::context::reader::snapshot(slot.context()) };
    if !same_life() {
        stats::bump(&COUNTERS.wall_thread_gone);
        return;
    }
    for &(state, weight) in parts.iter().filter(|(_, w)| *w > 0) {
        if state != ThreadState::GcPause {
            slot.wall.no_java.store(walked == 0, Ordering::Relaxed);
        }
        let header = RecordHeader {
            tid: p.tid,
            serial: p.serial,
            time_ns: monotonic_ns(),
            weight,
            kind: SampleKind::Wall as u8,
            state: state as u8,
            context,
            ..Default::default()
        };
        let result = sampler
            .buffer
            .write(header.tid as usize, header, |out, capacity| {
                let n = walked.min(capacity);
                for (i, f) in frames.iter().take(n.max(0) as usize).enumerate() {
                    // SAFETY: i < n <= capacity, the room the buffer handed us.
                    unsafe {
                        out.add(i).write(AsgctCallFrame {
                            lineno: i32::try_from(f.location).unwrap_or(-1),
                            method_id: f.method,
                        })
                    };
                }
                n
            });
        if sample_buffer::counted(result) {
            stats::bump(&COUNTERS.wall_samples);
            stats::bump(&COUNTERS.wall_stack_traces);
            if state == ThreadState::GcPause {
                p.pause_taken.set(true);
                stats::bump(&COUNTERS.wall_gc_pauses);
            }
        }
    }
}

/// What a visit samples: the signal (with the state seen), the wall time it stands for, and
/// the part of that time spent in long garbage collection pauses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Visit {
    signal: WallSignal,
    weight_ns: u64,
    pause_ns: u64,
}

/// Accounts one visit of `slot` at `now` and returns what to sample, if anything. `bits` is
/// the thread's `jvmtiThreadState`, `None` when it could not be read; `draw` a random number
/// for the thinning of long-idle threads; `pauses(since, until)` the time of `(since, until]`
/// spent in long garbage collection pauses.
fn visit(
    slot: &ThreadSlot,
    bits: Option<i32>,
    now: u64,
    started_ns: u64,
    draw: u64,
    pauses: &dyn Fn(u64, u64) -> u64,
) -> Option<Visit> {
    let marks = &slot.wall;
    let since = marks
        .last_visit_ns
        .swap(now, Ordering::Relaxed)
        .max(started_ns);
    let elapsed = now.saturating_sub(since);
    let bits = bits?;
    // A thread that is not alive (about to end) is not sampled.
    let state = match ThreadState::from_jvmti(bits)? {
        // RUNNABLE to JVMTI, but its last walk found no Java frame: a thread of the JVM's own
        // (signal dispatcher, notification thread) waiting in VM code. Not running Java code.
        ThreadState::Runnable if marks.no_java.load(Ordering::Relaxed) => ThreadState::Native,
        state => state,
    };
    let sampled = |scale: u64| {
        Some(Visit {
            signal: WallSignal { state },
            weight_ns: elapsed.saturating_mul(scale),
            pause_ns: pauses(since, now).min(elapsed).saturating_mul(scale),
        })
    };
    // SAFETY: slots only point to never-freed pool records.
    let has_span = unsafe { crate::context::reader::has_span(slot.context()) };
    let waiting = state != ThreadState::Runnable;
    if has_span || !waiting {
        marks.idle_streak.store(0, Ordering::Relaxed);
        return sampled(1);
    }
    let streak = marks.idle_streak.load(Ordering::Relaxed).saturating_add(1);
    marks.idle_streak.store(streak, Ordering::Relaxed);
    if streak <= IDLE_AFTER {
        return sampled(1);
    }
    if !draw.is_multiple_of(u64::from(IDLE_EVERY)) {
        stats::bump(&COUNTERS.wall_thinned);
        return None;
    }
    sampled(u64::from(IDLE_EVERY))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::thread_table::ThreadTable;
    use crate::sys::thread_state as s;

    #[test]
    fn visits_weigh_elapsed_time_and_thin_long_idle_threads() {
        static TABLE_A: ThreadTable = ThreadTable::new();
        let table = &TABLE_A;
        table.insert(10, std::ptr::dangling_mut(), 1).unwrap();
        let slot = table.lookup(10).unwrap();
        slot.wall.last_visit_ns.store(1_000, Ordering::Relaxed);
        let running = Some(s::ALIVE | s::RUNNABLE);
        let sleeping = Some(s::ALIVE | 0x80 | s::WAITING_WITH_TIMEOUT | s::SLEEPING);
        let (keep, skip) = (IDLE_EVERY as u64, 1);
        let none = |_, _| 0;
        let visit = |slot, bits, now, started, draw| {
            visit(slot, bits, now, started, draw, &none).map(|v| (v.signal, v.weight_ns))
        };
        // Wall profiling started at 5_000: earlier time is not counted.
        let (v, w) = visit(slot, running, 10_000, 5_000, skip).unwrap();
        assert_eq!((v.state, w), (ThreadState::Runnable, 5_000));
        let (_, w) = visit(slot, running, 12_000, 5_000, skip).unwrap();
        assert_eq!(w, 2_000);
        // Short waits are sampled as they are, whatever the draw.
        let mut t = 12_000;
        for _ in 0..IDLE_AFTER {
            t += 1_000;
            let (v, w) = visit(slot, sleeping, t, 5_000, skip).unwrap();
            assert_eq!((v.state, w), (ThreadState::TimedWaiting, 1_000));
        }
        // Long idle: a visit is skipped, or kept for IDLE_EVERY times its own time.
        t += 1_000;
        assert_eq!(visit(slot, sleeping, t, 5_000, skip), None);
        t += 1_000;
        let (_, w) = visit(slot, sleeping, t, 5_000, keep).unwrap();
        assert_eq!(w, u64::from(IDLE_EVERY) * 1_000);
        // Work ends the streak.
        t += 500;
        assert_eq!(visit(slot, running, t, 5_000, skip).unwrap().1, 500);
        t += 1_000;
        assert_eq!(visit(slot, sleeping, t, 5_000, skip).unwrap().1, 1_000);
        // Native code without a span, and no Java frame at all, count as idle; a dead thread
        // is not sampled.
        slot.wall.idle_streak.store(IDLE_AFTER, Ordering::Relaxed);
        t += 1_000;
        let native = Some(s::ALIVE | s::RUNNABLE | s::IN_NATIVE);
        assert_eq!(visit(slot, native, t, 5_000, skip), None);
        slot.wall.no_java.store(true, Ordering::Relaxed);
        t += 1_000;
        assert_eq!(visit(slot, running, t, 5_000, skip), None);
        // Kept (as is every visit of a long idle thread one time in IDLE_EVERY): its state
        // is NATIVE, not the RUNNABLE JVMTI says, since it runs no Java code.
        t += 1_000;
        let (v, _) = visit(slot, running, t, 5_000, keep).unwrap();
        assert_eq!(v.state, ThreadState::Native);
        slot.wall.no_java.store(false, Ordering::Relaxed);
        t += 1_000;
        assert_eq!(visit(slot, Some(s::TERMINATED), t, 5_000, keep), None);
        t += 1;
        assert_eq!(visit(slot, None, t, 5_000, keep), None);
        // With a span, waiting is always sampled: that wait is the request's latency.
        slot.wall.idle_streak.store(100, Ordering::Relaxed);
        let record = crate::context::record::RECORDS.take();
        slot.set_own_context(record);
        // SAFETY: a pool record only this test uses.
        unsafe { (*record).valid = 1 };
        t += 700;
        assert_eq!(visit(slot, sleeping, t, 5_000, skip).unwrap().1, 700);
        // SAFETY: as above; unpublished first.
        unsafe {
            slot.set_own_context(std::ptr::null_mut());
            crate::context::record::RECORDS.give_back(record);
        }
    }

    /// A long-idle thread's estimated wall time is unbiased: many thinned visits add up to
    /// the time that passed.
    #[test]
    fn thinning_keeps_totals() {
        static TABLE_B: ThreadTable = ThreadTable::new();
        let table = &TABLE_B;
        table.insert(11, std::ptr::dangling_mut(), 1).unwrap();
        let slot = table.lookup(11).unwrap();
        let sleeping = Some(s::ALIVE | 0x80 | s::WAITING_INDEFINITELY | s::PARKED);
        let mut random = SplitMix64(0x1234_5678_9abc_def1);
        let (mut t, mut total) = (0u64, 0u64);
        slot.wall.last_visit_ns.store(0, Ordering::Relaxed);
        for i in 0..40_000u64 {
            t += 9_000 + (i % 5) * 500;
            if let Some(v) = visit(slot, sleeping, t, 0, random.next_u64(), &|_, _| 0) {
                total += v.weight_ns;
            }
        }
        let ratio = total as f64 / t as f64;
        assert!((0.97..1.03).contains(&ratio), "{ratio}");
    }

    /// The time a visit spent in long pauses is split off, scaled like the rest when the
    /// visit stands for thinned ones, and never more than the visit's time.
    #[test]
    fn pauses_are_split_from_the_visits_that_sat_through_them() {
        static TABLE_C: ThreadTable = ThreadTable::new();
        let table = &TABLE_C;
        table.insert(12, std::ptr::dangling_mut(), 1).unwrap();
        let slot = table.lookup(12).unwrap();
        let running = Some(s::ALIVE | s::RUNNABLE);
        let sleeping = Some(s::ALIVE | 0x80 | s::WAITING_WITH_TIMEOUT | s::SLEEPING);
        // One pause of 3,000 ns at (20_000, 23_000].
        let pauses =
            |since: u64, until: u64| 23_000u64.min(until).saturating_sub(since.max(20_000));
        slot.wall.last_visit_ns.store(19_000, Ordering::Relaxed);
        let v = visit(slot, running, 25_000, 0, 1, &pauses).unwrap();
        assert_eq!((v.weight_ns, v.pause_ns), (6_000, 3_000));
        assert_eq!(v.signal.state, ThreadState::Runnable);
        // The next visit has no pause in it.
        let v = visit(slot, running, 26_000, 0, 1, &pauses).unwrap();
        assert_eq!((v.weight_ns, v.pause_ns), (1_000, 0));
        // A thinned long-idle visit stands for IDLE_EVERY of its kind: the pause too.
        slot.wall.idle_streak.store(IDLE_AFTER, Ordering::Relaxed);
        slot.wall.last_visit_ns.store(21_000, Ordering::Relaxed);
        let v = visit(slot, sleeping, 22_000, 0, IDLE_EVERY as u64, &pauses).unwrap();
        let k = u64::from(IDLE_EVERY);
        assert_eq!((v.weight_ns, v.pause_ns), (1_000 * k, 1_000 * k));
        // A pause reported longer than the visit (clocks read apart) is cut to it.
        slot.wall.last_visit_ns.store(30_000, Ordering::Relaxed);
        let v = visit(slot, running, 30_500, 0, 1, &|_, _| 9_999).unwrap();
        assert_eq!((v.weight_ns, v.pause_ns), (500, 500));
    }
}
