//! One profiling session, from a start to its stop: the exporter, the aggregator thread, the
//! CPU engine (perf events or timers) and the other engines, the watch over native code, and
//! the JVMTI events they need. A session starts at
//! VMInit (`-agentpath`), from the Java shim's premain (`-javaagent`), or from an attach
//! (`start`); it stops at an attach `stop` or at VMDeath, in an order that leaves no thread,
//! timer or event behind, and writes or sends the last profile.
//!
//! What a stop leaves: the SIGPROF handler installed but inert (a signal still queued finds
//! sampling off; a default disposition would kill the JVM), the park hook bound but passing
//! straight through, the context records with their threads (they write them without asking
//! the agent; a later session finds them again), and the JVMTI events VMDeath (a no-op when
//! stopped). Nothing runs and no other event is delivered.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use jni::sys::{jobject, JNIEnv};
use otelprof_exporter::OtlpExporter;

use crate::agent::setup::{self, Loaded};
use crate::aggregator::{self, Aggregator, Flushed};
use crate::code_map::module_scan::ModuleWatch;
use crate::engines::cpu_engine::{self, Chosen, Engine};
use crate::engines::wall::{self, WallClock};
use crate::jvm::jvmti::{delete_local_ref, Jvmti};
use crate::kinds::SampleKind;
use crate::options::Options;
use crate::otlp_export::{self, ExportEnv};
use crate::sampling::timers::ProcessItimer;
use crate::sampling::{cpu_clock, signal_handler};
use crate::stats;
use crate::sys::{capability, event};
use crate::threads::thread_registry::{self, Registration};
use crate::threads::thread_scan::{self, ThreadScan};

/// Where a session starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartKind {
    /// VMInit after Agent_OnLoad: every thread so far registered itself at ThreadStart.
    VmInit,
    /// The Java shim's premain: the JVM is starting; the calling thread is registered, the
    /// JVM's own early threads are left to the thread scan, as before the shim existed.
    Shim,
    /// An attach `start` (or a start after a stop): the JVM has been running; its threads are
    /// registered from JVMTI's list and HotSpot's structures, and the CPU they used before is
    /// not counted.
    Late,
}

/// A session: what it was started with and what it runs.
pub(crate) struct Session {
    loaded: &'static Loaded,
    pub(crate) options: Options,
    cpu_interval: Option<Duration>,
    /// The CPU engine, when CPU is profiled.
    cpu_engine: Option<Chosen>,
    /// Allocation profiling, the live heap and lock profiling, when asked for and this JVM
    /// can do them.
    alloc: bool,
    live: bool,
    lock: bool,
    /// Where pprof files go: `out=`, else the working directory unless OTLP is configured.
    out_dir: Option<PathBuf>,
    export_env: ExportEnv,
    exporter: Option<Arc<OtlpExporter>>,
    aggregator: Option<Aggregator>,
    wall: Option<WallClock>,
    scan: Option<ThreadScan>,
    modules: Option<ModuleWatch>,
    itimer: bool,
    pub(crate) started_at: SystemTime,
    /// What the caller should know about this session (depth capped, threads not mapped…).
    pub(crate) notes: Vec<String>,
}

// SAFETY: the fields are Send, but for the exporter's and loaded's pointers, which are
// process-wide and usable from any thread.
unsafe impl Send for Session {}

/// What a stop did.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stopped {
    pub(crate) flushed: Flushed,
    pub(crate) problems: Vec<String>,
}

impl Session {
    /// Prepares a session with `options`: capabilities, counters, thread registration and the
    /// JVMTI events it needs. From Agent_OnLoad this runs before VMInit (threads that start
    /// meanwhile are registered); otherwise [`Session::start`] follows at once.
    pub(crate) fn prepare(loaded: &'static Loaded, options: Options) -> Result<Session, String> {
        let lookup = |name: &str| std::env::var(name).ok();
        let export_env = otlp_export::read_env(&options, &lookup)?;
        // Files: where out= says; with OTLP and no out=, none (the working directory is the
        // application's, not ours); with neither, the working directory as before, unless
        // out=none.
        let out_dir = match (&options.out_dir, &export_env.config) {
            (Some(d), _) => Some(d.clone()),
            (None, Some(_)) => None,
            (None, None) if options.files_off => None,
            (None, None) => Some(
                std::env::current_dir()
                    .map_err(|e| format!("no out= given and no current directory: {e}"))?,
            ),
        };
        let out_dir = out_dir.map(|d| std::fs::canonicalize(&d).unwrap_or(d));
        let (sampled, lock) = loaded.ensure_capabilities(
            options.alloc_interval.is_some() || options.live_interval.is_some(),
            options.lock_threshold.is_some(),
        );
        let alloc = sampled && options.alloc_interval.is_some();
        let live = sampled && options.live_interval.is_some();
        let mut notes = Vec::new();
        let depth = loaded.sampler.set_max_depth(options.max_depth);
        if depth != options.max_depth {
            notes.push(format!(
                "depth={} is more than this JVM's agent was set up for; stacks are cut at {depth}",
                options.max_depth
            ));
        }
        stats::reset();
        stats::SESSIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let cpu_engine = options
            .cpu_interval
            .map(|interval| cpu_engine::choose(options.clock, interval));
        if let Some(chosen) = &cpu_engine {
            log_info!("{}", chosen.log_line());
        }
        let session = Session {
            loaded,
            cpu_interval: options.cpu_interval,
            cpu_engine,
            alloc,
            live,
            lock,
            out_dir,
            export_env,
            options,
            exporter: None,
            aggregator: None,
            wall: None,
            scan: None,
            modules: None,
            itimer: false,
            started_at: SystemTime::now(),
            notes,
        };
        thread_registry::start_registering(session.registration());
        if let Err(e) = setup::session_events(loaded, true) {
            thread_registry::stop_registering();
            let _ = setup::session_events(loaded, false);
            return Err(e);
        }
        Ok(session)
    }

    /// How threads are registered: with a perf event or a CPU timer each, unless
    /// `clock=itimer` or `cpu=off`.
    fn registration(&self) -> Registration {
        Registration {
            cpu: match self.cpu_engine.as_ref().map(|c| c.engine) {
                Some(Engine::PerThread(clock)) => Some(clock),
                _ => None,
            },
        }
    }

    /// Starts sampling. On error the caller stops the session, which undoes what was done.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv and `thread` its Thread, in the live phase (VMInit
    /// passes both; an attach or the shim runs on a Java thread).
    pub(crate) unsafe fn start(
        &mut self,
        jni: *mut JNIEnv,
        thread: jobject,
        kind: StartKind,
    ) -> Result<(), String> {
        let jvmti = self.loaded.jvmti;
        self.started_at = SystemTime::now();
        let preloaded = preload_loaded_classes(&jvmti, jni);
        // SAFETY: per this function's contract.
        let threads_note = unsafe { self.register_threads(jni, thread, kind) };
        // SAFETY: per this function's contract.
        unsafe { self.start_export(jni)? };
        self.start_native_code();
        signal_handler::set_active(true);
        let mut what = Vec::new();
        what.extend(self.start_cpu(kind)?);
        what.extend(self.start_wall());
        what.extend(self.start_alloc());
        // SAFETY: per this function's contract.
        unsafe { self.start_locks(jni, &mut what) };
        log_info!(
            "profiling {} (depth {}); {} every {:?} ({preloaded} classes preloaded{threads_note})",
            what.join(", "),
            self.loaded.sampler.max_depth(),
            self.destinations(),
            self.options.period,
        );
        Ok(())
    }

    /// Registers the threads to sample as `kind` requires: the calling thread (the others
    /// registered themselves at ThreadStart, or are left to the thread scan), or every thread
    /// already running. Returns what the start line says about them.
    ///
    /// # Safety
    /// As [`Session::start`].
    unsafe fn register_threads(
        &mut self,
        jni: *mut JNIEnv,
        thread: jobject,
        kind: StartKind,
    ) -> String {
        let jvmti = self.loaded.jvmti;
        match kind {
            StartKind::VmInit | StartKind::Shim => {
                // SAFETY: per this function's contract.
                unsafe { thread_registry::on_thread_start(&jvmti, jni, thread) };
                thread_registry::credit_cpu_before_start(self.registration());
                String::new()
            }
            StartKind::Late => {
                // SAFETY: per this function's contract; ThreadStart/End are on.
                let added = unsafe {
                    crate::threads::running_threads::register(&jvmti, jni, self.registration())
                };
                if let Some(problem) = &added.problem {
                    let note = format!(
                        "{} threads already running are profiled without Java stacks: {problem}",
                        added.unmapped
                    );
                    log_warn!("{note}");
                    self.notes.push(note);
                } else if added.unmapped > 0 {
                    log_debug!("{} running threads could not be mapped", added.unmapped);
                }
                self.announce_compiled_methods();
                format!(
                    "; {} running threads registered of {} listed",
                    added.registered, added.listed
                )
            }
        }
    }

    /// At a late start: notes that methods compiled before now keep safepoint-only debug
    /// information, and where CompiledMethodLoad is what keeps it at every pc, has them
    /// announced too (JVMTI GenerateEvents).
    fn announce_compiled_methods(&mut self) {
        if self
            .loaded
            .has(capability::CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS)
        {
            let jvmti = self.loaded.jvmti;
            if let Err(e) = jvmti.generate_events(event::EVENT_COMPILED_METHOD_LOAD) {
                log_debug!("cannot announce the methods compiled so far: {e}");
            }
        }
        self.notes.push(
            "methods compiled before the start keep HotSpot's safepoint-only debug \
             information until recompiled: their inlined frames are less exact"
                .to_owned(),
        );
    }

    /// Where profiles go: the resource, published as the process context too; the OpAMP
    /// client; the OTLP exporter; the aggregator thread.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv, in the live phase.
    unsafe fn start_export(&mut self, jni: *mut JNIEnv) -> Result<(), String> {
        // SAFETY: `jni` is this thread's JNIEnv, in the live phase.
        let resource = unsafe { otlp_export::build_resource(jni, &self.export_env, &self.options) };
        // Out-of-process readers (the OpenTelemetry eBPF profiler) learn who we are and how to
        // read our thread-context records from the process context (OTEP 4719).
        let payload = otel_bridge::process_context::payload(
            &resource,
            crate::context::record::ATTRIBUTE_KEYS,
        );
        if let Err(e) = crate::context::process_context::publish(&payload) {
            log_debug!("cannot publish the OpenTelemetry process context: {e}");
        }
        // The OpAMP client, started with the first session that names a server, describes the
        // agent with the same resource.
        if let Some(config) = &self.export_env.opamp {
            crate::remote::ensure_started(config, &resource, &self.options);
        }
        // The exporter's CPU-utilisation metric converts CPU intervals to time.
        let cpu_interval = self.cpu_interval.unwrap_or(Duration::from_millis(10));
        self.exporter =
            otlp_export::start(resource, &self.export_env, &self.options, cpu_interval)?;
        let aggregator = Aggregator::start(aggregator::Config {
            vm: self.loaded.vm,
            jvmti: self.loaded.jvmti,
            sampler: self.loaded.sampler,
            kinds: self.kinds(),
            period: self.options.period,
            out_dir: self.out_dir.clone(),
            exporter: self.exporter.clone(),
            capture: self.options.capture_id.clone(),
            live: self.options.live_interval.filter(|_| self.live),
        })
        .map_err(|e| format!("cannot start the aggregator thread: {e}"))?;
        self.aggregator = Some(aggregator);
        Ok(())
    }

    /// Starts watching native code (libraries and their unwind tables, the code cache), when
    /// CPU or wall time is profiled: stacks get native frames once the first tables are read.
    fn start_native_code(&mut self) {
        if self.cpu_interval.is_none() && self.options.wall_interval.is_none() {
            return;
        }
        let code_cache = match crate::jvm::hotspot::code_cache::bounds(&self.loaded.jvmti) {
            Ok(bounds) => Some(bounds),
            Err(e) => {
                log_debug!("code cache bounds unknown ({e}); anonymous executable memory counts as Java code");
                None
            }
        };
        match ModuleWatch::start(code_cache) {
            Ok(w) => self.modules = Some(w),
            Err(e) => {
                log_warn!("cannot start the native code watch: {e}; stacks have no native frames")
            }
        }
    }

    /// Starts the CPU engine and the thread scan, when CPU is profiled; returns what the
    /// start line says of them.
    fn start_cpu(&mut self, kind: StartKind) -> Result<Option<String>, String> {
        let (Some(interval), Some(chosen)) = (self.cpu_interval, &self.cpu_engine) else {
            return Ok(None);
        };
        let engine = chosen.description.clone();
        if let Engine::Itimer(interval) = chosen.engine {
            ProcessItimer::start(interval).map_err(|e| format!("cannot start ITIMER_PROF: {e}"))?;
            self.itimer = true;
        }
        let scan = ThreadScan::start(thread_scan::Config {
            sampler: self.loaded.sampler,
            clock: self.registration().cpu,
            credit_first_scan: kind != StartKind::Late,
        });
        let threads = match scan {
            Ok(s) => {
                self.scan = Some(s);
                "all threads"
            }
            Err(e) => {
                log_warn!("cannot start the thread scan: {e}; only Java threads are profiled");
                "Java threads"
            }
        };
        Ok(Some(format!(
            "CPU every {interval:?} ({engine}, {threads})"
        )))
    }

    /// Starts the wall-clock thread, when wall time is profiled; a failure is logged and
    /// leaves wall profiling off.
    fn start_wall(&mut self) -> Option<String> {
        let interval = self.options.wall_interval?;
        let started = WallClock::start(wall::Config {
            vm: self.loaded.vm,
            jvmti: self.loaded.jvmti,
            interval,
            max_samples: self.options.wall_threads as usize,
        });
        match started {
            Ok(w) => {
                self.wall = Some(w);
                Some(format!(
                    "wall clock every {interval:?} (at most {} threads sampled per interval)",
                    self.options.wall_threads
                ))
            }
            Err(e) => {
                log_error!("cannot start the wall-clock thread: {e}; wall profiling is off");
                None
            }
        }
    }

    /// Starts allocation sampling for the allocation profile and the live heap, when asked
    /// for and this JVM can; a failure is logged and leaves both off.
    fn start_alloc(&mut self) -> Option<String> {
        let alloc = self.options.alloc_interval.filter(|_| self.alloc);
        let live = self.options.live_interval.filter(|_| self.live);
        let at = crate::engines::alloc::configure(alloc, live, self.options.alloc_rate);
        if alloc.is_none() && live.is_none() {
            return None;
        }
        let jvmti = self.loaded.jvmti;
        let on = jvmti
            .set_heap_sampling_interval(at as i32)
            .and_then(|()| jvmti.set_event(true, event::EVENT_SAMPLED_OBJECT_ALLOC));
        if let Err(e) = on {
            log_error!("cannot start allocation sampling: {e}; it stays off");
            return None;
        }
        let size = |b: u32| otelprof_exporter::config::format_size(u64::from(b));
        let mut what = Vec::new();
        match alloc {
            Some(0) => what.push("every allocation".to_owned()),
            Some(b) => what.push(format!(
                "allocations (one sample per {} allocated, on average)",
                size(b)
            )),
            None => {}
        }
        if let Some(b) = live {
            what.push(format!(
                "the live heap (objects sampled once per {} allocated, at most {} tracked)",
                size(b),
                crate::live::CAPACITY
            ));
        }
        let mut line = what.join(", ");
        if self.options.alloc_rate > 0 && at > 0 {
            line.push_str(&format!(
                " (at most {} samples/s, the interval growing while allocation is faster)",
                self.options.alloc_rate
            ));
        }
        Some(line)
    }

    /// Starts lock profiling, when asked for and this JVM can: contended monitors, and the
    /// parks of `java.util.concurrent` locks; what started goes to `what`.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv, in the live phase.
    unsafe fn start_locks(&mut self, jni: *mut JNIEnv, what: &mut Vec<String>) {
        let (true, Some(threshold)) = (self.lock, self.options.lock_threshold) else {
            return;
        };
        let jvmti = self.loaded.jvmti;
        crate::engines::locks::set_threshold(threshold);
        let on = jvmti
            .set_event(true, event::EVENT_MONITOR_CONTENDED_ENTER)
            .and_then(|()| jvmti.set_event(true, event::EVENT_MONITOR_CONTENDED_ENTERED));
        match on {
            Ok(()) if threshold.is_zero() => {
                what.push("contended monitors (every wait)".to_owned())
            }
            Ok(()) => what.push(format!(
                "contended monitors (waits of {threshold:?} or more, shorter ones sampled)"
            )),
            Err(e) => log_error!("cannot start lock profiling: {e}; it stays off"),
        }
        // SAFETY: `jni` is this thread's JNIEnv, in the live phase.
        match unsafe { crate::engines::parks::install(&jvmti, jni) } {
            Ok(()) => what.push("java.util.concurrent lock parks".to_owned()),
            Err(e) => log_warn!(
                "java.util.concurrent locks are not profiled: {e} (contended monitors are)"
            ),
        }
    }

    /// What the session runs, as an OpAMP server is told ([`crate::remote::Running`]).
    pub(crate) fn remote_view(&self) -> crate::remote::Running {
        crate::remote::engaged(
            &self.loaded.jvmti,
            self.cpu_interval,
            (self.alloc, self.live, self.lock),
            &self.options,
        )
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
            // `alloc=0` samples every allocation; its period is sent as 1 byte, since a
            // period of 0 leaves the profile without a name in Pyroscope, which refuses it
            // (otel_bridge::profile_types).
            kinds.push((SampleKind::Alloc, i64::from(bytes).max(1)));
        }
        if self.lock {
            kinds.push((SampleKind::Lock, 1));
        }
        kinds
    }

    /// Ends the current period now (see [`Aggregator::dump`]).
    pub(crate) fn dump(&self, file: Option<PathBuf>) -> Result<Flushed, String> {
        match &self.aggregator {
            Some(a) => a.dump(file, Duration::from_secs(10)),
            None => Err("not running".to_owned()),
        }
    }

    /// Stops everything the session started, in an order that never leaves a thread or a
    /// signal behind, and writes or sends the last profile. `jni` is the calling thread's
    /// JNIEnv; `at_exit` is set at VMDeath (the JVM is ending: its threads and events need no
    /// clean-up).
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv (null only with `at_exit`).
    pub(crate) unsafe fn stop(mut self, jni: *mut JNIEnv, at_exit: bool) -> Stopped {
        let jvmti = self.loaded.jvmti;
        let mut stopped = Stopped::default();
        // The thread scan first: it creates timers, which must all be gone at the end.
        if let Some(s) = self.scan.take() {
            if !s.stop(Duration::from_secs(1)) {
                stopped
                    .problems
                    .push("the thread scan did not stop within 1s".to_owned());
            }
        }
        // The wall thread next: it sends signals and reads thread states, and must be gone
        // (or given up on) before threads and the JVM go away. Bounded: exit never hangs.
        if let Some(w) = self.wall.take() {
            if !w.stop(Duration::from_secs(1)) {
                stopped
                    .problems
                    .push("the wall-clock thread did not stop within 1s".to_owned());
            }
        }
        if self.alloc || self.live {
            let _ = jvmti.set_event(false, event::EVENT_SAMPLED_OBJECT_ALLOC);
        }
        if self.lock {
            let _ = jvmti.set_event(false, event::EVENT_MONITOR_CONTENDED_ENTER);
            let _ = jvmti.set_event(false, event::EVENT_MONITOR_CONTENDED_ENTERED);
            crate::engines::parks::turn_off();
        }
        signal_handler::set_active(false);
        thread_registry::stop_registering();
        if self.itimer {
            let _ = ProcessItimer::stop();
        }
        thread_registry::stop_all_samplers();
        if !at_exit {
            // No more thread, class or compiled-method events: they cost while nothing samples.
            let _ = setup::session_events(self.loaded, false);
        }
        if signal_handler::quiesce(Duration::from_secs(1)) {
            // SAFETY: sampling is off and no handler runs.
            unsafe { cpu_clock::unmap_retired() };
        } else {
            stopped
                .problems
                .push("a sample was still being taken after 1s".to_owned());
        }
        if let Some(m) = self.modules.take() {
            if !m.stop(Duration::from_secs(1)) {
                stopped
                    .problems
                    .push("the native code watch did not stop within 1s".to_owned());
            }
        }
        if let Some(a) = self.aggregator.take() {
            match a.stop(Duration::from_secs(10)) {
                Some(flushed) => stopped.flushed = flushed,
                None => stopped
                    .problems
                    .push("the last profile was not written within 10s".to_owned()),
            }
        }
        // The aggregator has submitted the last profile; give the exporter a bounded time to
        // deliver what is queued. The JVM's exit never waits longer.
        let mut export_summary = String::new();
        if let Some(e) = self.exporter.take() {
            let report = e.shutdown(otlp_export::SHUTDOWN_BOUND);
            let s = e.counters().stats();
            if report.unsent > 0 || !report.finished {
                stopped.problems.push(format!(
                    "{} profiles not delivered to {} within {:?}",
                    report.unsent,
                    otelprof_exporter::config::shown_endpoint(&e.config().profiles_endpoint),
                    otlp_export::SHUTDOWN_BOUND
                ));
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
        for p in &stopped.problems {
            log_warn!("{p}; stopping continues");
        }
        let (registered, _) = thread_registry::TABLE.occupancy();
        log_info!(
            "stopped; {}; {} threads_registered_at_exit={registered}{export_summary}",
            self.destinations(),
            stats::summary()
        );
        if !at_exit && !jni.is_null() {
            // SAFETY: per this function's contract; sampling is off and quiesced, and the
            // aggregator is gone.
            unsafe { thread_registry::clear(jni) };
        }
        stopped
    }

    /// The CPU engine and why, as the log said it (`None` when CPU is not profiled).
    pub(crate) fn cpu_engine(&self) -> Option<String> {
        self.cpu_engine.as_ref().map(Chosen::log_line)
    }

    /// Where profiles go, for the start and stop lines and status replies.
    pub(crate) fn destinations(&self) -> String {
        let files = self
            .out_dir
            .as_ref()
            .map(|d| format!("pprof files in {}", d.display()));
        let otlp = self
            .export_env
            .config
            .as_ref()
            .map(|c| format!("OTLP to {}", otelprof_exporter::describe(c)));
        match (files, otlp) {
            (Some(f), Some(o)) => format!("{o} and {f}"),
            (Some(f), None) => f,
            (None, Some(o)) => o,
            (None, None) => "profiles go nowhere".into(),
        }
    }

    /// The profile types this session really runs (what the JVM could not do left out).
    pub(crate) fn types(&self) -> String {
        let mut options = self.options.clone();
        if !self.alloc {
            options.alloc_interval = None;
        }
        if !self.live {
            options.live_interval = None;
        }
        if !self.lock {
            options.lock_threshold = None;
        }
        options.types()
    }
}

/// Creates jmethodIDs for every class loaded so far (later classes get theirs at
/// ClassPrepare, which is on before this runs). Returns the number of classes whose methods
/// were preloaded.
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
