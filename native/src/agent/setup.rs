//! Setting the agent up at load (options, JVMTI capabilities, events, the SIGPROF handler),
//! and the JVMTI callbacks. The callbacks are thin: they hand off to the thread registry, to
//! the virtual-thread records, and to [`Agent`]'s start and stop
//! ([`crate::agent::start_stop`]).

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock};

use jni::sys::{jclass, jobject, JNIEnv, JavaVM};

use crate::agent::start_stop::Agent;
use crate::ffi::guard;
use crate::jvm::jvmti::{self, delete_local_ref, Jvmti};
use crate::options::Options;
use crate::otlp_export;
use crate::sampling::sample_buffer::SampleBuffer;
use crate::sampling::signal_handler::{self, Sampler};
use crate::sampling::thread_registry;
use crate::sys::{self, capability, event, JvmtiCapabilities, JvmtiEnv, JvmtiEventCallbacks};

static AGENT: OnceLock<Agent> = OnceLock::new();

/// Sample buffer sizing: enough shards that two cores rarely collide, arenas large enough
/// for many drain intervals of the fastest sampling we accept.
const SHARDS: usize = 8;
const ARENA_BYTES: usize = 512 * 1024;

/// Agent_OnLoad: parse options, get JVMTI, ask for events; sampling starts at VMInit.
///
/// # Safety
/// `vm` is the JavaVM* the JVM passed to Agent_OnLoad.
pub(crate) unsafe fn on_load(vm: *mut JavaVM, options: &str) -> Result<(), String> {
    // SAFETY: per this function's contract.
    unsafe { setup(vm, options, false) }
}

/// Start from the Java shim (`-javaagent:otelprof.jar`): the VM is already in its live phase,
/// so there will be no VMInit; sampling starts now, from the calling thread.
///
/// # Safety
/// `vm` is the process's JavaVM*, `env` the calling thread's JNIEnv.
pub(crate) unsafe fn on_live_start(
    vm: *mut JavaVM,
    env: *mut JNIEnv,
    options: &str,
) -> Result<(), String> {
    if AGENT.get().is_some() {
        // Already loaded (e.g. also given with -agentpath): the shim just uses it.
        return Ok(());
    }
    // SAFETY: per this function's contract.
    unsafe { setup(vm, options, true)? };
    let Some(agent) = agent() else {
        return Ok(()); // nothing to profile
    };
    let mut thread: jobject = std::ptr::null_mut();
    if let Err(e) = agent.jvmti.current_thread(&mut thread) {
        return Err(format!("cannot identify the starting thread: {e}"));
    }
    // SAFETY: `env` is this thread's JNIEnv and `thread` its Thread (a local reference).
    unsafe {
        agent.start(env, thread);
        delete_local_ref(env, thread);
    }
    Ok(())
}

/// Registers the calling thread if it started before the agent did (it had no ThreadStart).
///
/// # Safety
/// `env` is the calling thread's JNIEnv.
pub(crate) unsafe fn register_current_thread(env: *mut JNIEnv) {
    let Some(agent) = agent() else { return };
    let mut thread: jobject = std::ptr::null_mut();
    if agent.jvmti.current_thread(&mut thread).is_ok() {
        // SAFETY: the calling thread's JNIEnv and Thread.
        unsafe {
            thread_registry::on_thread_start(&agent.jvmti, env, thread, agent.registration());
            delete_local_ref(env, thread);
        }
    }
}

/// # Safety
/// `vm` is the process's JavaVM*.
unsafe fn setup(vm: *mut JavaVM, options: &str, live: bool) -> Result<(), String> {
    let options = Options::parse(options).map_err(|e| format!("{e}; profiling is off"))?;
    crate::log::set_level(options.log);
    // The environment is read here, once; nothing later looks at it again.
    let lookup = |name: &str| std::env::var(name).ok();
    if otlp_export::sdk_disabled(&lookup) {
        log_info!("OTEL_SDK_DISABLED=true: profiling is off");
        return Ok(());
    }
    if options.cpu_interval.is_none()
        && options.wall_interval.is_none()
        && options.alloc_interval.is_none()
        && options.lock_threshold.is_none()
    {
        log_info!("cpu=off and no wall, alloc or lock profiling: nothing to profile");
        return Ok(());
    }
    if AGENT.get().is_some() {
        return Err("the agent is loaded twice; the second copy does nothing".into());
    }
    let export_env =
        otlp_export::read_env(&options, &lookup).map_err(|e| format!("{e}; profiling is off"))?;
    // Files: where out= says; with OTLP and no out=, none (the working directory is the
    // application's, not ours); with neither, the working directory as before.
    let out_dir = match (&options.out_dir, &export_env.config) {
        (Some(d), _) => Some(d.clone()),
        (None, Some(_)) => None,
        (None, None) => Some(
            std::env::current_dir()
                .map_err(|e| format!("no out= given and no current directory: {e}"))?,
        ),
    };
    let out_dir = out_dir.map(|d| std::fs::canonicalize(&d).unwrap_or(d));

    // SAFETY: per this function's contract.
    let jvmti = unsafe { Jvmti::from_vm(vm) }.map_err(|e| format!("cannot get JVMTI: {e}"))?;
    let walk = crate::jvm::agct::find(&jvmti).map_err(|e| e.to_string())?;

    let potential = jvmti
        .potential_capabilities()
        .map_err(|e| format!("cannot read JVMTI capabilities: {e}"))?;
    let mut caps = JvmtiCapabilities::default();
    for bit in [
        capability::CAN_GET_LINE_NUMBERS,
        capability::CAN_GET_SOURCE_FILE_NAME,
        // Enabling CompiledMethodLoad makes HotSpot record debug info at non-safepoint pcs
        // (DebugNonSafepoints), so samples in JIT-compiled code name the right inlined frame
        // and line instead of the nearest safepoint's.
        capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS,
        // Early VMStart makes JVMTI post ThreadStart for the JDK's own early threads
        // (Reference Handler, Finalizer, Signal Dispatcher); only possible at OnLoad.
        capability::CAN_GENERATE_EARLY_VMSTART,
        // JDK 21+: virtual-thread events, so that context follows virtual threads.
        capability::CAN_SUPPORT_VIRTUAL_THREADS,
    ] {
        if live && bit == capability::CAN_GENERATE_EARLY_VMSTART {
            continue;
        }
        if potential.has(bit) {
            caps = caps.with(bit);
        }
    }
    // Allocation and lock profiling: sampled allocation and monitor events, and object tags
    // (class names of leaf frames, lock wait start times).
    let wanted = |on: bool, bit: u32, what: &str| -> bool {
        if !on {
            return false;
        }
        if potential.has(bit) && potential.has(capability::CAN_TAG_OBJECTS) {
            return true;
        }
        log_warn!("this JVM cannot do {what} profiling; it stays off");
        false
    };
    let alloc = wanted(
        options.alloc_interval.is_some(),
        capability::CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS,
        "allocation",
    );
    let lock = wanted(
        options.lock_threshold.is_some(),
        capability::CAN_GENERATE_MONITOR_EVENTS,
        "lock",
    );
    if alloc {
        caps = caps.with(capability::CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS);
    }
    if lock {
        caps = caps.with(capability::CAN_GENERATE_MONITOR_EVENTS);
    }
    if alloc || lock {
        caps = caps.with(capability::CAN_TAG_OBJECTS);
    }
    // java.util.concurrent parks: the JDK binds Unsafe.park during startup; catching that
    // binding needs the event from OnLoad on (see crate::engines::parks).
    let park_bind =
        lock && !live && potential.has(capability::CAN_GENERATE_NATIVE_METHOD_BIND_EVENTS);
    if park_bind {
        caps = caps.with(capability::CAN_GENERATE_NATIVE_METHOD_BIND_EVENTS);
    }
    if !caps.has(capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS) {
        log_warn!(
            "this JVM cannot post CompiledMethodLoad; frames in compiled code are less exact"
        );
    }
    jvmti
        .add_capabilities(&caps)
        .map_err(|e| format!("cannot add JVMTI capabilities: {e}"))?;

    let callbacks = JvmtiEventCallbacks {
        VMInit: Some(vm_init),
        VMDeath: Some(vm_death),
        ThreadStart: Some(thread_start),
        ThreadEnd: Some(thread_end),
        ClassLoad: Some(class_load),
        ClassPrepare: Some(class_prepare),
        CompiledMethodLoad: Some(compiled_method_load),
        VirtualThreadEnd: Some(virtual_thread_end),
        SampledObjectAlloc: alloc.then_some(crate::engines::alloc::sampled_object_alloc as _),
        MonitorContendedEnter: lock.then_some(crate::engines::locks::monitor_contended_enter as _),
        MonitorContendedEntered: lock
            .then_some(crate::engines::locks::monitor_contended_entered as _),
        NativeMethodBind: park_bind.then_some(crate::engines::parks::native_method_bind as _),
        ..Default::default()
    };
    jvmti
        .set_event_callbacks(&callbacks)
        .map_err(|e| format!("cannot set JVMTI callbacks: {e}"))?;
    let mut events = vec![
        event::EVENT_VM_INIT,
        event::EVENT_VM_DEATH,
        event::EVENT_THREAD_START,
        event::EVENT_THREAD_END,
        // AsyncGetCallTrace refuses to walk (ticks_no_class_load) unless ClassLoad is enabled.
        event::EVENT_CLASS_LOAD,
        event::EVENT_CLASS_PREPARE,
    ];
    if caps.has(capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS) {
        events.push(event::EVENT_COMPILED_METHOD_LOAD);
    }
    if park_bind {
        events.push(event::EVENT_NATIVE_METHOD_BIND);
    }
    if caps.has(capability::CAN_SUPPORT_VIRTUAL_THREADS)
        && crate::sampling::virtual_threads::enable(
            &jvmti,
            virtual_thread_mount,
            virtual_thread_unmount,
        )
    {
        events.push(event::EVENT_VIRTUAL_THREAD_END);
    }
    for e in events {
        jvmti
            .set_event(true, e)
            .map_err(|err| format!("cannot enable JVMTI event {e}: {err}"))?;
    }

    let max_depth = options.max_depth as usize;
    let sampler: &'static Sampler = Box::leak(Box::new(Sampler {
        table: &thread_registry::TABLE,
        buffer: SampleBuffer::new(SHARDS, max_depth, ARENA_BYTES),
        walk,
        max_depth: options.max_depth as i32,
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
    let agent = Agent {
        cpu_interval: options.cpu_interval,
        alloc,
        lock,
        vm,
        jvmti,
        options,
        out_dir,
        export_env,
        exporter: Mutex::new(None),
        sampler,
        aggregator: Mutex::new(None),
        wall: Mutex::new(None),
        scan: Mutex::new(None),
        started: AtomicBool::new(false),
    };
    let env = agent.jvmti;
    AGENT
        .set(agent)
        .map_err(|_| "the agent is loaded twice; the second copy does nothing".to_string())?;
    // The callbacks and JNI methods that fetch the environment see it once the agent is complete.
    jvmti::publish_agent_env(env);
    Ok(())
}

fn agent() -> Option<&'static Agent> {
    AGENT.get()
}

unsafe extern "C" fn virtual_thread_end(
    _jvmti: *mut JvmtiEnv,
    _jni: *mut JNIEnv,
    vthread: jobject,
) {
    guard("VirtualThreadEnd", (), || {
        if let Some(a) = agent() {
            // SAFETY: the event's own arguments.
            unsafe { crate::sampling::virtual_threads::on_end(&a.jvmti, vthread) };
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
        if let Some(a) = agent() {
            // SAFETY: the event's own arguments, on the carrier.
            unsafe { crate::sampling::virtual_threads::mount(&a.jvmti, vthread) };
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
        crate::sampling::virtual_threads::unmount,
    )
}

unsafe extern "C" fn vm_init(_jvmti: *mut JvmtiEnv, jni: *mut JNIEnv, thread: jobject) {
    guard("VMInit", (), || {
        if let Some(a) = agent() {
            // SAFETY: these are VMInit's own arguments.
            unsafe { a.start(jni, thread) };
        }
    })
}

unsafe extern "C" fn vm_death(_jvmti: *mut JvmtiEnv, _jni: *mut JNIEnv) {
    guard("VMDeath", (), || {
        if let Some(a) = agent() {
            a.stop();
        }
    })
}

unsafe extern "C" fn thread_start(_jvmti: *mut JvmtiEnv, jni: *mut JNIEnv, thread: jobject) {
    guard("ThreadStart", (), || {
        if let Some(a) = agent() {
            // SAFETY: ThreadStart runs on the new thread and passes its JNIEnv and Thread.
            unsafe { thread_registry::on_thread_start(&a.jvmti, jni, thread, a.registration()) };
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
        if let Some(a) = agent() {
            // SAFETY: `class` is the local reference JVMTI passed to this ClassPrepare callback.
            let _ = unsafe { a.jvmti.preload_method_ids(class) };
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
