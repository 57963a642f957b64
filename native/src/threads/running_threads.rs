//! Registering the Java threads that were already running when profiling started (loaded
//! into a running JVM, started from the Java shim, or started again after a stop), so that
//! they are sampled like threads that start later: a table entry with their JNIEnv (walked with
//! AsyncGetCallTrace), their name, a CPU timer, and their context record if they made one in
//! an earlier session (it waits in their JVMTI thread-local storage).
//!
//! Their kernel tid and JNIEnv come from HotSpot's structures
//! ([`crate::jvm::hotspot::thread_map`]), read here, on the starting thread; the signal
//! handler only ever reads the table.
//!
//! # A thread that ends meanwhile
//!
//! ThreadStart and ThreadEnd are on before the threads are listed, so a thread that starts
//! meanwhile registers itself (a second registration of it changes nothing), and one that ends
//! after its entry was made removes it. One that ends after it was listed but before its entry
//! is made would leave a stale entry, its tid free for another thread, with a JNIEnv into
//! freed memory. So while this runs, ThreadEnd notes the tid of every ending thread first
//! ([`thread_registry::note_ends_while_adding`]); an entry made here whose tid was noted is
//! taken out again. Either the note comes before that check (and the check finds it), or the
//! ThreadEnd's removal comes after the entry was made (and removes it).

use jni::sys::{jobject, JNIEnv};

use crate::context::record::ContextRecord;
use crate::jvm::hotspot::thread_map::ThreadMap;
use crate::jvm::jvmti::{delete_local_ref, Jvmti};
use crate::sampling::own_threads;
use crate::threads::thread_registry::{self, JavaThreadIds, Registration};

/// What the registration did.
#[derive(Debug, Default)]
pub(crate) struct Added {
    /// Threads listed by JVMTI.
    pub(crate) listed: usize,
    /// Registered here (the others were registered already, are the agent's own, or ended).
    pub(crate) registered: usize,
    /// Threads whose ids could not be read (they are left to the thread scan, which records
    /// their CPU without Java stacks).
    pub(crate) unmapped: usize,
    /// Why no thread could be mapped at all, if so.
    pub(crate) problem: Option<String>,
}

/// Registers every running platform thread (virtual threads are not in JVMTI's list; their
/// carriers are).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv, a Java thread in the live phase; ThreadStart and
/// ThreadEnd are enabled and registration is on ([`thread_registry::start_registering`]).
pub(crate) unsafe fn register(jvmti: &Jvmti, jni: *mut JNIEnv, how: Registration) -> Added {
    let mut added = Added::default();
    thread_registry::note_ends_while_adding(true);
    let threads = match jvmti.all_threads() {
        Ok(t) => t,
        Err(e) => {
            thread_registry::note_ends_while_adding(false);
            added.problem = Some(format!("cannot list the running threads: {e}"));
            return added;
        }
    };
    added.listed = threads.len();
    // SAFETY: per this function's contract.
    let map = unsafe { ThreadMap::new(jvmti, jni) };
    for thread in threads {
        match &map {
            // SAFETY: `thread` is a live local reference from GetAllThreads.
            Ok(map) => match unsafe { register_one(jvmti, jni, map, thread, how) } {
                Some(true) => added.registered += 1,
                Some(false) => {}
                None => added.unmapped += 1,
            },
            Err(_) => added.unmapped += 1,
        }
        // SAFETY: a local reference of this thread, deleted once.
        unsafe { delete_local_ref(jni, thread) };
    }
    thread_registry::note_ends_while_adding(false);
    if let Err(e) = map {
        added.problem = Some(e);
    }
    added
}

/// Registers one thread: `Some(true)` registered, `Some(false)` nothing to do (registered
/// already, one of ours, or it ended), `None` its ids could not be read.
///
/// # Safety
/// As for [`register`]; `thread` is a live reference to a Thread.
unsafe fn register_one(
    jvmti: &Jvmti,
    jni: *mut JNIEnv,
    map: &ThreadMap,
    thread: jobject,
    how: Registration,
) -> Option<bool> {
    // SAFETY: per this function's contract.
    let mapped = match unsafe { map.map(jni, thread) } {
        Some(m) => m,
        // A thread that is not running (any more) has nothing to map.
        // SAFETY: as above.
        None if unsafe { jvmti.thread_state(thread) }
            .is_ok_and(|s| s & crate::sys::thread_state::ALIVE == 0) =>
        {
            return Some(false)
        }
        None => return None,
    };
    if own_threads::is_own_tid(mapped.tid) {
        return Some(false);
    }
    // The record the thread made in an earlier session, if any (only records are stored).
    // SAFETY: as above.
    let record = unsafe { jvmti.thread_local_storage(thread) }.unwrap_or(std::ptr::null_mut())
        as *mut ContextRecord;
    let ids = JavaThreadIds {
        tid: mapped.tid,
        env: mapped.env,
        record,
    };
    // SAFETY: `ids` are `thread`'s, checked by the map; `record` is null or its pool record.
    let Some(serial) = (unsafe { thread_registry::register_java(jvmti, jni, thread, ids, how) })
    else {
        return Some(false);
    };
    // SAFETY: as above.
    let running = unsafe { map.still_running(jni, thread, &mapped) };
    if !running || thread_registry::ended_while_adding(mapped.tid) {
        thread_registry::remove_unless_other_life(mapped.tid, serial);
        return Some(false);
    }
    Some(true)
}
