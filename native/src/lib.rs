//! The otelprof in-JVM agent (`libotelprof.so`).
//!
//! Entry points: `Agent_OnLoad` (`-agentpath:`), `Agent_OnAttach` (the attach verbs
//! start/stop/status/dump: docs/attach.md) and `JNI_OnLoad` here, and the native methods of
//! the Java shim in `jni_api`. The crate stays thin: JVMTI glue, the
//! signal handler and its buffers, the aggregator thread. Profile building, encoding and file
//! writing live in the safe crates `otel-bridge` and `otelprof-exporter`.
//!
//! Where things are:
//! - `agent`: the lifecycle (set-up once, then sessions started and stopped at VMInit,
//!   VMDeath, from the shim or by attach verbs) and the JVMTI callbacks, with `options`,
//!   `log`, `ffi` (no panic crosses into the JVM), `stats` (the agent's counters) and
//!   `worker` (start and stop of the agent's own threads);
//! - `sampling`: the CPU engines (perf events, CPU timers), the SIGPROF handler, the native
//!   walk, the thread table, the sample buffer;
//! - `code_map`: where native code is (libraries, their unwind tables, the code cache) and
//!   what its frames are called (ELF symbols, kallsyms);
//! - `threads`: which threads are sampled: Java threads registered at ThreadStart, those
//!   already running at a late start, virtual threads, and the scan for the rest;
//! - `engines`: wall clock, allocations (for the allocation profile and the live heap),
//!   locks, and garbage collection pauses (`engines::gc`);
//! - `live`: the live heap, on the aggregator thread: the tracked objects and their names,
//!   the collections they survived (`live::watch`, with `jvm::management`'s beans) and the
//!   snapshots;
//! - `context`: the thread-context records and the process context
//!   (docs/context-protocol.md);
//! - `jvm`: JVMTI and JNI, AsyncGetCallTrace, jmethodID symbolisation, and `jvm::hotspot`:
//!   the kernel tid and JNIEnv of threads already running at a late start, read from
//!   HotSpot's own structures; `sys`: every C declaration;
//! - the export path: `aggregator` builds one profile per type (`kinds`) and period, and
//!   writes pprof files (or a dump's own file: `dump_file`) or hands it to the OTLP exporter
//!   that `otlp_export` sets up;
//! - `remote`: the OpAMP client's view of the agent (identity, health, what a server may
//!   change), when `opamp=` is given.
//!
//! How a sample travels: a per-thread CPU timer (`sampling::timers`) sends SIGPROF to the
//! thread that burned the CPU; the handler (`sampling::signal_handler`) finds the thread in
//! `sampling::thread_table`, walks its stack with AsyncGetCallTrace (`jvm::agct`) and
//! appends the frames to `sampling::sample_buffer`; the `aggregator` thread names the frames
//! (`jvm::symbols`) and writes a profile every period. The threads JVMTI does not announce
//! (garbage collector, JIT compilers, VM thread, native libraries) are found in
//! `/proc/self/task` by `threads::thread_scan`, get timers too, and are recorded under one
//! frame naming their role (`[GC]`, `[JIT compiler]`, `[VM]`: `sampling::thread_roles`), so
//! the CPU profile adds up to the process's CPU time.
//!
//! The other profile types take the same road from different starts: the wall-clock thread
//! (`engines::wall`) signals threads in turn whatever they are doing; JVMTI callbacks record
//! sampled allocations (`engines::alloc`) and contended monitors (`engines::locks`) through
//! `sampling::event_sample`, naming the leaf class with `jvm::class_names`. An allocation
//! sample kept for the live heap carries a weak reference to its object, which the
//! aggregator keeps in `live` until the object dies; the snapshots it writes every period
//! are profiles like the others.
//!
//! Dependencies go one way, from the entry points down: `lib.rs` and `jni_api` -> `agent`
//! -> `otlp_export`, `remote`, `aggregator` -> `live` -> `engines` -> `threads` -> `sampling`
//! -> `jvm`, `context`, `code_map` -> `sys`; `ffi` sits above `sampling` (it turns sampling off), and `log`,
//! `options`, `stats`, `worker`, `kinds` and `dump_file` are leaves any layer may use. No
//! module imports one that imports it.

#[macro_use]
mod log;

mod agent;
mod aggregator;
mod code_map;
mod context;
mod dump_file;
mod engines;
mod ffi;
mod jni_api;
mod jvm;
mod kinds;
mod live;
mod options;
mod otlp_export;
mod remote;
mod sampling;
mod stats;
mod sys;
mod threads;
mod worker;

use std::ffi::CStr;
use std::os::raw::{c_char, c_void};

use jni::sys::{jint, JavaVM, JNI_OK};

fn options_str(options: *const c_char) -> String {
    if options.is_null() {
        return String::new();
    }
    // SAFETY: the JVM passes a NUL-terminated string (or null, handled above).
    unsafe { CStr::from_ptr(options) }
        .to_string_lossy()
        .into_owned()
}

/// Called by the JVM for `-agentpath:libotelprof.so=<options>`.
///
/// Always returns JNI_OK: a non-zero result would abort JVM start-up, and a profiler must
/// never stop the application. Problems are reported in one log line and profiling stays off.
///
/// # Safety
/// Called by the JVM with its JavaVM* and the option string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnLoad(
    vm: *mut JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> jint {
    ffi::install_panic_hook();
    ffi::guard("Agent_OnLoad", JNI_OK, || {
        // SAFETY: `vm` comes from the JVM.
        if let Err(e) = unsafe { agent::control::on_load(vm, &options_str(options)) } {
            log_error!("{e}");
        }
        JNI_OK
    })
}

/// Called for each load into a running JVM (`otelprof attach PID start|stop|status|dump`, or
/// `jcmd PID JVMTI.agent_load <this library> "<verb>,..."`): carries out the verb and writes
/// its reply (`agent::attach`). Every load of the same path reaches the same statics.
///
/// Always returns JNI_OK: on any other value HotSpot unloads the library, under the agent's
/// own running threads. Errors travel in the reply and one log line.
///
/// # Safety
/// Called by the JVM with its JavaVM* and the option string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnAttach(
    vm: *mut JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> jint {
    ffi::install_panic_hook();
    ffi::guard("Agent_OnAttach", JNI_OK, || {
        // SAFETY: `vm` comes from the JVM, on the attaching thread.
        unsafe { agent::control::on_attach(vm, &options_str(options)) };
        JNI_OK
    })
}

/// Called when the library is loaded by `System.load` (the Java shim, `-javaagent`). The
/// shim then calls `NativeBridge.start0(options)`.
///
/// # Safety
/// Called by the JVM.
#[no_mangle]
pub unsafe extern "C" fn JNI_OnLoad(_vm: *mut JavaVM, _reserved: *mut c_void) -> jint {
    ffi::install_panic_hook();
    jni::sys::JNI_VERSION_1_8
}

/// Called when the JVM unloads the agent (after VMDeath). Nothing is freed: a signal that was
/// already queued may still run the handler, which must find its data intact.
///
/// # Safety
/// Called by the JVM.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnUnload(_vm: *mut JavaVM) {}
