//! Java thread lifecycle: register each thread for sampling at JVMTI ThreadStart (on the new
//! thread itself), unregister it at ThreadEnd, and remember its name for labels.
//!
//! Registrations happen only while profiling runs ([`start_registering`] to
//! [`stop_registering`]). When profiling stops, [`clear`] empties the table and the names: the
//! agent then hears of no thread start or end (the events are off), so any entry kept would go
//! stale. A later start registers the threads running then from scratch
//! ([`crate::threads::running_threads`]).
//!
//! Registration puts the thread's JNIEnv in the [`ThreadTable`] (the signal handler passes it
//! to AsyncGetCallTrace) and starts what samples the thread's CPU (a perf event or a CPU
//! timer: [`CpuClock`]), unless the session uses the process-wide `clock=itimer`.
//! Names are kept apart in [`ThreadNames`], which only the aggregator, these callbacks and the
//! thread scan touch: a thread may end while its samples still sit in the buffer, so its name
//! outlives it until the profile that contains those samples is written. The threads the scan
//! registers ([`crate::threads::native_threads`]) take their serials and keep their names
//! here too, with no `Thread` object.

use std::collections::HashMap;
use std::mem;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use jni::sys::{jobject, JNIEnv};

use crate::jvm::jvmti::{delete_global_ref, new_global_ref, Jvmti};
use crate::sampling::cpu_clock::CpuClock;
use crate::sampling::os::{gettid, monotonic_ns};
use crate::sampling::own_threads::is_own_tid;
use crate::sampling::signal_handler;
use crate::sampling::thread_roles::ThreadRole;
use crate::sampling::thread_table::{Inserted, ThreadTable};
use crate::sampling::timers::{random_fraction, whole_intervals};
use crate::stats::{self, COUNTERS};
use crate::threads::process_threads;

pub(crate) static TABLE: ThreadTable = ThreadTable::new();

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);
/// Set while profiling runs: ThreadStarts outside that time register nothing.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// What samples each thread's CPU in the running session: `None` for `clock=itimer` and
/// `cpu=off`.
static CLOCK: Mutex<Option<CpuClock>> = Mutex::new(None);
/// Set while the threads already running at a late start are registered: ThreadEnd then notes
/// its tid in [`ENDED_WHILE_ADDING`] (see [`crate::threads::running_threads`]).
static ADDING_RUNNING: AtomicBool = AtomicBool::new(false);
static ENDED_WHILE_ADDING: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static SAMPLER_ERROR_LOGGED: AtomicBool = AtomicBool::new(false);
/// Set while the thread scan runs: ThreadEnd then leaves the thread's CPU time in [`ENDED`].
static NOTE_ENDS: AtomicBool = AtomicBool::new(false);
/// CPU time of Java threads at their ThreadEnd, by tid, until the scan takes them. A thread
/// still runs a little after ThreadEnd (and a native thread that detaches from the VM goes on
/// running); if the scan finds it then, it must count only the CPU used after the end, the
/// rest was sampled already.
static ENDED: Mutex<Option<HashMap<i32, Duration>>> = Mutex::new(None);
/// Most ends kept between two scans (a bound, should the scan stall).
const MAX_ENDED: usize = 65_536;

#[derive(Debug)]
pub(crate) struct ThreadInfo {
    pub(crate) name: String,
    /// Global reference to the java.lang.Thread, to read its current name later
    /// (threads are often renamed after they start). Null if it could not be made, and for
    /// the threads the scan registers.
    pub(crate) thread: jobject,
    /// CLOCK_MONOTONIC time of ThreadEnd.
    pub(crate) ended_at: Option<u64>,
}

// SAFETY: `thread` is a JNI global reference, usable from any attached thread.
unsafe impl Send for ThreadInfo {}

pub(crate) static NAMES: Mutex<ThreadNames> = Mutex::new(ThreadNames { by_serial: None });

pub(crate) struct ThreadNames {
    by_serial: Option<HashMap<u64, ThreadInfo>>,
}

impl ThreadNames {
    fn map(&mut self) -> &mut HashMap<u64, ThreadInfo> {
        self.by_serial.get_or_insert_with(HashMap::new)
    }

    pub(crate) fn get_mut(&mut self, serial: u64) -> Option<&mut ThreadInfo> {
        self.map().get_mut(&serial)
    }

    /// The name of the thread registered under `serial`, read from its `Thread` now
    /// (threads are often renamed after they start), else the one known; `None` for a
    /// thread this table does not hold.
    ///
    /// # Safety
    /// `jni` is the calling (attached) thread's JNIEnv.
    pub(crate) unsafe fn current_name(
        &mut self,
        serial: u64,
        jvmti: &Jvmti,
        jni: *mut JNIEnv,
    ) -> Option<String> {
        let info = self.get_mut(serial)?;
        // A null reference (a thread the scan found) would name the calling thread.
        // SAFETY: `jni` per this function's contract; `info.thread` is a global reference
        // that lives until the entry is evicted, which needs this table's lock, held by the
        // caller through `&mut self`.
        let current = (!info.thread.is_null())
            .then(|| unsafe { jvmti.thread_name(jni, info.thread) }.ok())
            .flatten();
        if let Some(current) = current.filter(|c| !c.is_empty()) {
            info.name = current;
        }
        Some(info.name.clone())
    }

    /// Forgets threads that ended before `drained_at` (so every sample they took has been
    /// drained and labelled), deleting their global references.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv.
    pub(crate) unsafe fn evict_ended_before(&mut self, drained_at: u64, jni: *mut JNIEnv) -> usize {
        let map = self.map();
        let before = map.len();
        map.retain(|_, t| {
            let gone = t.ended_at.is_some_and(|end| end < drained_at);
            if gone {
                // SAFETY: `t.thread` is the global reference made at registration, deleted
                // once here as the entry goes; `jni` per this function's contract.
                unsafe { delete_global_ref(jni, t.thread) };
            }
            !gone
        });
        before - map.len()
    }
}

fn lock_names() -> std::sync::MutexGuard<'static, ThreadNames> {
    NAMES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Profiling starts: threads are registered from now on, as `how` says.
pub(crate) fn start_registering(how: Registration) {
    *CLOCK.lock().unwrap_or_else(|p| p.into_inner()) = how.cpu;
    RUNNING.store(true, Ordering::SeqCst);
}

/// Profiling stops: nothing more is registered (entries made meanwhile remove themselves).
pub(crate) fn stop_registering() {
    RUNNING.store(false, Ordering::SeqCst);
}

/// Whether threads are being registered (profiling runs).
pub(crate) fn running() -> bool {
    RUNNING.load(Ordering::SeqCst)
}

/// How threads are registered now: `None` when profiling does not run.
pub(crate) fn registration() -> Option<Registration> {
    if !RUNNING.load(Ordering::SeqCst) {
        return None;
    }
    Some(Registration {
        cpu: *CLOCK.lock().unwrap_or_else(|p| p.into_inner()),
    })
}

/// Starts (or stops) noting the threads that end, for the registration of the threads that
/// were already running ([`crate::threads::running_threads`]).
pub(crate) fn note_ends_while_adding(on: bool) {
    let mut ended = ENDED_WHILE_ADDING.lock().unwrap_or_else(|p| p.into_inner());
    ended.clear();
    ADDING_RUNNING.store(on, Ordering::SeqCst);
}

/// Whether `tid` ended since [`note_ends_while_adding`] was turned on.
pub(crate) fn ended_while_adding(tid: i32) -> bool {
    ENDED_WHILE_ADDING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&tid)
}

/// A new thread life's serial.
pub(crate) fn new_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// Keeps the name of a thread the scan registered under `serial`.
pub(crate) fn remember_native(serial: u64, name: String) {
    lock_names().map().insert(
        serial,
        ThreadInfo {
            name,
            thread: std::ptr::null_mut(),
            ended_at: None,
        },
    );
}

/// Notes that the thread life `serial` ended (its name goes once its samples are written).
pub(crate) fn mark_ended(serial: u64) {
    if let Some(info) = lock_names().get_mut(serial) {
        info.ended_at = Some(monotonic_ns());
    }
}

/// Starts or stops keeping the CPU time of Java threads at their end for the scan.
pub(crate) fn note_ends(on: bool) {
    NOTE_ENDS.store(on, Ordering::SeqCst);
    if !on {
        ENDED.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// The CPU times of Java threads that ended since the last call, by tid.
pub(crate) fn take_ended() -> HashMap<i32, Duration> {
    ENDED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_mut()
        .map(mem::take)
        .unwrap_or_default()
}

/// How the current thread is sampled.
#[derive(Clone, Copy)]
pub(crate) struct Registration {
    /// What samples each thread's CPU, or `None` under `clock=itimer` (or `cpu=off`).
    pub(crate) cpu: Option<CpuClock>,
}

/// Registers the calling thread (JVMTI ThreadStart, or the thread that starts profiling).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `thread` its java.lang.Thread, as JVMTI passes
/// them to ThreadStart and VMInit.
pub(crate) unsafe fn on_thread_start(jvmti: &Jvmti, jni: *mut JNIEnv, thread: jobject) {
    let Some(how) = registration() else {
        return;
    };
    let tid = gettid();
    if is_own_tid(tid) {
        return;
    }
    if TABLE
        .lookup(tid)
        .is_some_and(|s| s.role() == ThreadRole::Java)
    {
        // Already registered (the main thread can be seen both at ThreadStart and VMInit).
        return;
    }
    // SAFETY: per this function's contract: the thread is the caller, `jni` its JNIEnv.
    unsafe {
        register_java(
            jvmti,
            jni,
            thread,
            JavaThreadIds {
                tid,
                env: jni,
                record: std::ptr::null_mut(),
            },
            how,
        )
    };
}

/// What the sampler needs to know of a Java thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JavaThreadIds {
    /// Its kernel thread id.
    pub(crate) tid: i32,
    /// Its JNIEnv, which AsyncGetCallTrace is given.
    pub(crate) env: *mut JNIEnv,
    /// Its context record, when it has one from an earlier profiling session (null if not).
    pub(crate) record: *mut crate::context::record::ContextRecord,
}

/// Registers the Java thread `thread` (ids in `ids`) for sampling: table entry, name, and a
/// CPU timer when `how` has one. Called on the thread itself at ThreadStart, or by the thread
/// that starts profiling for the threads already running then. Returns its serial, or `None`
/// if it was registered already (or could not be).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `thread` a live reference to the
/// java.lang.Thread whose ids `ids` holds; `ids.record` is null or a pool record of that thread.
pub(crate) unsafe fn register_java(
    jvmti: &Jvmti,
    jni: *mut JNIEnv,
    thread: jobject,
    ids: JavaThreadIds,
    how: Registration,
) -> Option<u64> {
    let tid = ids.tid;
    let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
    match TABLE.insert(tid, ids.env, serial) {
        Ok(Inserted::New) => {}
        Ok(Inserted::AlreadyJava) => return None,
        Ok(Inserted::TookOver(scanned)) => {
            // The scan had found this thread first (or it was a native thread that attached):
            // from now on it is sampled as Java, with a sampler of its own. This may run on
            // another thread than the one sampled (a late start): retire, not stop.
            if let Some(sampler) = scanned.sampler {
                sampler.retire();
            }
            mark_ended(scanned.serial);
        }
        Err(_) => {
            stats::bump(&COUNTERS.table_full);
            return None;
        }
    }
    if !ids.record.is_null() {
        if let Some(slot) = TABLE.lookup(tid).filter(|s| s.serial() == serial) {
            slot.set_own_context(ids.record);
        }
    }
    // Before the live phase GetThreadInfo is not allowed; the aggregator reads the name
    // later through the global reference.
    // SAFETY: per this function's contract.
    let name = unsafe { jvmti.thread_name(jni, thread) }.unwrap_or_default();
    log_debug!("thread start: tid {tid} serial {serial} '{name}'");
    lock_names().map().insert(
        serial,
        ThreadInfo {
            name,
            // SAFETY: per this function's contract.
            thread: unsafe { new_global_ref(jni, thread) },
            ended_at: None,
        },
    );
    stats::bump(&COUNTERS.threads_started);
    if let Some(clock) = how.cpu {
        match clock.start(tid) {
            Ok(sampler) => {
                if !TABLE.set_sampler(tid, serial, sampler) {
                    // Never published: no handler knows it.
                    sampler.stop();
                }
            }
            Err(e) => {
                stats::bump(&COUNTERS.timer_errors);
                if !SAMPLER_ERROR_LOGGED.swap(true, Ordering::Relaxed) {
                    log_warn!(
                        "cannot sample the CPU of thread {tid}: {e}; such threads are not sampled (try clock=itimer)"
                    );
                }
            }
        }
    }
    if !RUNNING.load(Ordering::SeqCst) {
        // Profiling stopped while we were registering, and its clean-up may have run before
        // our entry existed: take it out again, sampler and all.
        remove_unless_other_life(tid, serial);
        return None;
    }
    Some(serial)
}

/// Removes `tid`'s entry if it is still the life numbered `serial`, with its sampler; the
/// thread's record stays its own (it keeps it for a later profiling session).
pub(crate) fn remove_unless_other_life(tid: i32, serial: u64) {
    if TABLE.lookup(tid).is_some_and(|s| s.serial() == serial) {
        if let Some(removed) = TABLE.remove(tid) {
            if let Some(sampler) = removed.sampler {
                sampler.retire();
            }
            mark_ended(removed.serial);
        }
    }
}

/// Records the CPU the calling thread used before its timer started, as one `[VM]` sample:
/// for the thread that runs VMInit (or starts the agent from the Java shim), the JVM's
/// start-up, which no timer saw. Call on that thread right after [`on_thread_start`].
/// Other Java threads get their ThreadStart within microseconds of their start: nothing to
/// credit.
pub(crate) fn credit_cpu_before_start(how: Registration) {
    let (Some(clock), Some(sampler)) = (how.cpu, signal_handler::installed()) else {
        return;
    };
    let interval = clock.interval();
    let tid = gettid();
    let Some(slot) = TABLE.lookup(tid) else {
        return;
    };
    let cpu = process_threads::cpu_time(tid).unwrap_or_default();
    let intervals = whole_intervals(cpu, interval, random_fraction());
    if intervals > 0 {
        sampler.record_unwalked(tid, slot.serial(), ThreadRole::Vm, intervals);
    }
}

/// Unregisters the calling thread (JVMTI ThreadEnd).
pub(crate) fn on_thread_end() {
    let tid = gettid();
    if ADDING_RUNNING.load(Ordering::SeqCst) {
        // Before the entry goes (see running_threads): an entry the late registration makes
        // after this point is found out by it and taken out again.
        let mut ended = ENDED_WHILE_ADDING.lock().unwrap_or_else(|p| p.into_inner());
        if ended.len() < MAX_ENDED {
            ended.push(tid);
        }
    }
    // Before the thread leaves the table: a scan that no longer finds it there then finds its
    // CPU time here (the scan looks in this order too).
    if NOTE_ENDS.load(Ordering::SeqCst) && TABLE.lookup(tid).is_some() {
        if let Some(cpu) = process_threads::cpu_time(tid) {
            let mut ended = ENDED.lock().unwrap_or_else(|p| p.into_inner());
            let ended = ended.get_or_insert_with(HashMap::new);
            if ended.len() < MAX_ENDED {
                ended.insert(tid, cpu);
            }
        }
    }
    let Some(removed) = TABLE.remove(tid) else {
        return;
    };
    stats::bump(&COUNTERS.threads_ended);
    if let Some(sampler) = removed.sampler {
        // On the thread itself: no handler of its can be reading its ring now.
        sampler.stop();
    }
    // SAFETY: the thread is gone (this is its last callback) and its slot no longer points to
    // the record, so the record can serve another thread. Its TLS pointer dies with it.
    unsafe { crate::context::record::RECORDS.give_back(removed.own_context) };
    if let Some(info) = lock_names().get_mut(removed.serial) {
        info.ended_at = Some(monotonic_ns());
    }
}

/// Stops every thread's CPU sampler (shutdown); rings stay mapped until
/// [`crate::sampling::cpu_clock::unmap_retired`]. Threads stay registered until they end.
pub(crate) fn stop_all_samplers() {
    for sampler in TABLE.take_all_samplers() {
        sampler.retire();
    }
}

/// Empties the table and the names once profiling has stopped (see the module docs): every
/// entry goes (timers included, should one be left), and every name with its global
/// reference. Context records are not given back: their threads still write them, and keep
/// them for the next session (JVMTI thread-local storage holds them). Returns the entries
/// removed.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv. Call after [`stop_registering`], once no sample is
/// being taken and the aggregator (which reads the names) has stopped.
pub(crate) unsafe fn clear(jni: *mut JNIEnv) -> usize {
    let mut removed = 0;
    for (_, sampler) in TABLE.remove_all() {
        removed += 1;
        if let Some(sampler) = sampler {
            // Sampling is off and quiesced (this function's contract).
            sampler.stop();
        }
    }
    let mut names = lock_names();
    for info in names.map().values_mut() {
        info.ended_at = Some(0);
    }
    // SAFETY: per this function's contract; every entry now counts as ended before `MAX`.
    unsafe { names.evict_ended_before(u64::MAX, jni) };
    removed
}
