//! Starting and stopping profiling: at VMInit (or when the shim starts the agent) the
//! exporter, the aggregator thread, the CPU timers and the other engines start; at VMDeath
//! they stop in an order that never leaves a thread or a signal behind, and the last profile
//! is written or sent.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jni::sys::{jobject, JNIEnv, JavaVM};
use otelprof_exporter::OtlpExporter;

use crate::aggregator::{self, Aggregator};
use crate::engines::wall::{self, WallClock};
use crate::jvm::jvmti::{delete_local_ref, Jvmti};
use crate::kinds::SampleKind;
use crate::options::{Clock, Options};
use crate::otlp_export::{self, ExportEnv};
use crate::sampling::signal_handler::{self, Sampler};
use crate::sampling::thread_registry::{self, Registration};
use crate::sampling::thread_scan::{self, ThreadScan};
use crate::sampling::timers::ProcessItimer;
use crate::stats;
use crate::sys::event;

/// The agent once set up: what was decided at load, and the threads it starts.
pub(super) struct Agent {
    pub(super) vm: *mut JavaVM,
    pub(super) jvmti: Jvmti,
    pub(super) options: Options,
    /// CPU sampling interval, `None` with `cpu=off`.
    pub(super) cpu_interval: Option<Duration>,
    /// Allocation and lock profiling, when asked for and this JVM can do them.
    pub(super) alloc: bool,
    pub(super) lock: bool,
    /// Where pprof files go: `out=`, else the working directory unless OTLP is configured.
    pub(super) out_dir: Option<PathBuf>,
    /// The `OTEL_*` environment, read once at load.
    pub(super) export_env: ExportEnv,
    pub(super) exporter: Mutex<Option<Arc<OtlpExporter>>>,
    pub(super) sampler: &'static Sampler,
    pub(super) aggregator: Mutex<Option<Aggregator>>,
    pub(super) wall: Mutex<Option<WallClock>>,
    /// The scan that puts the threads JVMTI does not announce (GC, JIT, VM) in the CPU profile.
    pub(super) scan: Mutex<Option<ThreadScan>>,
    /// Set by the first `start`: under `-javaagent` the shim starts the agent from premain,
    /// which libinstrument runs inside its own VMInit callback, so our VMInit may follow.
    pub(super) started: AtomicBool,
}

// SAFETY: `vm` is the process-wide JavaVM*, usable from any thread; the rest is Sync.
unsafe impl Send for Agent {}
// SAFETY: as above.
unsafe impl Sync for Agent {}

impl Agent {
    /// How threads are registered: with a CPU timer each, unless `clock=itimer` or `cpu=off`.
    pub(super) fn registration(&self) -> Registration {
        Registration {
            cpu_timer: self
                .cpu_interval
                .filter(|_| self.options.clock == Clock::ThreadCpu),
        }
    }

    /// # Safety
    /// Called from VMInit with the arguments JVMTI passed to it.
    pub(super) unsafe fn start(&self, jni: *mut JNIEnv, main_thread: jobject) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let preloaded = preload_loaded_classes(&self.jvmti, jni);
        // SAFETY: VMInit passes the main thread and its JNIEnv; this runs on that thread.
        unsafe {
            thread_registry::on_thread_start(&self.jvmti, jni, main_thread, self.registration())
        };
        thread_registry::credit_cpu_before_start(self.registration());
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
        // The OpAMP client, started last, describes the agent with the same resource.
        let opamp_resource = self.export_env.opamp.as_ref().map(|_| resource.clone());
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
            let scan = ThreadScan::start(thread_scan::Config {
                sampler: self.sampler,
                timer_interval: self.registration().cpu_timer,
                signo: libc::SIGPROF,
            });
            let threads = match scan {
                Ok(s) => {
                    *self.scan.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
                    "all threads"
                }
                Err(e) => {
                    log_warn!("cannot start the thread scan: {e}; only Java threads are profiled");
                    "Java threads"
                }
            };
            what.push(format!("CPU every {interval:?} ({engine}, {threads})"));
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
                    otelprof_exporter::config::format_size(u64::from(bytes))
                )),
                Ok(()) => what.push(format!(
                    "allocations (one sample per {} allocated, on average; at most {} samples/s, \
                     the interval growing while allocation is faster)",
                    otelprof_exporter::config::format_size(u64::from(bytes)),
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
        if let Some(resource) = opamp_resource {
            crate::remote::start(
                self.export_env.opamp.as_ref(),
                &resource,
                &self.options,
                crate::remote::engaged(
                    &self.jvmti,
                    self.cpu_interval,
                    self.alloc,
                    self.lock,
                    &self.options,
                ),
            );
        }
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

    pub(super) fn stop(&self) {
        if !signal_handler::is_active() && self.aggregator.lock().map_or(true, |a| a.is_none()) {
            return;
        }
        // The OpAMP client first: its goodbye tells the server the agent is going (bounded).
        crate::remote::stop();
        // The thread scan next: it creates timers, which must all be gone at the end.
        let scan = self.scan.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(s) = scan {
            if !s.stop(Duration::from_secs(1)) {
                log_warn!("the thread scan did not stop within 1s; continuing shutdown");
            }
        }
        // The wall thread next: it sends signals and reads thread states, and must be gone
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
                    otelprof_exporter::config::shown_endpoint(&e.config().profiles_endpoint),
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
            .map(|c| format!("OTLP to {}", otelprof_exporter::describe(c)));
        match (files, otlp) {
            (Some(f), Some(o)) => format!("{o} and {f}"),
            (Some(f), None) => f,
            (None, Some(o)) => o,
            (None, None) => "profiles go nowhere".into(),
        }
    }
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
