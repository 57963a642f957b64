//! Lock profiling, second half: `java.util.concurrent` locks (`ReentrantLock`,
//! `ReentrantReadWriteLock`, `Semaphore`, `StampedLock`, …), which wait in `Unsafe.park`
//! where no JVMTI event sees them.
//!
//! When lock profiling is on, the native method `jdk.internal.misc.Unsafe.park` is bound to
//! [`park_hook`], which calls HotSpot's own implementation and times it. Loaded at startup
//! (`-agentpath`, `otelprof run`), the agent substitutes the hook when the JDK binds the method
//! (JVMTI `NativeMethodBind`). Loaded later by the Java shim, it finds HotSpot's
//! implementation (`Unsafe_Park`, a local symbol) by name in libjvm's ELF symbol table and
//! rebinds the method with JNI `RegisterNatives` (HotSpot makes any compiled wrapper of the
//! old binding not entrant, and logs one warning line about a platform native rebound). If
//! the symbol cannot be found (a stripped libjvm), nothing is rebound and one log line says
//! so; monitors are still profiled.
//!
//! What is recorded: parks with a blocker (`LockSupport.park(blocker)`, which every
//! `java.util.concurrent` lock sets), except condition waits (`Condition.await`, blocker an
//! AQS `ConditionObject`): waiting for a signal is the counterpart of `Object.wait`, which
//! the monitor events do not count either, and idle pool threads waiting for work would
//! otherwise dominate the profile. Parks without a blocker (`LockSupport.park()`) are not
//! attributable to a lock and are left out. Weighting is the monitors' (`lock=T`, see
//! [`crate::engines::locks::weigh`]); the leaf frame is the blocker's class (e.g.
//! `java.util.concurrent.locks.ReentrantLock$NonfairSync`), under the parking thread's stack,
//! with its span context.
//!
//! The hook runs on the parking thread in native state, like the method it replaces. The
//! original is always called exactly once; the bookkeeping after it is guarded (a panic turns
//! profiling off, never unwinds into the JVM). A short park that the weighting does not pick
//! (most of them) costs two clock reads and a random number; `lock_short` counts those, of
//! every blocker.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use jni::sys::{jboolean, jclass, jfieldID, jlong, jobject, JNIEnv, JNINativeMethod};

use crate::ffi::guard;
use crate::jvm::jvmti::{delete_local_ref, object_class, Jvmti};
use crate::jvm::libjvm;
use crate::kinds::SampleKind;
use crate::sampling::event_sample::{self, EventSample};
use crate::sampling::os::monotonic_ns;
use crate::stats::{self, COUNTERS};

/// HotSpot's `Unsafe_Park(JNIEnv*, jobject unsafe, jboolean isAbsolute, jlong time)`.
type ParkFn = unsafe extern "C" fn(*mut JNIEnv, jobject, jboolean, jlong);

/// The address of `Unsafe_Park`; set before the hook is bound, never changed afterwards.
static ORIGINAL: AtomicUsize = AtomicUsize::new(0);
/// `java.lang.Thread.parkBlocker`'s field id (valid for the life of the class: forever).
static BLOCKER_FIELD: AtomicUsize = AtomicUsize::new(0);
/// Whether parks are timed: set while a session profiles locks. The hook stays bound after
/// a stop (rebinding a JDK native again would make HotSpot warn each time), and then only
/// calls the original after one load of this flag.
static ON: AtomicBool = AtomicBool::new(false);

/// Stops timing parks (the hook stays bound, see [`ON`]).
pub(crate) fn turn_off() {
    ON.store(false, Ordering::Release);
}

/// JVMTI `NativeMethodBind` (enabled from `Agent_OnLoad` when lock profiling is on): when the
/// JDK binds `Unsafe.park` during startup, the hook is bound in its place. No warning: the
/// JDK's own code is registering its own native.
///
/// # Safety
/// Called by the JVM with the event's arguments.
pub(crate) unsafe extern "C" fn native_method_bind(
    jvmti: *mut crate::sys::JvmtiEnv,
    _jni: *mut JNIEnv,
    _thread: jobject,
    method: jni::sys::jmethodID,
    address: *mut libc::c_void,
    new_address: *mut *mut libc::c_void,
) {
    guard("NativeMethodBind", (), || {
        let Some(agent_jvmti) = crate::jvm::jvmti::agent_env() else {
            return;
        };
        if jvmti != agent_jvmti.raw() || new_address.is_null() || address.is_null() {
            return;
        }
        // SAFETY: the event's method.
        if !unsafe { agent_jvmti.method_name(method) }.is_ok_and(|n| n == "park") {
            return;
        }
        // SAFETY: as above; the class is a local reference, freed when the callback returns.
        let Ok(class) = (unsafe { agent_jvmti.method_declaring_class(method) }) else {
            return;
        };
        // SAFETY: a live class reference.
        let signature = unsafe { agent_jvmti.class_signature(class) };
        if !signature.is_ok_and(|s| s == "Ljdk/internal/misc/Unsafe;") {
            return;
        }
        if ORIGINAL
            .compare_exchange(0, address as usize, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: JVMTI's out-parameter for the address to bind instead.
            unsafe { *new_address = park_hook as *mut libc::c_void };
        }
        // Nothing else to watch for: stop paying a callback per native binding.
        let _ = agent_jvmti.set_event(false, crate::sys::event::EVENT_NATIVE_METHOD_BIND);
    })
}

/// Makes parks timed: after [`native_method_bind`] only the blocker field is left to find;
/// otherwise (the agent started after the JVM, from the Java shim) `Unsafe.park` is rebound
/// with `RegisterNatives`, about which HotSpot logs one warning line.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv, in the live phase.
pub(crate) unsafe fn install(jvmti: &Jvmti, jni: *mut JNIEnv) -> Result<(), String> {
    // SAFETY: per this function's contract.
    let field = unsafe { blocker_field(jni) }.ok_or("java.lang.Thread has no parkBlocker field")?;
    BLOCKER_FIELD.store(field as usize, Ordering::Release);
    if ORIGINAL.load(Ordering::Acquire) != 0 {
        ON.store(true, Ordering::Release);
        return Ok(());
    }
    let original = libjvm::local_function(jvmti, "Unsafe_Park")?;
    ORIGINAL.store(original, Ordering::Release);
    // SAFETY: as above; the class name is a valid NUL-terminated string.
    let class = unsafe { find_class(jni, c"jdk/internal/misc/Unsafe") };
    if class.is_null() {
        return Err("no jdk.internal.misc.Unsafe class".to_owned());
    }
    let method = JNINativeMethod {
        name: c"park".as_ptr().cast_mut(),
        signature: c"(ZJ)V".as_ptr().cast_mut(),
        fnPtr: park_hook as *mut libc::c_void,
    };
    // SAFETY: a live class reference and one well-formed method entry whose function has
    // the native method's signature.
    let status = unsafe {
        let status = (**jni)
            .RegisterNatives
            .map_or(-1, |f| f(jni, class, &method, 1));
        clear_exception(jni);
        delete_local_ref(jni, class);
        status
    };
    if status != 0 {
        return Err(format!("RegisterNatives failed ({status})"));
    }
    ON.store(true, Ordering::Release);
    Ok(())
}

/// The native method `Unsafe.park`, as bound by [`install`].
///
/// # Safety
/// Called by the JVM as the native implementation of `Unsafe.park(boolean, long)`.
unsafe extern "C" fn park_hook(
    env: *mut JNIEnv,
    unsafe_object: jobject,
    absolute: jboolean,
    time: jlong,
) {
    let original = ORIGINAL.load(Ordering::Acquire);
    if original == 0 {
        // Unreachable (the hook is bound after ORIGINAL is set); a park may return
        // spuriously, so returning is still correct.
        return;
    }
    // SAFETY: `original` is HotSpot's Unsafe_Park, whose signature is ParkFn.
    let park = unsafe { std::mem::transmute::<usize, ParkFn>(original) };
    if !ON.load(Ordering::Acquire) || !crate::sampling::signal_handler::is_active() {
        // SAFETY: the JVM's own arguments, passed through.
        unsafe { park(env, unsafe_object, absolute, time) };
        return;
    }
    let start = monotonic_ns();
    // SAFETY: as above.
    unsafe { park(env, unsafe_object, absolute, time) };
    let waited = monotonic_ns().saturating_sub(start);
    guard("Unsafe.park", (), || {
        // SAFETY: `env` is this thread's JNIEnv, in a native method.
        unsafe { after_park(env, waited) }
    });
}

/// Records a park of `waited` ns if it is one (see the module docs).
///
/// # Safety
/// `env` is the calling thread's JNIEnv, in a native method.
unsafe fn after_park(env: *mut JNIEnv, waited: u64) {
    // Decide first, with no JNI call: parks can be very frequent (hand-offs between threads,
    // a few microseconds each), and most short ones are not picked. The choice does not
    // depend on the blocker, so filtering by blocker afterwards keeps the estimates unbiased.
    let Some((delay, contentions)) = crate::engines::locks::weigh(
        waited,
        crate::engines::locks::threshold(),
        crate::engines::locks::uniform(),
    ) else {
        stats::bump(&COUNTERS.lock_short);
        return;
    };
    let Some(tid) = event_sample::wanted() else {
        return;
    };
    let Some(jvmti) = crate::jvm::jvmti::agent_env() else {
        return;
    };
    let field = BLOCKER_FIELD.load(Ordering::Acquire) as jfieldID;
    if field.is_null() {
        return;
    }
    let mut thread: jobject = std::ptr::null_mut();
    if jvmti.current_thread(&mut thread).is_err() || thread.is_null() {
        return;
    }
    // SAFETY: a live Thread reference and Thread's own field id.
    let blocker = unsafe {
        let b = (**env)
            .GetObjectField
            .map_or(std::ptr::null_mut(), |f| f(env, thread, field));
        delete_local_ref(env, thread);
        b
    };
    if blocker.is_null() {
        return;
    }
    // SAFETY: a live object reference; the class reference is deleted after its last use.
    let class = unsafe { object_class(env, blocker) };
    // SAFETY: as above.
    unsafe { delete_local_ref(env, blocker) };
    if class.is_null() {
        return;
    }
    // SAFETY: a live class reference.
    let condition = unsafe { jvmti.class_signature(class) }.is_ok_and(|s| is_condition(&s));
    // SAFETY: a live class reference, on this attached thread.
    let class_id =
        (!condition).then(|| unsafe { crate::jvm::class_names::class_id(&jvmti, class) });
    // SAFETY: deleted after its last use.
    unsafe { delete_local_ref(env, class) };
    let Some(class_id) = class_id else {
        return;
    };
    let sample = EventSample {
        kind: SampleKind::Lock,
        weight: delay,
        count_milli: contentions,
        class_id,
    };
    // SAFETY: on the Java thread that parked, with the agent's JVMTI environment.
    unsafe { event_sample::record(&jvmti, tid, sample) };
}

/// Whether a blocker class (JVM signature) is an AQS condition: waiting for a signal, not
/// for a lock.
fn is_condition(signature: &str) -> bool {
    signature.starts_with("Ljava/util/concurrent/locks/AbstractQueued")
        && signature.ends_with("$ConditionObject;")
}

/// # Safety
/// `jni` is the calling thread's JNIEnv, in the live phase.
unsafe fn find_class(jni: *mut JNIEnv, name: &CStr) -> jclass {
    // SAFETY: per this function's contract; a failed lookup leaves an exception, cleared.
    unsafe {
        let class = (**jni)
            .FindClass
            .map_or(std::ptr::null_mut(), |f| f(jni, name.as_ptr()));
        clear_exception(jni);
        class
    }
}

/// # Safety
/// `jni` is the calling thread's JNIEnv, in the live phase.
unsafe fn blocker_field(jni: *mut JNIEnv) -> Option<jfieldID> {
    // SAFETY: per this function's contract.
    let thread = unsafe { find_class(jni, c"java/lang/Thread") };
    if thread.is_null() {
        return None;
    }
    // SAFETY: a live class reference; a missing field leaves an exception, cleared.
    let field = unsafe {
        let f = (**jni).GetFieldID.map_or(std::ptr::null_mut(), |g| {
            g(
                jni,
                thread,
                c"parkBlocker".as_ptr(),
                c"Ljava/lang/Object;".as_ptr(),
            )
        });
        clear_exception(jni);
        delete_local_ref(jni, thread);
        f
    };
    (!field.is_null()).then_some(field)
}

/// # Safety
/// `jni` is the calling thread's JNIEnv.
unsafe fn clear_exception(jni: *mut JNIEnv) {
    // SAFETY: per this function's contract.
    unsafe {
        if (**jni).ExceptionCheck.is_some_and(|f| f(jni) != 0) {
            if let Some(clear) = (**jni).ExceptionClear {
                clear(jni);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_told_from_locks() {
        assert!(is_condition(
            "Ljava/util/concurrent/locks/AbstractQueuedSynchronizer$ConditionObject;"
        ));
        assert!(is_condition(
            "Ljava/util/concurrent/locks/AbstractQueuedLongSynchronizer$ConditionObject;"
        ));
        assert!(!is_condition(
            "Ljava/util/concurrent/locks/ReentrantLock$NonfairSync;"
        ));
        assert!(!is_condition("Lcom/example/ConditionObject;"));
    }
}
