//! The agent's lifecycle: set up at load, start sampling (and OTLP export) at VMInit, stop,
//! write or send the last profile at VMDeath. The JVMTI callbacks here are thin: they hand
//! off to `threads`, `sampler`, `aggregator` and `otlp_export`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use jni::sys::{jclass, jobject, JNIEnv, JavaVM};
use otelprof_exporter::OtlpExporter;

use crate::aggregator::{self, Aggregator};
use crate::engines::wall::{self, WallClock};
use crate::ffi::guard;
use crate::jvm::jvmti::{self, delete_local_ref, Jvmti};
use crate::kinds::SampleKind;
use crate::options::{Clock, Options};
use crate::otlp_export::{self, ExportEnv};
use crate::sampling::sample_buffer::SampleBuffer;
use crate::sampling::signal_handler::{self, Sampler};
use crate::sampling::thread_registry::{self, Registration};
use crate::sampling::timers::ProcessItimer;
use crate::stats;
use crate::sys::{self, capability, event, JvmtiCapabilities, JvmtiEnv, JvmtiEventCallbacks};

pub struct Agent {
    vm: *mut JavaVM,
    jvmti: Jvmti,
    options: Options,
    /// CPU sampling interval, `None` with `cpu=off`.
    cpu_interval: Option<Duration>,
    /// Allocation and lock profiling, when asked for and this JVM can do them.
    alloc: bool,
    lock: bool,
    /// Where pprof files go: `out=`, else the working directory unless OTLP is configured.
    out_dir: Option<PathBuf>,
    /// The `OTEL_*` environment, read once at load.
    export_env: ExportEnv,
    exporter: Mutex<Option<Arc<OtlpExporter>>>,
    sampler: &'static Sampler,
    aggregator: Mutex<Option<Aggregator>>,
    wall: Mutex<Option<WallClock>>,
    /// Set by the first `start`: under `-javaagent` the shim starts the agent from premain,
    /// which libinstrument runs inside its own VMInit callback, so our VMInit may follow.
    started: AtomicBool,
}

// SAFETY: `vm` is the process-wide JavaVM*, usable from any thread; the rest is Sync.
unsafe impl Send for Agent {}
// SAFETY: as above.
unsafe impl Sync for Agent {}

static AGENT: OnceLock<Agent> = OnceLock::new();

/// Sample buffer sizing: enough shards that two cores rarely collide, arenas large enough
/// for many drain intervals of the fastest sampling we accept.
const SHARDS: usize = 8;
const ARENA_BYTES: usize = 512 * 1024;

/// Agent_OnLoad: parse options, get JVMTI, ask for events; sampling starts at VMInit.
///
/// # Safety
/// `vm` is the JavaVM* the JVM passed to Agent_OnLoad.
pub unsafe fn on_load(vm: *mut JavaVM, options: &str) -> Result<(), String> {
    // SAFETY: per this function's contract.
    unsafe { setup(vm, options, false) }
}

/// Start from the Java shim (`-javaagent:otelprof.jar`): the VM is already in its live phase,
/// so there will be no VMInit; sampling starts now, from the calling thread.
///
/// # Safety
/// `vm` is the process's JavaVM*, `env` the calling thread's JNIEnv.
pub unsafe fn on_live_start(
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
pub unsafe fn register_current_thread(env: *mut JNIEnv) {
    let Some(agent) = agent() else { return };
    let mut thread: jobject = std::ptr::null_mut();
    if agent.jvmti.current_thread(&mut thread).is_ok() {
        // SAFETY: the calling thread's JNIEnv and Thread.
        unsafe {
            thread_registry::on_thread_start(&agent.jvmti, env, thread, registration(agent));
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

fn registration(agent: &Agent) -> Registration {
    Registration {
        cpu_timer: agent
            .cpu_interval
            .filter(|_| agent.options.clock == Clock::ThreadCpu),
    }
}

impl Agent {
    /// # Safety
    /// Called from VMInit with the arguments JVMTI passed to it.
    unsafe fn start(&self, jni: *mut JNIEnv, main_thread: jobject) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let preloaded = preload_loaded_classes(&self.jvmti, jni);
        // SAFETY: VMInit passes the main thread and its JNIEnv; this runs on that thread.
        unsafe {
            thread_registry::on_thread_start(&self.jvmti, jni, main_thread, registration(self))
        };
        // SAFETY: `jni` is this (VMInit or shim) thread's JNIEnv, in the live phase.
        let resource = unsafe { otlp_export::build_resource(jni, &self.export_env, &self.options) };
        // Out-of-process readers (the OpenTelemetry eBPF profiler) learn who we are and how to
        // read our thread-context records from the process context (OTEP 4719).
        let payload = otelprof_profile::process_context::payload(
            &resource,
            crate::context::record::ATTRIBUTE_KEYS,
        );
        if let Err(e) = crate::context::process_context::publish(&payload) {
            log_debug!("cannot publish the OpenTelemetry process context: {e}");
        }
        // The exporter's CPU-utilisation metric converts CPU intervals to time.
        let cpu_interval = self.cpu_interval.unwrap_or(Duration::from_millis(10));
        let exporter =
            match otlp_export::start(resource, &self.export_env, &self.options, cpu_interval) {
                Ok(e) => e,
                Err(e) => {
                    log_error!("{e}; profiling is off");
                    return;
                }
            };
        *self.exporter.lock().unwrap_or_else(|p| p.into_inner()) = exporter.clone();
        let aggregator = Aggregator::start(aggregator::Config {
            vm: self.vm,
            jvmti: self.jvmti,
            sampler: self.sampler,
            kinds: self.kinds(),
            period: self.options.period,
            out_dir: self.out_dir.clone(),
            exporter,
        });
        match aggregator {
            Ok(a) => *self.aggregator.lock().unwrap_or_else(|p| p.into_inner()) = Some(a),
            Err(e) => {
                log_error!("cannot start the aggregator thread: {e}; profiling is off");
                return;
            }
        }
        signal_handler::set_active(true);
        let mut what = Vec::new();
        if let Some(interval) = self.cpu_interval {
            let engine = match self.options.clock {
                Clock::ThreadCpu => "per-thread CPU timers",
                Clock::Itimer => match ProcessItimer::start(interval) {
                    Ok(()) => "setitimer(ITIMER_PROF)",
                    Err(e) => {
                        signal_handler::set_active(false);
                        log_error!("cannot start ITIMER_PROF: {e}; profiling is off");
                        return;
                    }
                },
            };
            what.push(format!("CPU every {interval:?} ({engine})"));
        }
        if let Some(interval) = self.options.wall_interval {
            let started = WallClock::start(wall::Config {
                vm: self.vm,
                jvmti: self.jvmti,
                interval,
                max_samples: self.options.wall_threads as usize,
            });
            match started {
                Ok(w) => {
                    *self.wall.lock().unwrap_or_else(|p| p.into_inner()) = Some(w);
                    what.push(format!(
                        "wall clock every {interval:?} (at most {} threads sampled per interval)",
                        self.options.wall_threads
                    ));
                }
                Err(e) => {
                    log_error!("cannot start the wall-clock thread: {e}; wall profiling is off")
                }
            }
        }
        if let (true, Some(bytes)) = (self.alloc, self.options.alloc_interval) {
            crate::engines::alloc::configure(bytes, self.options.alloc_rate);
            let on = self
                .jvmti
                .set_heap_sampling_interval(bytes as i32)
                .and_then(|()| {
                    self.jvmti
                        .set_event(true, event::EVENT_SAMPLED_OBJECT_ALLOC)
                });
            match on {
                Ok(()) if bytes == 0 => what.push("every allocation".to_owned()),
                Ok(()) if self.options.alloc_rate == 0 => what.push(format!(
                    "allocations (one sample per {} allocated, on average)",
                    human_bytes(bytes)
                )),
                Ok(()) => what.push(format!(
                    "allocations (one sample per {} allocated, on average; at most {} samples/s, \
                     the interval growing while allocation is faster)",
                    human_bytes(bytes),
                    self.options.alloc_rate
                )),
                Err(e) => log_error!("cannot start allocation sampling: {e}; it stays off"),
            }
        }
        if let (true, Some(threshold)) = (self.lock, self.options.lock_threshold) {
            crate::engines::locks::set_threshold(threshold);
            let on = self
                .jvmti
                .set_event(true, event::EVENT_MONITOR_CONTENDED_ENTER)
                .and_then(|()| {
                    self.jvmti
                        .set_event(true, event::EVENT_MONITOR_CONTENDED_ENTERED)
                });
            match on {
                Ok(()) if threshold.is_zero() => {
                    what.push("contended monitors (every wait)".to_owned())
                }
                Ok(()) => what.push(format!(
                    "contended monitors (waits of {threshold:?} or more, shorter ones sampled)"
                )),
                Err(e) => log_error!("cannot start lock profiling: {e}; it stays off"),
            }
            // SAFETY: `jni` is this (VMInit or shim) thread's JNIEnv, in the live phase.
            match unsafe { crate::engines::parks::install(&self.jvmti, jni) } {
                Ok(()) => what.push("java.util.concurrent lock parks".to_owned()),
                Err(e) => log_warn!(
                    "java.util.concurrent locks are not profiled: {e} (contended monitors are)"
                ),
            }
        }
        log_info!(
            "profiling {} (depth {}); {} every {:?} ({preloaded} classes preloaded)",
            what.join(", "),
            self.options.max_depth,
            self.destinations(),
            self.options.period,
        );
    }

    /// The profile types to build, with their pprof periods (see `aggregator::Config`).
    fn kinds(&self) -> Vec<(SampleKind, i64)> {
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let mut kinds = Vec::new();
        if let Some(i) = self.cpu_interval {
            kinds.push((SampleKind::Cpu, nanos(i)));
        }
        if let Some(i) = self.options.wall_interval {
            kinds.push((SampleKind::Wall, nanos(i)));
        }
        if let (true, Some(bytes)) = (self.alloc, self.options.alloc_interval) {
            kinds.push((SampleKind::Alloc, i64::from(bytes)));
        }
        if self.lock {
            kinds.push((SampleKind::Lock, 1));
        }
        kinds
    }

    fn stop(&self) {
        if !signal_handler::is_active() && self.aggregator.lock().map_or(true, |a| a.is_none()) {
            return;
        }
        // The wall thread first: it sends signals and reads thread states, and must be gone
        // (or given up on) before threads and the JVM go away. Bounded: exit never hangs.
        let wall = self.wall.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = wall {
            if !w.stop(Duration::from_secs(1)) {
                log_warn!("the wall-clock thread did not stop within 1s; continuing shutdown");
            }
        }
        if self.alloc {
            let _ = self
                .jvmti
                .set_event(false, event::EVENT_SAMPLED_OBJECT_ALLOC);
        }
        if self.lock {
            let _ = self
                .jvmti
                .set_event(false, event::EVENT_MONITOR_CONTENDED_ENTER);
            let _ = self
                .jvmti
                .set_event(false, event::EVENT_MONITOR_CONTENDED_ENTERED);
        }
        signal_handler::set_active(false);
        thread_registry::stop();
        if self.cpu_interval.is_some() && self.options.clock == Clock::Itimer {
            let _ = ProcessItimer::stop();
        }
        thread_registry::delete_all_timers();
        if !signal_handler::quiesce(Duration::from_secs(1)) {
            log_warn!("a sample was still being taken after 1s; continuing shutdown");
        }
        let aggregator = self
            .aggregator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(a) = aggregator {
            if !a.stop(Duration::from_secs(10)) {
                log_warn!("the last profile was not written within 10s; JVM exit continues");
            }
        }
        // The aggregator has submitted the last profile; give the exporter a bounded time to
        // deliver what is queued. The JVM's exit never waits longer.
        let exporter = self
            .exporter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut export_summary = String::new();
        if let Some(e) = exporter {
            let report = e.shutdown(otlp_export::SHUTDOWN_BOUND);
            let s = e.counters().stats();
            if report.unsent > 0 || !report.finished {
                log_warn!(
                    "{} profiles not delivered to {} within {:?} at exit",
                    report.unsent,
                    e.config().profiles_endpoint,
                    otlp_export::SHUTDOWN_BOUND
                );
            }
            export_summary = format!(
                " otlp_attempts={} otlp_sent={} otlp_bytes={} otlp_retried={} otlp_throttled={} \
                 otlp_rejected={} otlp_dropped_queue_full={} otlp_unsent={} otlp_queue_bound={} \
                 otlp_metrics_exports={}",
                s.attempts,
                s.sent,
                s.bytes_sent,
                s.retryable_failures,
                s.throttled,
                s.permanent_failures,
                s.dropped_queue_full,
                report.unsent,
                e.config().queue_bytes,
                s.metrics_exports,
            );
        }
        let (registered, _) = thread_registry::TABLE.occupancy();
        log_info!(
            "stopped; {}; {} threads_registered_at_exit={registered}{export_summary}",
            self.destinations(),
            stats::summary()
        );
    }

    /// Where profiles go, for the start and stop lines.
    fn destinations(&self) -> String {
        let files = self
            .out_dir
            .as_ref()
            .map(|d| format!("pprof files in {}", d.display()));
        let otlp = self
            .export_env
            .config
            .as_ref()
            .map(|c| format!("OTLP to {}", otelprof_exporter::otlp_exporter::describe(c)));
        match (files, otlp) {
            (Some(f), Some(o)) => format!("{o} and {f}"),
            (Some(f), None) => f,
            (None, Some(o)) => o,
            (None, None) => "profiles go nowhere".into(),
        }
    }
}

/// `512 KiB`, `1 MiB`, `100 bytes`.
fn human_bytes(n: u32) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
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
            unsafe { thread_registry::on_thread_start(&a.jvmti, jni, thread, registration(a)) };
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

/// Creates jmethodIDs for every class loaded before VMInit (later classes get theirs at
/// ClassPrepare). Returns the number of classes whose methods were preloaded.
fn preload_loaded_classes(jvmti: &Jvmti, jni: *mut JNIEnv) -> usize {
    let classes = match jvmti.loaded_classes() {
        Ok(c) => c,
        Err(e) => {
            log_warn!("cannot list loaded classes: {e}; their frames may be unnamed");
            return 0;
        }
    };
    let mut done = 0;
    for class in classes {
        // Classes not yet prepared fail here and get their ids at ClassPrepare.
        // SAFETY: `class` is a local reference from GetLoadedClasses on this thread, whose
        // JNIEnv is `jni`; it is deleted once, after its last use.
        unsafe {
            if jvmti.preload_method_ids(class).is_ok() {
                done += 1;
            }
            delete_local_ref(jni, class);
        }
    }
    done
}
