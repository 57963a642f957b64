//! What the agent sets up once per process, whatever profiling sessions follow: the JVMTI
//! environment and its capabilities, the event callbacks, the sample buffer and the SIGPROF
//! handler. A session ([`crate::agent::session`]) turns events, timers and threads on and off;
//! none of this is ever undone (a queued signal may still reach the handler, which must find
//! its data intact; a SIGPROF set back to its default would kill the JVM).
//!
//! The callbacks are thin: they hand off to the thread registry and the virtual-thread
//! records; VMInit and VMDeath, the lifecycle's, are given by [`crate::agent::control`].

use std::sync::{Mutex, OnceLock};

use jni::sys::{jclass, jobject, JNIEnv, JavaVM};

use crate::ffi::guard;
use crate::jvm::jvmti::{self, Jvmti};
use crate::sampling::sample_buffer::SampleBuffer;
use crate::sampling::signal_handler::{self, Sampler};
use crate::sys::{self, capability, event, JvmtiCapabilities, JvmtiEnv, JvmtiEventCallbacks};
use crate::threads::thread_registry;

/// Sample buffer sizing: enough shards that two cores rarely collide, arenas large enough
/// for many drain intervals of the fastest sampling we accept.
const SHARDS: usize = 8;
const ARENA_BYTES: usize = 512 * 1024;
/// Frames a sample can hold unless the first session asks for more (`depth=`, default 2048):
/// later sessions are held to what the buffer was made for.
const MIN_FRAMES: u32 = 2048;

/// The agent as set up in this process.
pub(crate) struct Loaded {
    pub(crate) vm: *mut JavaVM,
    pub(crate) jvmti: Jvmti,
    pub(crate) sampler: &'static Sampler,
    /// What this JVM could grant, and what it has granted so far.
    potential: JvmtiCapabilities,
    granted: Mutex<JvmtiCapabilities>,
}

// SAFETY: `vm` is the process-wide JavaVM*, usable from any thread; the rest is Sync.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

static LOADED: OnceLock<Loaded> = OnceLock::new();

/// The agent, once set up.
pub(crate) fn loaded() -> Option<&'static Loaded> {
    LOADED.get()
}

/// What the first session wants of the setup.
pub(crate) struct Wants {
    /// Deepest stack (the buffer holds at least this many frames per sample).
    pub(crate) depth: u32,
    /// Lock profiling: at OnLoad, the park hook is bound when the JDK binds `Unsafe.park`.
    pub(crate) lock: bool,
    /// The lifecycle's VMInit and VMDeath callbacks ([`crate::agent::control`]'s).
    pub(crate) vm_init: VmInitFn,
    pub(crate) vm_death: VmDeathFn,
}

/// JVMTI `VMInit(jvmtiEnv*, JNIEnv*, jthread)`.
pub(crate) type VmInitFn = unsafe extern "C" fn(*mut JvmtiEnv, *mut JNIEnv, jobject);
/// JVMTI `VMDeath(jvmtiEnv*, JNIEnv*)`.
pub(crate) type VmDeathFn = unsafe extern "C" fn(*mut JvmtiEnv, *mut JNIEnv);

impl Loaded {
    /// Adds what allocation and lock profiling need, if this JVM can; returns whether each
    /// can run. The other capabilities were added at setup.
    pub(crate) fn ensure_capabilities(&self, alloc: bool, lock: bool) -> (bool, bool) {
        let wanted = |on: bool, bit: u32, what: &str| -> bool {
            if !on {
                return false;
            }
            if self.potential.has(bit) && self.potential.has(capability::CAN_TAG_OBJECTS) {
                return true;
            }
            log_warn!("this JVM cannot do {what} profiling; it stays off");
            false
        };
        let alloc = wanted(
            alloc,
            capability::CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS,
            "allocation",
        );
        let lock = wanted(lock, capability::CAN_GENERATE_MONITOR_EVENTS, "lock");
        let mut granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        let mut more = JvmtiCapabilities::default();
        for (on, bit) in [
            (alloc, capability::CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS),
            (lock, capability::CAN_GENERATE_MONITOR_EVENTS),
            (alloc || lock, capability::CAN_TAG_OBJECTS),
        ] {
            if on && !granted.has(bit) {
                more = more.with(bit);
            }
        }
        if more == JvmtiCapabilities::default() {
            return (alloc, lock);
        }
        match self.jvmti.add_capabilities(&more) {
            Ok(()) => {
                for bit in [
                    capability::CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS,
                    capability::CAN_GENERATE_MONITOR_EVENTS,
                    capability::CAN_TAG_OBJECTS,
                ] {
                    if more.has(bit) {
                        *granted = granted.with(bit);
                    }
                }
                (alloc, lock)
            }
            Err(e) => {
                log_warn!("cannot add JVMTI capabilities for allocation and lock profiling: {e}; they stay off");
                (false, false)
            }
        }
    }

    /// Whether a capability was granted.
    pub(crate) fn has(&self, bit: u32) -> bool {
        self.granted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .has(bit)
    }
}

/// Sets the agent up: JVMTI capabilities and callbacks, the sampler and the SIGPROF handler.
/// Once per process; later calls return what the first one set up.
///
/// # Safety
/// `vm` is the process's JavaVM*; `at_onload` is true only inside Agent_OnLoad.
pub(crate) unsafe fn load(
    vm: *mut JavaVM,
    at_onload: bool,
    wants: &Wants,
) -> Result<&'static Loaded, String> {
    if let Some(l) = LOADED.get() {
        return Ok(l);
    }
    if let Some(other) = signal_handler::other_copy() {
        return Err(format!(
            "another copy of libotelprof.so is active in this JVM ({other}); use that path"
        ));
    }
    // SAFETY: per this function's contract.
    let jvmti = unsafe { Jvmti::from_vm(vm) }.map_err(|e| format!("cannot get JVMTI: {e}"))?;
    let walk = crate::jvm::agct::find(&jvmti).map_err(|e| e.to_string())?;
    let potential = jvmti
        .potential_capabilities()
        .map_err(|e| format!("cannot read JVMTI capabilities: {e}"))?;
    // java.util.concurrent parks: the JDK binds Unsafe.park during startup; catching that
    // binding needs the event from OnLoad on (see crate::engines::parks).
    let park_bind = wants.lock
        && at_onload
        && potential.has(capability::CAN_GENERATE_NATIVE_METHOD_BIND_EVENTS);
    let by_flag = debug_non_safepoints(&jvmti);
    let caps = add_capabilities(&jvmti, &potential, at_onload, park_bind, by_flag)?;
    set_callbacks(&jvmti, wants, at_onload, park_bind)?;
    let sampler = install_sampler(walk, wants.depth)?;
    let loaded = Loaded {
        vm,
        jvmti,
        sampler,
        potential,
        granted: Mutex::new(caps),
    };
    let env = loaded.jvmti;
    let loaded = match LOADED.set(loaded) {
        Ok(()) => LOADED.get(),
        Err(_) => None,
    }
    .ok_or("internal error: the agent was set up twice")?;
    // The callbacks and JNI methods that fetch the environment see it once the agent is complete.
    jvmti::publish_agent_env(env);
    Ok(loaded)
}

/// Makes the JIT record debug information at every pc, not only at safepoints, by setting
/// HotSpot's `DebugNonSafepoints` where the user did not set it (while sessions run: see
/// `session_events`). True when the flag can be set, is on already, or was set either way
/// by the user. False when it cannot be set (not HotSpot, or a HotSpot whose flag table is
/// not as expected): then the agent enables the CompiledMethodLoad event, which has the same
/// effect on a flag at its default, at the cost of the events
/// ([`crate::jvm::hotspot::vm_flags`] says which).
fn debug_non_safepoints(jvmti: &Jvmti) -> bool {
    use crate::jvm::hotspot::vm_flags::{self, Outcome};
    match vm_flags::claim_default_bool(jvmti, "DebugNonSafepoints") {
        Ok(Outcome::Claimed) => {
            log_debug!("DebugNonSafepoints will be on while profiling runs");
            true
        }
        Ok(Outcome::AlreadyOn) => {
            log_debug!("DebugNonSafepoints is on already");
            true
        }
        Ok(Outcome::Given(value)) => {
            if !value {
                log_info!(
                    "-XX:-DebugNonSafepoints is set: samples in JIT-compiled code are placed at the nearest safepoint"
                );
            }
            true
        }
        Err(e) => {
            log_debug!("cannot set DebugNonSafepoints ({e}); using CompiledMethodLoad events");
            false
        }
    }
}

/// Adds the capabilities every session needs that this JVM has (of those in `potential`);
/// returns them.
fn add_capabilities(
    jvmti: &Jvmti,
    potential: &JvmtiCapabilities,
    at_onload: bool,
    park_bind: bool,
    by_flag: bool,
) -> Result<JvmtiCapabilities, String> {
    let mut caps = JvmtiCapabilities::default();
    for bit in [
        capability::CAN_GET_LINE_NUMBERS,
        capability::CAN_GET_SOURCE_FILE_NAME,
        // Enabling CompiledMethodLoad makes HotSpot record debug info at non-safepoint pcs
        // (DebugNonSafepoints), so samples in JIT-compiled code name the right inlined frame
        // and line instead of the nearest safepoint's: the way there when the flag itself
        // cannot be set (see `debug_non_safepoints`).
        capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS,
        // Early VMStart makes JVMTI post ThreadStart for the JDK's own early threads
        // (Reference Handler, Finalizer, Signal Dispatcher); only possible at OnLoad.
        capability::CAN_GENERATE_EARLY_VMSTART,
        // JDK 21+: virtual-thread events, so that context follows virtual threads.
        capability::CAN_SUPPORT_VIRTUAL_THREADS,
        // Pause timings for the memory metrics, `[GC pause]` in wall profiles, and the live
        // heap's "a collection ran" (an always-available capability in HotSpot).
        capability::CAN_GENERATE_GARBAGE_COLLECTION_EVENTS,
    ] {
        if !at_onload && bit == capability::CAN_GENERATE_EARLY_VMSTART {
            continue;
        }
        if by_flag && bit == capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS {
            continue;
        }
        if potential.has(bit) {
            caps = caps.with(bit);
        }
    }
    if park_bind {
        caps = caps.with(capability::CAN_GENERATE_NATIVE_METHOD_BIND_EVENTS);
    }
    if !by_flag && !caps.has(capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS) {
        log_warn!(
            "this JVM cannot post CompiledMethodLoad; frames in compiled code are less exact"
        );
    }
    jvmti
        .add_capabilities(&caps)
        .map_err(|e| format!("cannot add JVMTI capabilities: {e}"))?;
    Ok(caps)
}

/// Sets every event callback, and enables the events the agent needs whether or not a
/// session runs (VMDeath, VMInit at OnLoad, the park hook's NativeMethodBind).
fn set_callbacks(
    jvmti: &Jvmti,
    wants: &Wants,
    at_onload: bool,
    park_bind: bool,
) -> Result<(), String> {
    let callbacks = JvmtiEventCallbacks {
        VMInit: Some(wants.vm_init),
        VMDeath: Some(wants.vm_death),
        ThreadStart: Some(thread_start),
        ThreadEnd: Some(thread_end),
        ClassLoad: Some(class_load),
        ClassPrepare: Some(class_prepare),
        CompiledMethodLoad: Some(compiled_method_load),
        VirtualThreadEnd: Some(virtual_thread_end),
        // Set always; a session enables the events it wants.
        SampledObjectAlloc: Some(crate::engines::alloc::sampled_object_alloc as _),
        MonitorContendedEnter: Some(crate::engines::locks::monitor_contended_enter as _),
        MonitorContendedEntered: Some(crate::engines::locks::monitor_contended_entered as _),
        NativeMethodBind: park_bind.then_some(crate::engines::parks::native_method_bind as _),
        GarbageCollectionStart: Some(crate::engines::gc::garbage_collection_start as _),
        GarbageCollectionFinish: Some(crate::engines::gc::garbage_collection_finish as _),
        ..Default::default()
    };
    jvmti
        .set_event_callbacks(&callbacks)
        .map_err(|e| format!("cannot set JVMTI callbacks: {e}"))?;
    let mut events = vec![event::EVENT_VM_DEATH];
    if at_onload {
        events.push(event::EVENT_VM_INIT);
    }
    if park_bind {
        events.push(event::EVENT_NATIVE_METHOD_BIND);
    }
    for e in events {
        jvmti
            .set_event(true, e)
            .map_err(|err| format!("cannot enable JVMTI event {e}: {err}"))?;
    }
    Ok(())
}

/// Makes the sampler (its buffer sized for stacks of `depth` frames, at least
/// [`MIN_FRAMES`]) and installs it and the SIGPROF handler.
fn install_sampler(
    walk: crate::sys::AsyncGetCallTraceFn,
    depth: u32,
) -> Result<&'static Sampler, String> {
    let frames = depth.max(MIN_FRAMES);
    let sampler: &'static Sampler = Box::leak(Box::new(Sampler {
        table: &thread_registry::TABLE,
        buffer: SampleBuffer::new(SHARDS, frames as usize, ARENA_BYTES),
        walk,
        depth: std::sync::atomic::AtomicI32::new(depth as i32),
    }));
    if !signal_handler::install(sampler) {
        return Err("internal error: sampler installed twice".into());
    }
    match signal_handler::install_handler(libc::SIGPROF) {
        Ok(Some(prev)) => {
            log_warn!("replaced another SIGPROF handler ({prev:#x}); is another profiler loaded?")
        }
        Ok(None) => {}
        Err(e) => return Err(format!("cannot install the SIGPROF handler: {e}")),
    }
    Ok(sampler)
}

/// Enables or disables the events a session needs besides its profile types' (thread
/// lifecycle, class preparation for jmethodIDs, CompiledMethodLoad, virtual threads).
pub(crate) fn session_events(loaded: &Loaded, on: bool) -> Result<(), String> {
    let mut events = vec![
        event::EVENT_THREAD_START,
        event::EVENT_THREAD_END,
        // AsyncGetCallTrace refuses to walk (ticks_no_class_load) unless ClassLoad is enabled.
        event::EVENT_CLASS_LOAD,
        event::EVENT_CLASS_PREPARE,
    ];
    if loaded.has(capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS) {
        events.push(event::EVENT_COMPILED_METHOD_LOAD);
    }
    if loaded.has(capability::CAN_GENERATE_GARBAGE_COLLECTION_EVENTS) {
        events.push(event::EVENT_GARBAGE_COLLECTION_START);
        events.push(event::EVENT_GARBAGE_COLLECTION_FINISH);
    }
    crate::jvm::hotspot::vm_flags::switch(on);
    let vthreads = loaded.has(capability::CAN_SUPPORT_VIRTUAL_THREADS);
    if on && vthreads {
        if crate::threads::virtual_threads::enable(
            &loaded.jvmti,
            virtual_thread_mount,
            virtual_thread_unmount,
        ) {
            events.push(event::EVENT_VIRTUAL_THREAD_END);
        }
    } else if !on {
        crate::threads::virtual_threads::disable(&loaded.jvmti);
        if vthreads {
            events.push(event::EVENT_VIRTUAL_THREAD_END);
        }
    }
    for e in events {
        let result = loaded.jvmti.set_event(on, e);
        if on {
            result.map_err(|err| format!("cannot enable JVMTI event {e}: {err}"))?;
        }
    }
    Ok(())
}

unsafe extern "C" fn virtual_thread_end(
    _jvmti: *mut JvmtiEnv,
    _jni: *mut JNIEnv,
    vthread: jobject,
) {
    guard("VirtualThreadEnd", (), || {
        if let Some(l) = loaded() {
            // SAFETY: the event's own arguments.
            unsafe { crate::threads::virtual_threads::on_end(&l.jvmti, vthread) };
        }
    })
}

/// HotSpot's VirtualThreadMount extension event, posted on the carrier.
unsafe extern "C" fn virtual_thread_mount(
    _jvmti: *mut JvmtiEnv,
    _jni: *mut JNIEnv,
    vthread: jobject,
) {
    guard("VirtualThreadMount", (), || {
        if let Some(l) = loaded() {
            // SAFETY: the event's own arguments, on the carrier.
            unsafe { crate::threads::virtual_threads::mount(&l.jvmti, vthread) };
        }
    })
}

/// HotSpot's VirtualThreadUnmount extension event, posted on the carrier.
unsafe extern "C" fn virtual_thread_unmount(
    _jvmti: *mut JvmtiEnv,
    _jni: *mut JNIEnv,
    _vthread: jobject,
) {
    guard(
        "VirtualThreadUnmount",
        (),
        crate::threads::virtual_threads::unmount,
    )
}

unsafe extern "C" fn thread_start(_jvmti: *mut JvmtiEnv, jni: *mut JNIEnv, thread: jobject) {
    guard("ThreadStart", (), || {
        if let Some(l) = loaded() {
            // SAFETY: ThreadStart runs on the new thread and passes its JNIEnv and Thread.
            unsafe { thread_registry::on_thread_start(&l.jvmti, jni, thread) };
        }
    })
}

unsafe extern "C" fn thread_end(_jvmti: *mut JvmtiEnv, _jni: *mut JNIEnv, _thread: jobject) {
    guard("ThreadEnd", (), thread_registry::on_thread_end)
}

unsafe extern "C" fn class_load(_: *mut JvmtiEnv, _: *mut JNIEnv, _: jobject, _: jclass) {}

unsafe extern "C" fn class_prepare(
    _jvmti: *mut JvmtiEnv,
    _jni: *mut JNIEnv,
    _thread: jobject,
    class: jclass,
) {
    guard("ClassPrepare", (), || {
        if let Some(l) = loaded() {
            // SAFETY: `class` is the local reference JVMTI passed to this ClassPrepare callback.
            let _ = unsafe { l.jvmti.preload_method_ids(class) };
        }
    })
}

unsafe extern "C" fn compiled_method_load(
    _: *mut JvmtiEnv,
    _: jni::sys::jmethodID,
    _: jni::sys::jint,
    _: *const libc::c_void,
    _: jni::sys::jint,
    _: *const sys::JvmtiAddrLocationMap,
    _: *const libc::c_void,
) {
}
