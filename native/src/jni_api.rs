//! Native methods of the Java shim (`otelprof.internal.NativeBridge`).
//!
//! They are called rarely: once per thread to obtain its context record (after that the shim
//! writes the record directly, no JNI: docs/context-protocol.md, Write protocol), and once per
//! sampled local root span to report its name.
//! Every entry point is guarded: a panic turns into "no record" / "not active".
//!
//! The `#[no_mangle]` functions are exported from libotelprof.so whatever their Rust
//! visibility; they are `pub` because the JVM calls them, while the rest of the crate is
//! `pub(crate)`.

use jni::sys::{jboolean, jclass, jlong, jobject, jstring, JNIEnv, JNI_FALSE, JNI_TRUE};

use crate::context::endpoints::ENDPOINTS;
use crate::context::record::{ContextRecord, RECORDS, RECORD_SIZE};
use crate::context::tls;
use crate::ffi::guard;
use crate::sampling::os::gettid;
use crate::threads::thread_registry;

/// Layout of the record, checked by the shim before it writes anything:
/// `RECORD_SIZE << 32 | offset of local_root_span_id << 16 | offset of samples`
/// (docs/context-protocol.md, Record layout).
pub(crate) fn layout() -> jlong {
    ((RECORD_SIZE as i64) << 32)
        | ((std::mem::offset_of!(ContextRecord, local_root_span_id) as i64) << 16)
        | std::mem::offset_of!(ContextRecord, samples) as i64
}

/// `boolean active0()`: whether the agent is sampling, so the shim can skip all work if not.
#[no_mangle]
pub extern "system" fn Java_otelprof_internal_NativeBridge_active0(
    _env: *mut JNIEnv,
    _cls: jclass,
) -> jboolean {
    guard("NativeBridge.active0", JNI_FALSE, || {
        if crate::sampling::signal_handler::is_active() {
            JNI_TRUE
        } else {
            JNI_FALSE
        }
    })
}

/// `long layout0()`: see [`layout`].
#[no_mangle]
pub extern "system" fn Java_otelprof_internal_NativeBridge_layout0(
    _env: *mut JNIEnv,
    _cls: jclass,
) -> jlong {
    guard("NativeBridge.layout0", 0, layout)
}

/// `ByteBuffer registerThread0()`: the calling thread's context record as a direct buffer,
/// or null if the agent is not sampling this thread.
///
/// # Safety
/// Called by the JVM with the calling thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_otelprof_internal_NativeBridge_registerThread0(
    env: *mut JNIEnv,
    _cls: jclass,
) -> jobject {
    guard("NativeBridge.registerThread0", std::ptr::null_mut(), || {
        // SAFETY: `env` is this thread's JNIEnv, passed by the JVM.
        unsafe { register_current_thread(env) }
    })
}

/// # Safety
/// `env` is the calling thread's JNIEnv.
unsafe fn register_current_thread(env: *mut JNIEnv) -> jobject {
    if !crate::sampling::signal_handler::is_active() {
        return std::ptr::null_mut();
    }
    let tid = gettid();
    if thread_registry::TABLE.lookup(tid).is_none() {
        // A thread that started before the agent (e.g. `main` when the agent was loaded by
        // `-javaagent`): register it now that we have its JNIEnv.
        // SAFETY: `env` is this thread's JNIEnv.
        unsafe { crate::agent::register_current_thread(env) };
    }
    let Some(slot) = thread_registry::TABLE.lookup(tid) else {
        return std::ptr::null_mut();
    };
    let mut record = slot.own_context();
    if record.is_null() {
        record = RECORDS.take();
        if record.is_null() {
            return std::ptr::null_mut();
        }
        slot.set_own_context(record);
        // SAFETY: a pool record, published on its own thread.
        unsafe { tls::publish(record) };
        // Kept in the thread's JVMTI storage too: when profiling stops and starts again the
        // table is rebuilt, and the thread, which goes on writing this record, is found with
        // it (crate::threads::running_threads).
        if let Some(jvmti) = crate::jvm::jvmti::agent_env() {
            // SAFETY: null names the calling (platform) thread; the value is a pool record.
            let _ =
                unsafe { jvmti.set_thread_local_storage(std::ptr::null_mut(), record as *const _) };
        }
    }
    // SAFETY: `env` is this thread's JNIEnv; the record comes from the pool.
    unsafe { record_buffer(env, record) }
}

/// `ByteBuffer registerVirtualThread0()`: like `registerThread0`, for a virtual thread: the
/// record is the virtual thread's own and follows it across carriers (see `threads::virtual_threads`).
///
/// # Safety
/// Called by the JVM on a virtual thread with its JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_otelprof_internal_NativeBridge_registerVirtualThread0(
    env: *mut JNIEnv,
    _cls: jclass,
) -> jobject {
    guard(
        "NativeBridge.registerVirtualThread0",
        std::ptr::null_mut(),
        || {
            if !crate::sampling::signal_handler::is_active()
                || !crate::threads::virtual_threads::enabled()
            {
                return std::ptr::null_mut();
            }
            let Some(jvmti) = crate::jvm::jvmti::agent_env() else {
                return std::ptr::null_mut();
            };
            // SAFETY: called on the virtual thread itself.
            let record = unsafe { crate::threads::virtual_threads::register_current(&jvmti) };
            // SAFETY: `env` is this thread's JNIEnv; `record` is null or a pool record.
            unsafe { record_buffer(env, record) }
        },
    )
}

/// A direct buffer over `record` (null for a null record).
///
/// # Safety
/// `env` is the calling thread's JNIEnv; `record` is null or a pool record (never freed, so
/// the buffer, which does not own it, can never dangle).
unsafe fn record_buffer(env: *mut JNIEnv, record: *mut ContextRecord) -> jobject {
    if record.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: per this function's contract.
    unsafe {
        (**env)
            .NewDirectByteBuffer
            .map_or(std::ptr::null_mut(), |f| {
                f(env, record as *mut libc::c_void, RECORD_SIZE as jlong)
            })
    }
}

/// `ByteBuffer sampleCounter0()`: the agent's count of samples taken (a u64 the signal handler
/// increments), as an 8-byte direct buffer. The shim reads it to tell whether any sample was
/// taken while a scope was open, without a call.
///
/// # Safety
/// Called by the JVM with the calling thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_otelprof_internal_NativeBridge_sampleCounter0(
    env: *mut JNIEnv,
    _cls: jclass,
) -> jobject {
    guard("NativeBridge.sampleCounter0", std::ptr::null_mut(), || {
        let counter = &crate::stats::COUNTERS.samples as *const std::sync::atomic::AtomicU64
            as *mut libc::c_void;
        // SAFETY: a static that lives as long as the library (never unloaded); the buffer is
        // only read by the shim.
        unsafe {
            (**env)
                .NewDirectByteBuffer
                .map_or(std::ptr::null_mut(), |f| f(env, counter, 8))
        }
    })
}

/// `ByteBuffer sessionCounter0()`: the number of profiling sessions started so far, as an
/// 8-byte direct buffer. A thread that found the agent stopped asks for a record again once it
/// has changed (see `ThreadRecord.stale` in the shim).
///
/// # Safety
/// Called by the JVM with the calling thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_otelprof_internal_NativeBridge_sessionCounter0(
    env: *mut JNIEnv,
    _cls: jclass,
) -> jobject {
    guard("NativeBridge.sessionCounter0", std::ptr::null_mut(), || {
        let counter =
            &crate::stats::SESSIONS as *const std::sync::atomic::AtomicU64 as *mut libc::c_void;
        // SAFETY: a static that lives as long as the library (never unloaded); the buffer is
        // only read by the shim.
        unsafe {
            (**env)
                .NewDirectByteBuffer
                .map_or(std::ptr::null_mut(), |f| f(env, counter, 8))
        }
    })
}

/// `long bufferAddress0(ByteBuffer buffer)`: the address of a direct buffer this library
/// made (a context record), for the shim's plain-store write path; 0 if it is not direct.
///
/// # Safety
/// Called by the JVM with the calling thread's JNIEnv and a ByteBuffer (or null).
#[no_mangle]
pub unsafe extern "system" fn Java_otelprof_internal_NativeBridge_bufferAddress0(
    env: *mut JNIEnv,
    _cls: jclass,
    buffer: jobject,
) -> jlong {
    guard("NativeBridge.bufferAddress0", 0, || {
        if buffer.is_null() {
            return 0;
        }
        // SAFETY: `env` is this thread's JNIEnv; GetDirectBufferAddress returns null for a
        // buffer that is not direct.
        let address = unsafe {
            (**env)
                .GetDirectBufferAddress
                .map_or(std::ptr::null_mut(), |f| f(env, buffer))
        };
        address as jlong
    })
}

/// `void reportEndpoint0(long localRootSpanId, String name)`: the current name of a local
/// root span (see [`crate::context::endpoints::Endpoints`]).
///
/// # Safety
/// Called by the JVM with the calling thread's JNIEnv and a String (or null).
#[no_mangle]
pub unsafe extern "system" fn Java_otelprof_internal_NativeBridge_reportEndpoint0(
    env: *mut JNIEnv,
    _cls: jclass,
    local_root: jlong,
    name: jstring,
) {
    guard("NativeBridge.reportEndpoint0", (), || {
        // SAFETY: per this function's contract.
        if let Some(name) = unsafe { java_string(env, name) } {
            ENDPOINTS.report(local_root as u64, &name);
        }
    })
}

/// Copies a Java string (modified UTF-8 from the VM, converted lossily).
///
/// # Safety
/// `env` is the calling thread's JNIEnv; `s` a live String reference or null.
unsafe fn java_string(env: *mut JNIEnv, s: jstring) -> Option<String> {
    if s.is_null() {
        return None;
    }
    // SAFETY: per this function's contract; the chars are released before returning.
    unsafe {
        let get = (**env).GetStringUTFChars?;
        let release = (**env).ReleaseStringUTFChars?;
        let chars = get(env, s, std::ptr::null_mut());
        if chars.is_null() {
            return None;
        }
        let out = std::ffi::CStr::from_ptr(chars)
            .to_string_lossy()
            .into_owned();
        release(env, s, chars);
        Some(out)
    }
}

/// `String start0(String options)`: starts the agent from the shim (`-javaagent`). Returns
/// null on success, or the one-line reason profiling is off.
///
/// # Safety
/// Called by the JVM with the calling thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_otelprof_internal_NativeBridge_start0(
    env: *mut JNIEnv,
    _cls: jclass,
    options: jstring,
) -> jstring {
    guard("NativeBridge.start0", std::ptr::null_mut(), || {
        // SAFETY: per this function's contract.
        let options = unsafe { java_string(env, options) }.unwrap_or_default();
        let mut vm: *mut jni::sys::JavaVM = std::ptr::null_mut();
        // SAFETY: GetJavaVM fills `vm` for a live env.
        let rc = unsafe { (**env).GetJavaVM.map_or(-1, |f| f(env, &mut vm)) };
        if rc != jni::sys::JNI_OK || vm.is_null() {
            return new_string(env, "cannot get the JavaVM; profiling is off");
        }
        // SAFETY: `vm` and `env` come from the VM for this thread.
        match unsafe { crate::agent::control::shim_start(vm, env, &options) } {
            Ok(()) => std::ptr::null_mut(),
            Err(e) => new_string(env, &e),
        }
    })
}

fn new_string(env: *mut JNIEnv, s: &str) -> jstring {
    let Ok(c) = std::ffi::CString::new(s.replace('\0', " ")) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `env` is the calling thread's JNIEnv; `c` is NUL-terminated (modified UTF-8 is
    // a superset of our ASCII/UTF-8 messages except for NUL, removed above).
    unsafe {
        (**env)
            .NewStringUTF
            .map_or(std::ptr::null_mut(), |f| f(env, c.as_ptr()))
    }
}

/// `long publishedRecordAddress0()`: what `otel_thread_ctx_v1` holds on this thread, for
/// tests comparing it with the record the shim writes.
#[no_mangle]
pub extern "system" fn Java_otelprof_internal_NativeBridge_publishedRecordAddress0(
    _env: *mut JNIEnv,
    _cls: jclass,
) -> jlong {
    // SAFETY: reads the calling thread's TLS pointer (not in a signal handler).
    guard(
        "NativeBridge.publishedRecordAddress0",
        0,
        || unsafe { tls::published() } as jlong,
    )
}
