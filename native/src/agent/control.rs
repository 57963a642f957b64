//! The agent's lifecycle: one session at a time, started and stopped as often as asked.
//!
//! ```text
//!   idle ──start──► running ──stop──► stopped ──start──► running …
//!                      │                                    │
//!                      └──── VMDeath (last profile) ────────┴──► dead
//! ```
//!
//! A start comes from Agent_OnLoad + VMInit (`-agentpath`), from the Java shim (`-javaagent`)
//! or from an attach `start`; a stop from an attach `stop` or VMDeath. Every transition holds
//! one lock, so two attaches, or an attach and VMDeath, never interleave; JVMTI callbacks never
//! take it. VMDeath waits for it a bounded time: a JVM's exit never hangs on the agent.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use jni::sys::{jobject, JNIEnv, JavaVM};

use crate::agent::attach::{self, Reply, Verb};
use crate::agent::session::{Session, StartKind};
use crate::agent::setup::{self, Wants};
use crate::jvm::jvmti::delete_local_ref;
use crate::options::Options;
use crate::stats;

enum Phase {
    /// Nothing started yet (loaded by an attach, or at OnLoad with profiling off).
    Idle,
    Running(Box<Session>),
    Stopped(Summary),
    /// VMDeath happened: nothing starts again.
    Dead,
}

/// What a status reply says of a session that ended.
struct Summary {
    types: String,
    options: String,
    destinations: String,
    started: SystemTime,
    stopped: SystemTime,
    counters: String,
    samples: u64,
}

struct Control {
    phase: Phase,
    /// Set at Agent_OnLoad when the session waits for VMInit.
    awaiting_vm_init: bool,
}

static CONTROL: Mutex<Control> = Mutex::new(Control {
    phase: Phase::Idle,
    awaiting_vm_init: false,
});

fn lock() -> std::sync::MutexGuard<'static, Control> {
    CONTROL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Options as the user gave them, checked: `Err` says why profiling cannot start with them,
/// `Ok(None)` that there is nothing to profile.
fn checked_options(text: &str) -> Result<Option<Options>, String> {
    let options = Options::parse(text).map_err(|e| e.to_string())?;
    crate::log::set_level(options.log);
    let lookup = |name: &str| std::env::var(name).ok();
    if crate::otlp_export::sdk_disabled(&lookup) {
        return Err("OTEL_SDK_DISABLED=true: profiling is off".to_owned());
    }
    if options.cpu_interval.is_none()
        && options.wall_interval.is_none()
        && options.alloc_interval.is_none()
        && options.lock_threshold.is_none()
    {
        return Ok(None);
    }
    Ok(Some(options))
}

/// Agent_OnLoad: parse options, set up JVMTI, register threads from now on; sampling starts
/// at VMInit.
///
/// # Safety
/// `vm` is the JavaVM* the JVM passed to Agent_OnLoad.
pub(crate) unsafe fn on_load(vm: *mut JavaVM, text: &str) -> Result<(), String> {
    let options = match checked_options(text) {
        Ok(Some(o)) => o,
        Ok(None) => {
            log_info!("cpu=off and no wall, alloc or lock profiling: nothing to profile");
            return Ok(());
        }
        Err(e) if e.starts_with("OTEL_SDK_DISABLED") => {
            log_info!("{e}");
            return Ok(());
        }
        Err(e) => return Err(format!("{e}; profiling is off")),
    };
    let wants = Wants {
        depth: options.max_depth,
        lock: options.lock_threshold.is_some(),
        vm_init: vm_init_event,
        vm_death: vm_death_event,
    };
    // SAFETY: per this function's contract.
    let loaded = unsafe { setup::load(vm, true, &wants) }?;
    let session =
        Session::prepare(loaded, options).map_err(|e| format!("{e}; profiling is off"))?;
    let mut c = lock();
    c.phase = Phase::Running(Box::new(session));
    c.awaiting_vm_init = true;
    Ok(())
}

unsafe extern "C" fn vm_init_event(
    _jvmti: *mut crate::sys::JvmtiEnv,
    jni: *mut JNIEnv,
    thread: jobject,
) {
    crate::ffi::guard("VMInit", (), || {
        // SAFETY: these are VMInit's own arguments.
        unsafe { vm_init(jni, thread) };
    })
}

unsafe extern "C" fn vm_death_event(_jvmti: *mut crate::sys::JvmtiEnv, jni: *mut JNIEnv) {
    crate::ffi::guard("VMDeath", (), || vm_death(jni))
}

/// VMInit: the session prepared at OnLoad starts sampling.
///
/// # Safety
/// VMInit's own arguments.
unsafe fn vm_init(jni: *mut JNIEnv, thread: jobject) {
    let mut c = lock();
    if !std::mem::take(&mut c.awaiting_vm_init) {
        return;
    }
    let Phase::Running(session) = &mut c.phase else {
        return;
    };
    // SAFETY: per this function's contract.
    if let Err(e) = unsafe { session.start(jni, thread, StartKind::VmInit) } {
        log_error!("{e}; profiling is off");
        if let Phase::Running(s) = std::mem::replace(&mut c.phase, Phase::Idle) {
            // SAFETY: VMInit's JNIEnv.
            unsafe { s.stop(jni, false) };
            c.phase = Phase::Stopped(summary_of(None));
        }
    }
}

/// VMDeath: the last profile is written or sent, and nothing starts again.
fn vm_death(jni: *mut JNIEnv) {
    // Bounded: an attach holding the lock (a start or a stop, seconds at most) is waited for,
    // but a JVM's exit never hangs on the agent.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut c = loop {
        match CONTROL.try_lock() {
            Ok(c) => break c,
            Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                crate::sampling::signal_handler::set_active(false);
                log_warn!("an attach request was still running at JVM exit; sampling stopped");
                return;
            }
        }
    };
    if let Phase::Running(session) = std::mem::replace(&mut c.phase, Phase::Dead) {
        // SAFETY: VMDeath's JNIEnv; at exit.
        unsafe { session.stop(jni, true) };
    }
}

/// Starts from the Java shim (`-javaagent`, or the shim found as a library): the VM is in
/// its live phase, so sampling starts now, on the calling thread. With the agent already
/// loaded by `-agentpath`, the shim just uses it.
///
/// # Safety
/// `vm` is the process's JavaVM*, `env` the calling thread's JNIEnv.
pub(crate) unsafe fn shim_start(
    vm: *mut JavaVM,
    env: *mut JNIEnv,
    text: &str,
) -> Result<(), String> {
    if setup::loaded().is_some() {
        return Ok(());
    }
    let options = match checked_options(text) {
        Ok(Some(o)) => o,
        Ok(None) => {
            log_info!("cpu=off and no wall, alloc or lock profiling: nothing to profile");
            return Ok(());
        }
        Err(e) if e.starts_with("OTEL_SDK_DISABLED") => {
            log_info!("{e}");
            return Ok(());
        }
        Err(e) => return Err(format!("{e}; profiling is off")),
    };
    let mut c = lock();
    // SAFETY: per this function's contract.
    unsafe { start_locked(&mut c, vm, env, options, StartKind::Shim) }
}

/// Starts a session with `options` (the lock held). On failure everything started is
/// stopped again and the reason returned.
///
/// # Safety
/// `vm` is the process's JavaVM*, `env` the calling (Java) thread's JNIEnv, live phase.
unsafe fn start_locked(
    c: &mut Control,
    vm: *mut JavaVM,
    env: *mut JNIEnv,
    options: Options,
    kind: StartKind,
) -> Result<(), String> {
    let wants = Wants {
        depth: options.max_depth,
        lock: options.lock_threshold.is_some(),
        vm_init: vm_init_event,
        vm_death: vm_death_event,
    };
    // SAFETY: per this function's contract.
    let loaded = unsafe { setup::load(vm, false, &wants) }?;
    let mut thread: jobject = std::ptr::null_mut();
    if let Err(e) = loaded.jvmti.current_thread(&mut thread) {
        return Err(format!("cannot identify the starting thread: {e}"));
    }
    let mut session = Session::prepare(loaded, options)?;
    // SAFETY: `env` is this thread's JNIEnv and `thread` its Thread (a local reference).
    let started = unsafe { session.start(env, thread, kind) };
    // SAFETY: as above; deleted once, after its last use.
    unsafe { delete_local_ref(env, thread) };
    match started {
        Ok(()) => {
            c.phase = Phase::Running(Box::new(session));
            Ok(())
        }
        Err(e) => {
            // SAFETY: `env` is this thread's JNIEnv.
            unsafe { session.stop(env, false) };
            c.phase = Phase::Stopped(summary_of(None));
            Err(e)
        }
    }
}

/// Agent_OnAttach: carries out `args` (see [`crate::agent::attach`]) and writes the reply.
///
/// # Safety
/// `vm` is the JavaVM* the JVM passed to Agent_OnAttach, called on the attaching thread.
pub(crate) unsafe fn on_attach(vm: *mut JavaVM, args: &str) {
    let request = match attach::parse(args) {
        Ok(r) => r,
        Err(bad) => {
            log_error!("attach: {}", bad.reason);
            attach::deliver(&Reply::error(bad.reason), bad.reply.as_deref());
            return;
        }
    };
    // SAFETY: per this function's contract.
    let reply = unsafe { carry_out(vm, request.verb) };
    if let Some(e) = &reply.error {
        log_warn!("attach: {e}");
    }
    attach::deliver(&reply, request.reply.as_deref());
}

/// # Safety
/// As for [`on_attach`].
unsafe fn carry_out(vm: *mut JavaVM, verb: Verb) -> Reply {
    if setup::loaded().is_none() {
        if let Some(other) = crate::sampling::signal_handler::other_copy() {
            return Reply::error(format!(
                "another copy of libotelprof.so is active in this JVM ({other}); use that path"
            ));
        }
    }
    let mut c = lock();
    match verb {
        Verb::Status => status(&c),
        Verb::Start { options } => {
            match &c.phase {
                Phase::Running(s) => {
                    return Reply::error(format!(
                        "already running ({}; {})",
                        s.types(),
                        s.options.in_force()
                    ))
                }
                Phase::Dead => return Reply::error("the JVM is shutting down"),
                Phase::Idle | Phase::Stopped(_) => {}
            }
            let options = match checked_options(&options) {
                Ok(Some(o)) => o,
                Ok(None) => {
                    return Reply::error(
                        "nothing to profile: cpu=off and no wall, alloc or lock profiling",
                    )
                }
                Err(e) => return Reply::error(e),
            };
            let Some(env) = jni_env(vm) else {
                return Reply::error("cannot get this thread's JNIEnv");
            };
            // SAFETY: per this function's contract; `env` is this thread's.
            match unsafe { start_locked(&mut c, vm, env, options, StartKind::Late) } {
                Ok(()) => {
                    let mut r = Reply::ok();
                    if let Phase::Running(s) = &c.phase {
                        running_lines(&mut r, s);
                    }
                    r
                }
                Err(e) => Reply::error(e),
            }
        }
        Verb::Stop => {
            let Phase::Running(_) = &c.phase else {
                return Reply::error("not running");
            };
            let Some(env) = jni_env(vm) else {
                return Reply::error("cannot get this thread's JNIEnv");
            };
            let Phase::Running(session) = std::mem::replace(&mut c.phase, Phase::Idle) else {
                return Reply::error("not running");
            };
            let (types, options) = (session.types(), session.options.in_force());
            let destinations = session.destinations();
            let started = session.started_at;
            // SAFETY: `env` is this thread's JNIEnv.
            let stopped = unsafe { session.stop(env, false) };
            let summary = summary_of(Some((types, options, destinations, started)));
            let mut r = Reply::ok().with("state", "stopped");
            r.push("samples", summary.samples.to_string());
            for f in &stopped.flushed.files {
                r.push("file", f.display().to_string());
            }
            if stopped.flushed.exported > 0 {
                r.push("exported", format!("{} profiles", stopped.flushed.exported));
            }
            for p in stopped.flushed.errors.iter().chain(&stopped.problems) {
                r.push("note", p.clone());
            }
            c.phase = Phase::Stopped(summary);
            r
        }
        Verb::Dump { file } => {
            let Phase::Running(session) = &c.phase else {
                return Reply::error("not running");
            };
            match session.dump(file) {
                Ok(flushed) => {
                    let mut r = Reply::ok();
                    if flushed.files.is_empty() && flushed.exported == 0 {
                        r.push("note", "nothing was written (no out= and no endpoint)");
                    }
                    for f in &flushed.files {
                        r.push("file", f.display().to_string());
                    }
                    if flushed.exported > 0 {
                        r.push("exported", format!("{} profiles", flushed.exported));
                    }
                    for e in &flushed.errors {
                        r.push("note", e.clone());
                    }
                    if !flushed.errors.is_empty() && flushed.files.is_empty() {
                        r.error = flushed.errors.first().cloned();
                    }
                    r
                }
                Err(e) => Reply::error(e),
            }
        }
    }
}

/// What a status reply will say of the session just stopped (`what`: its types, options,
/// destinations and start; none for a start that failed). The counters are read now, before
/// a next session resets them.
fn summary_of(what: Option<(String, String, String, SystemTime)>) -> Summary {
    let (types, options, destinations, started) = what.unwrap_or_else(|| {
        (
            String::new(),
            String::new(),
            String::new(),
            SystemTime::now(),
        )
    });
    Summary {
        types,
        options,
        destinations,
        started,
        stopped: SystemTime::now(),
        counters: stats::summary(),
        samples: stats::get(&stats::COUNTERS.samples),
    }
}

fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(0))
        .map_or_else(|_| secs.to_string(), |t| t.to_string())
}

fn running_lines(r: &mut Reply, s: &Session) {
    r.push("state", "running");
    r.push("types", s.types());
    r.push("options", s.options.in_force());
    r.push("destination", s.destinations());
    r.push("started", rfc3339(s.started_at));
    for n in &s.notes {
        r.push("note", n.clone());
    }
}

fn status(c: &Control) -> Reply {
    let mut r = Reply::ok();
    match &c.phase {
        Phase::Idle => r.push("state", "not started"),
        Phase::Dead => r.push("state", "stopped (the JVM is shutting down)"),
        Phase::Running(s) => {
            running_lines(&mut r, s);
            r.push("samples", stats::get(&stats::COUNTERS.samples).to_string());
            r.push("counters", stats::summary());
        }
        Phase::Stopped(sum) => {
            r.push("state", "stopped");
            if !sum.types.is_empty() {
                r.push("types", sum.types.clone());
                r.push("options", sum.options.clone());
                r.push("destination", sum.destinations.clone());
                r.push("started", rfc3339(sum.started));
            }
            r.push("stopped", rfc3339(sum.stopped));
            r.push("samples", sum.samples.to_string());
            r.push("counters", sum.counters.clone());
        }
    }
    r.push("pid", std::process::id().to_string());
    r.push("library", own_path());
    r
}

/// The path this library was loaded from (what every attach must name).
fn own_path() -> String {
    // SAFETY: all-zero Dl_info is valid; dladdr only reads the address of our own function.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(own_path as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null()
        {
            return String::new();
        }
        std::ffi::CStr::from_ptr(info.dli_fname)
            .to_string_lossy()
            .into_owned()
    }
}

/// The calling thread's JNIEnv.
fn jni_env(vm: *mut JavaVM) -> Option<*mut JNIEnv> {
    let mut env: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: `vm` is the live JavaVM*; GetEnv is always in the invoke table and only fills
    // `env` for an attached thread.
    let rc = unsafe {
        (**vm)
            .GetEnv
            .map_or(-1, |f| f(vm, &mut env, jni::sys::JNI_VERSION_1_8))
    };
    (rc == jni::sys::JNI_OK && !env.is_null()).then_some(env as *mut JNIEnv)
}
