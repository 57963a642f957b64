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
//!
//! An OpAMP server (`opamp=`, [`crate::remote`]) changes a running session the same way, on
//! the client's thread attached to the JVM: continuous settings restart it with the user's
//! options overridden ([`Managed::settings`]); a capture restarts it with extra engines and
//! the capture's id on its profiles, and restarts it again as it was when the capture's
//! time is up ([`Managed::capture`]). A restart writes the session's last profile first, as
//! a stop does. A start by the user (attach, shim, `-agentpath`) keeps the server's
//! settings over its options.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use otelprof_opamp::capture::Capture;
use otelprof_opamp::client::{AgentStatus, Control as RemoteControl};
use otelprof_opamp::settings::{Change, Settings};

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
    /// The options of the last start by the user (before an OpAMP server's settings).
    local: Option<Options>,
    /// The continuous settings an OpAMP server gave, applied over `local`.
    remote: Settings,
    /// The capture running: its id and the number of the restart that began it (its end
    /// restarts the session only if no other restart came between).
    capture: Option<(String, u64)>,
    /// Restarts made for an OpAMP server so far.
    restarts: u64,
}

static CONTROL: Mutex<Control> = Mutex::new(Control {
    phase: Phase::Idle,
    awaiting_vm_init: false,
    local: None,
    remote: Settings {
        cpu: Change::Keep,
        wall: Change::Keep,
        alloc: Change::Keep,
        live: Change::Keep,
        lock: Change::Keep,
    },
    capture: None,
    restarts: 0,
});

fn lock() -> std::sync::MutexGuard<'static, Control> {
    CONTROL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Options as the user gave them, checked: `Err` says why profiling cannot start with them,
/// `Ok(None)` that there is nothing to profile.
fn checked_options(text: &str) -> Result<Option<Options>, String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let backend = lookup(otelprof_agent_options::backend::ENV);
    let options = Options::parse_with(text, backend.as_deref()).map_err(|e| e.to_string())?;
    crate::log::set_level(options.log);
    if crate::otlp_export::sdk_disabled(&lookup) {
        return Err("OTEL_SDK_DISABLED=true: profiling is off".to_owned());
    }
    if nothing_to_profile(&options) {
        return Ok(None);
    }
    Ok(Some(options))
}

/// The options of a start with the JVM (`-agentpath`, `-javaagent`): `None`, said in one
/// line, when there is nothing to profile or the SDK is disabled; `Err` when they are wrong.
fn options_at_start(text: &str) -> Result<Option<Options>, String> {
    match checked_options(text) {
        Ok(Some(o)) => Ok(Some(o)),
        Ok(None) => {
            log_info!("cpu=off and no wall, alloc, live or lock profiling: nothing to profile");
            Ok(None)
        }
        Err(e) if e.starts_with("OTEL_SDK_DISABLED") => {
            log_info!("{e}");
            Ok(None)
        }
        Err(e) => Err(format!("{e}; profiling is off")),
    }
}

/// Agent_OnLoad: parse options, set up JVMTI, register threads from now on; sampling starts
/// at VMInit.
///
/// # Safety
/// `vm` is the JavaVM* the JVM passed to Agent_OnLoad.
pub(crate) unsafe fn on_load(vm: *mut JavaVM, text: &str) -> Result<(), String> {
    let Some(options) = options_at_start(text)? else {
        return Ok(());
    };
    let wants = Wants {
        depth: options.max_depth,
        lock: options.lock_threshold.is_some(),
        vm_init: vm_init_event,
        vm_death: vm_death_event,
    };
    // SAFETY: per this function's contract.
    let loaded = unsafe { setup::load(vm, true, &wants) }?;
    crate::remote::set_control(Arc::new(Managed));
    let mut c = lock();
    c.local = Some(options.clone());
    let session =
        Session::prepare(loaded, options).map_err(|e| format!("{e}; profiling is off"))?;
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
    match unsafe { session.start(jni, thread, StartKind::VmInit) } {
        Ok(()) => crate::remote::update(Some(session.remote_view()), None),
        Err(e) => {
            log_error!("{e}; profiling is off");
            if let Phase::Running(s) = std::mem::replace(&mut c.phase, Phase::Idle) {
                // SAFETY: VMInit's JNIEnv.
                unsafe { s.stop(jni, false) };
                c.phase = Phase::Stopped(summary_of(None));
            }
        }
    }
}

/// VMDeath: the last profile is written or sent, and nothing starts again.
fn vm_death(jni: *mut JNIEnv) {
    // The OpAMP client first: its goodbye tells the server the agent is going (bounded).
    crate::remote::stop();
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
    let Some(options) = options_at_start(text)? else {
        return Ok(());
    };
    let mut c = lock();
    c.local = Some(options.clone());
    let options = with_settings(options, &c.remote);
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
    crate::remote::set_control(Arc::new(Managed));
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
            crate::remote::update(
                Some(session.remote_view()),
                session.options.capture_id.clone(),
            );
            c.phase = Phase::Running(Box::new(session));
            Ok(())
        }
        Err(e) => {
            // SAFETY: `env` is this thread's JNIEnv.
            unsafe { session.stop(env, false) };
            c.phase = Phase::Stopped(summary_of(None));
            crate::remote::update(None, None);
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
        // SAFETY: per this function's contract.
        Verb::Start { options } => unsafe { attach_start(&mut c, vm, &options) },
        // SAFETY: per this function's contract.
        Verb::Stop => unsafe { attach_stop(&mut c, vm) },
        Verb::Dump { file } => attach_dump(&c, file),
    }
}

/// The attach verb `start`: a session with `options`, unless one runs already.
///
/// # Safety
/// As for [`on_attach`].
unsafe fn attach_start(c: &mut Control, vm: *mut JavaVM, options: &str) -> Reply {
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
    let options = match checked_options(options) {
        Ok(Some(o)) => o,
        Ok(None) => {
            return Reply::error(
                "nothing to profile: cpu=off and no wall, alloc, live or lock profiling",
            )
        }
        Err(e) => return Reply::error(e),
    };
    let Some(env) = jni_env(vm) else {
        return Reply::error("cannot get this thread's JNIEnv");
    };
    c.local = Some(options.clone());
    c.capture = None;
    let options = with_settings(options, &c.remote);
    // SAFETY: per this function's contract; `env` is this thread's.
    match unsafe { start_locked(c, vm, env, options, StartKind::Late) } {
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

/// The attach verb `stop`: stops the running session; the reply says what it wrote.
///
/// # Safety
/// As for [`on_attach`].
unsafe fn attach_stop(c: &mut Control, vm: *mut JavaVM) -> Reply {
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
    c.capture = None;
    crate::remote::update(None, None);
    r
}

/// The attach verb `dump`: ends the running session's period now (and writes it to `file`).
fn attach_dump(c: &Control, file: Option<PathBuf>) -> Reply {
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
            if let Some(engine) = s.cpu_engine() {
                r.push("cpu", engine);
            }
            r.push(
                "cpu_walks",
                stats::get(&stats::COUNTERS.cpu_walks).to_string(),
            );
            r.push(
                "cpu_intervals",
                stats::get(&stats::COUNTERS.weight).to_string(),
            );
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

/// The user's options with an OpAMP server's continuous settings over them.
fn with_settings(mut o: Options, s: &Settings) -> Options {
    fn apply<T, U>(to: &mut Option<T>, change: &Change<U>, map: impl Fn(&U) -> T) {
        match change {
            Change::Keep => {}
            Change::Off => *to = None,
            Change::To(v) => *to = Some(map(v)),
        }
    }
    apply(&mut o.cpu_interval, &s.cpu, |d| *d);
    apply(&mut o.wall_interval, &s.wall, |d| *d);
    apply(&mut o.alloc_interval, &s.alloc, |b| {
        u32::try_from(*b).unwrap_or(u32::MAX)
    });
    apply(&mut o.live_interval, &s.live, |b| {
        u32::try_from(*b).unwrap_or(u32::MAX)
    });
    apply(&mut o.lock_threshold, &s.lock, |d| *d);
    o
}

/// `o` with a capture's engines added (an interval it names replaces the session's) and its
/// id on the profiles.
fn with_capture(mut o: Options, capture: &Capture) -> Options {
    let e = &capture.engines;
    o.cpu_interval = e.cpu.or(o.cpu_interval);
    o.wall_interval = e.wall.or(o.wall_interval);
    o.alloc_interval = e
        .alloc
        .map(|b| u32::try_from(b).unwrap_or(u32::MAX))
        .or(o.alloc_interval);
    o.live_interval = e
        .live
        .map(|b| u32::try_from(b).unwrap_or(u32::MAX))
        .or(o.live_interval);
    o.lock_threshold = e.lock.or(o.lock_threshold);
    o.capture_id = Some(capture.id.clone());
    o
}

/// The lifecycle as an OpAMP server's requests reach it, on the client's thread.
struct Managed;

impl RemoteControl for Managed {
    fn capture(&self, capture: &Capture) -> Result<(), String> {
        on_jvm_thread(|vm, env| {
            // SAFETY: `env` is this (attached) thread's JNIEnv.
            unsafe { start_capture(vm, env, capture) }
        })
    }

    fn settings(&self, settings: &Settings) -> Result<(), String> {
        on_jvm_thread(|vm, env| {
            // SAFETY: `env` is this (attached) thread's JNIEnv.
            unsafe { apply_settings(vm, env, settings) }
        })
    }

    fn status(&self) -> AgentStatus {
        crate::remote::status()
    }
}

/// Runs `f` with the calling thread (the OpAMP client's, or a capture's end) attached to the
/// JVM as a daemon, marked as one of the agent's own threads (never profiled), and detached
/// again.
fn on_jvm_thread(
    f: impl FnOnce(*mut JavaVM, *mut JNIEnv) -> Result<(), String>,
) -> Result<(), String> {
    let Some(loaded) = setup::loaded() else {
        return Err("the agent is not set up in this JVM".to_owned());
    };
    let vm = loaded.vm;
    let tid = crate::sampling::os::gettid();
    crate::sampling::own_threads::add_own_tid(tid);
    // SAFETY: `vm` is the live JavaVM*; a JVM that is exiting refuses the attach.
    let env = unsafe { crate::jvm::jvmti::attach_current_thread_as_daemon(vm, c"otelprof-opamp") };
    let result = match env {
        Some(env) => {
            let r = f(vm, env);
            // SAFETY: attached just above, on this thread.
            unsafe { crate::jvm::jvmti::detach_current_thread(vm) };
            r
        }
        None => Err("cannot attach to the JVM (is it exiting?)".to_owned()),
    };
    crate::sampling::own_threads::remove_own_tid(tid);
    result
}

/// Why a server's request cannot change the session now, if it cannot.
fn not_running(c: &Control) -> Option<String> {
    match &c.phase {
        Phase::Running(_) => None,
        Phase::Dead => Some("the JVM is shutting down".to_owned()),
        Phase::Idle | Phase::Stopped(_) => Some(
            "profiling is stopped in this JVM (`otelprof attach PID start` starts it again)"
                .to_owned(),
        ),
    }
}

/// Starts a session with `options` in place of the running one (the lock held): the
/// running session's last profile is written, as at a stop; if the new one cannot start,
/// the previous options run again.
///
/// # Safety
/// `env` is the calling (attached) thread's JNIEnv.
unsafe fn restart_locked(
    c: &mut Control,
    vm: *mut JavaVM,
    env: *mut JNIEnv,
    options: Options,
) -> Result<(), String> {
    let Phase::Running(session) = std::mem::replace(&mut c.phase, Phase::Idle) else {
        return Err("profiling is stopped in this JVM".to_owned());
    };
    let previous = session.options.clone();
    // SAFETY: per this function's contract.
    unsafe { session.stop(env, false) };
    c.restarts += 1;
    // SAFETY: per this function's contract.
    match unsafe { start_locked(c, vm, env, options, StartKind::Late) } {
        Ok(()) => Ok(()),
        Err(e) => {
            // SAFETY: as above.
            let back = unsafe { start_locked(c, vm, env, previous, StartKind::Late) };
            Err(match back {
                Ok(()) => format!("{e}; the previous settings run again"),
                Err(again) => format!("{e}; the previous settings did not start again: {again}"),
            })
        }
    }
}

fn nothing_to_profile(o: &Options) -> bool {
    o.cpu_interval.is_none()
        && o.wall_interval.is_none()
        && o.alloc_interval.is_none()
        && o.live_interval.is_none()
        && o.lock_threshold.is_none()
}

/// Continuous settings from an OpAMP server: the session restarts with the user's options
/// overridden (during a capture, when it ends).
///
/// # Safety
/// `env` is the calling (attached) thread's JNIEnv.
unsafe fn apply_settings(
    vm: *mut JavaVM,
    env: *mut JNIEnv,
    settings: &Settings,
) -> Result<(), String> {
    let mut c = lock();
    if let Some(why) = not_running(&c) {
        return Err(why);
    }
    let local = c.local.clone().unwrap_or_default();
    let options = with_settings(local, settings);
    if nothing_to_profile(&options) {
        return Err("these settings turn every profile type off; at least one must run".into());
    }
    let before = std::mem::replace(&mut c.remote, *settings);
    if c.capture.is_some() {
        return Ok(());
    }
    // SAFETY: per this function's contract.
    let restarted = unsafe { restart_locked(&mut c, vm, env, options) };
    if restarted.is_err() {
        c.remote = before;
    }
    restarted
}

/// A capture from an OpAMP server: the session restarts with the capture's engines and id,
/// and restarts as it was when the capture's time is up.
///
/// # Safety
/// `env` is the calling (attached) thread's JNIEnv.
unsafe fn start_capture(
    vm: *mut JavaVM,
    env: *mut JNIEnv,
    capture: &Capture,
) -> Result<(), String> {
    let mut c = lock();
    if let Some(why) = not_running(&c) {
        return Err(why);
    }
    if let Some((id, _)) = &c.capture {
        return Err(format!("capture {id} is running; one capture at a time"));
    }
    let local = c.local.clone().unwrap_or_default();
    let options = with_capture(with_settings(local, &c.remote), capture);
    // SAFETY: per this function's contract.
    unsafe { restart_locked(&mut c, vm, env, options) }?;
    let generation = c.restarts;
    c.capture = Some((capture.id.clone(), generation));
    let duration = capture.duration;
    let ender = std::thread::Builder::new()
        .name("otelprof-capture".to_owned())
        .spawn(move || {
            std::thread::sleep(duration);
            if let Err(e) = on_jvm_thread(|vm, env| {
                // SAFETY: `env` is this (attached) thread's JNIEnv.
                unsafe { end_capture(vm, env, generation) }
            }) {
                log_warn!("the end of a capture: {e}");
            }
        });
    if let Err(e) = ender {
        // Nothing would end it: back to the settings before it, now.
        // SAFETY: per this function's contract.
        unsafe { end_capture_locked(&mut c, vm, env, generation) }?;
        return Err(format!("cannot time the capture: {e}"));
    }
    log_info!(
        "capture {} started: {} for {}s",
        capture.id,
        capture.engines.text(),
        duration.as_secs()
    );
    Ok(())
}

/// The end of the capture begun by restart `generation`: the session restarts with the
/// user's options and the server's settings, unless it was stopped or restarted since.
///
/// # Safety
/// `env` is the calling (attached) thread's JNIEnv.
unsafe fn end_capture(vm: *mut JavaVM, env: *mut JNIEnv, generation: u64) -> Result<(), String> {
    let mut c = lock();
    // SAFETY: per this function's contract.
    unsafe { end_capture_locked(&mut c, vm, env, generation) }
}

/// # Safety
/// As for [`end_capture`], the lock held.
unsafe fn end_capture_locked(
    c: &mut Control,
    vm: *mut JavaVM,
    env: *mut JNIEnv,
    generation: u64,
) -> Result<(), String> {
    let Some((id, g)) = c.capture.clone() else {
        return Ok(());
    };
    if g != generation {
        return Ok(());
    }
    c.capture = None;
    if not_running(c).is_some() {
        return Ok(());
    }
    let local = c.local.clone().unwrap_or_default();
    let options = with_settings(local, &c.remote);
    log_info!("capture {id} is over; profiling as before it");
    // SAFETY: per this function's contract.
    unsafe { restart_locked(c, vm, env, options) }
}
