//! The aggregator thread: drains raw samples, names their frames, merges them into the
//! current period's profiles (one per profile type: [`crate::kinds`]), and at the end of every
//! period and at exit writes each as a pprof file and/or hands it to the OTLP exporter.
//!
//! It is a native thread attached to the VM as a daemon (JVMTI calls need an attached
//! thread), it is not itself profiled, and it never blocks the sampler: the handler only ever
//! try-locks the buffer shards this thread swaps.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jni::sys::{JNIEnv, JavaVM};
use otel_bridge::{FrameKind, Label, LocationId, Profile, ProfileBuilder};
use otelprof_exporter::{FailureLog, OtlpExporter, PprofFileSink};
use otelprof_native_frames::walk::End;

use crate::code_map::locations::{NativeLocations, NativeStack};
use crate::code_map::names::NativeNames;
use crate::context::endpoints::{span_id_hex, ENDPOINTS};
use crate::context::reader::SpanKey;
use crate::jvm::class_names::CLASSES;
use crate::jvm::jvmti::{self, Jvmti};
use crate::jvm::symbols::Symbols;
use crate::kinds::{SampleKind, ThreadState};
use crate::live::{GcWatch, LiveHeap};
use crate::sampling::event_sample::STACK_TRACE_FAILED;
use crate::sampling::os;
use crate::sampling::own_threads;
use crate::sampling::sample_buffer::Record;
use crate::sampling::signal_handler::{self, Sampler, NOT_A_JAVA_THREAD};
use crate::sampling::thread_roles::ThreadRole;
use crate::stats::{self, COUNTERS};
use crate::sys::ticks;
use crate::threads::thread_registry;

/// Set once a failed OTLP submission has been reported (one line per problem).
static SUBMIT_ERROR_LOGGED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Longest time between two drains. A write that takes an arena past half full, or a walk
/// that met code the module watch has not prepared (a library without its unwind table yet,
/// or in no known library), wakes the aggregator sooner ([`crate::sampling::doorbell`]).
/// The bound stays short because Java frames are named at the drain: a method whose class is
/// unloaded before then can no longer be named (`[unknown_method]`). At 250 ms a workload
/// that loads and unloads classes all the time (ClassChurn at 1 ms) had 22 % of its profile
/// under `[unknown_method]`, against 4 % at 50 ms; the longer bound saved the aggregator
/// about 2.6 ms of CPU a second on FixedWork at 10 ms, too little to show in the whole
/// process's ratio.
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// Least time between two log lines about pprof writes that keep failing (a full disk fails
/// every write of every period; the first failure is told at once, later ones counted).
const WRITE_FAILURES_TOLD_EVERY: Duration = Duration::from_secs(60);

pub(crate) struct Config {
    pub(crate) vm: *mut JavaVM,
    pub(crate) jvmti: Jvmti,
    pub(crate) sampler: &'static Sampler,
    /// The profile types to build, each with its pprof `period` (CPU and wall: the sampling
    /// interval in ns; allocations: the sampling interval in bytes; locks: 1).
    pub(crate) kinds: Vec<(SampleKind, i64)>,
    pub(crate) period: Duration,
    /// Directory for pprof files, when wanted (`out=`, or no OTLP endpoint).
    pub(crate) out_dir: Option<PathBuf>,
    /// OTLP export, when an endpoint is configured.
    pub(crate) exporter: Option<Arc<OtlpExporter>>,
    /// The OpAMP capture the profiles are made for: every sample gets its id as the label
    /// [`CAPTURE_LABEL`].
    pub(crate) capture: Option<String>,
    /// The live heap's interval (`live=`), when it is on: a snapshot is written with every
    /// period's profiles ([`crate::live`]).
    pub(crate) live: Option<u32>,
}

/// The sample label naming the OpAMP capture a profile was made for.
pub(crate) const CAPTURE_LABEL: &str = otelprof_opamp::capture::ATTRIBUTE;

// SAFETY: `vm` is the process-wide JavaVM*, valid on any thread.
unsafe impl Send for Config {}

/// Handle to the running aggregator thread.
pub(crate) struct Aggregator {
    worker: crate::worker::Worker,
    mailbox: Arc<Mailbox>,
    /// The sampler whose buffer's doorbell the aggregator sleeps on.
    sampler: &'static Sampler,
}

/// What the owner asks of the running aggregator besides stopping, and what it answered.
#[derive(Default)]
struct Mailbox {
    /// A dump asked for: end the period now, and also write it to this file (if any).
    dump: Mutex<Option<(Option<PathBuf>, mpsc::Sender<Flushed>)>>,
    /// What the last flush (at stop) did.
    last: Mutex<Option<Flushed>>,
}

/// What ending a period did.
#[derive(Clone, Debug, Default)]
pub(crate) struct Flushed {
    /// Files written (pprof files in `out=`, and a dump's own file).
    pub(crate) files: Vec<PathBuf>,
    /// Profiles queued for OTLP export.
    pub(crate) exported: usize,
    /// Why something was not written, one line each.
    pub(crate) errors: Vec<String>,
}

impl Aggregator {
    pub(crate) fn start(config: Config) -> std::io::Result<Aggregator> {
        let sampler = config.sampler;
        let mailbox = Arc::new(Mailbox::default());
        let theirs = mailbox.clone();
        let worker = crate::worker::Worker::spawn("otelprof-aggregator", move |control| {
            let tid = os::gettid();
            own_threads::add_own_tid(tid);
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(config, &control, &theirs)
            }));
            if result.is_err() {
                signal_handler::set_active(false);
                log_error!("internal error in the aggregator thread; profiling stopped");
            }
            own_threads::remove_own_tid(tid);
            crate::worker::mark_done(&control);
        })?;
        Ok(Aggregator {
            worker,
            mailbox,
            sampler,
        })
    }

    /// Asks for a final drain and write, and waits for it at most `timeout`. Returns what the
    /// last write did, or `None` on timeout (the JVM must not hang at exit because of us).
    pub(crate) fn stop(&self, timeout: Duration) -> Option<Flushed> {
        let buffer = &self.sampler.buffer;
        if !self.worker.stop_waking(timeout, &|| buffer.wake()) {
            return None;
        }
        Some(
            self.mailbox
                .last
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or_default(),
        )
    }

    /// Ends the current period now: its profiles go where every period's go, and to `file`
    /// too when given. Waits at most `timeout` for the aggregator to do it.
    pub(crate) fn dump(&self, file: Option<PathBuf>, timeout: Duration) -> Result<Flushed, String> {
        let (tx, rx) = mpsc::channel();
        {
            let mut slot = self.mailbox.dump.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_some() {
                return Err("another dump is under way".to_owned());
            }
            *slot = Some((file, tx));
        }
        crate::worker::poke(&self.worker.control);
        self.sampler.buffer.wake();
        rx.recv_timeout(timeout).map_err(|_| {
            self.mailbox
                .dump
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            format!("the profile was not written within {timeout:?}")
        })
    }
}

fn unix_nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

fn run(config: Config, control: &crate::worker::Shared, mailbox: &Mailbox) {
    // SAFETY: config.vm is the live JavaVM*.
    let jni = unsafe { jvmti::attach_current_thread_as_daemon(config.vm, c"otelprof-aggregator") };
    let Some(jni) = jni else {
        log_error!("cannot attach the aggregator thread to the JVM; profiling stopped");
        signal_handler::set_active(false);
        return;
    };
    let mut period = Period::new(&config, jni);
    let (lock, _) = control;
    let mut cut_short = (0, 0);
    loop {
        // The owner sets a flag, then wakes the buffer's doorbell.
        config.sampler.buffer.wait_for_drain(DRAIN_EVERY, || {
            let c = lock.lock().unwrap_or_else(|p| p.into_inner());
            c.stop || c.poke
        });
        let (stop, poked) = {
            let mut c = lock.lock().unwrap_or_else(|p| p.into_inner());
            (c.stop, std::mem::take(&mut c.poke))
        };
        // Walks that met a library without its unwind table, or code in no known library:
        // the module watch builds the table, or this thread looks at the maps (at most every
        // 100 ms), for the next walks. Before the drain, which can take a while when it first
        // meets a large library's symbols: the walks of a library loaded a moment ago find
        // it within milliseconds of their doorbell, not after the drain.
        let ended = |end: End| {
            COUNTERS
                .native_walk_end
                .get(end as usize)
                .map_or(0, |c| c.load(Ordering::Relaxed))
        };
        let now = (ended(End::TablePending), ended(End::NoModule));
        if now != cut_short {
            if now.1 != cut_short.1 {
                crate::code_map::module_scan::rescan_now();
            }
            cut_short = now;
            crate::code_map::module_scan::wake();
        }
        period.drain(config.sampler);
        if stop {
            let flushed = period.flush(None);
            *mailbox.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(flushed);
            period.release();
            break;
        }
        let dump = poked
            .then(|| {
                mailbox
                    .dump
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
            })
            .flatten();
        if let Some((file, reply)) = dump {
            let _ = reply.send(period.flush(file.as_deref()));
        } else if period.started.elapsed() >= config.period {
            period.flush(None);
        }
    }
    // SAFETY: this thread attached itself above.
    unsafe { jvmti::detach_current_thread(config.vm) };
}

/// The profiles being built for the current period, one [`Lane`] per profile type, and the
/// live heap, whose snapshots span periods.
struct Period {
    exporter: Option<Arc<OtlpExporter>>,
    symbols: Symbols,
    /// Names of native and kernel frames (symbol tables kept for the session).
    native_names: NativeNames,
    lanes: Vec<Lane>,
    /// Lane of each [`SampleKind`] (by index), `None` when that type is off.
    lane_of: [Option<usize>; SampleKind::ALL.len()],
    live: Option<LiveHeap>,
    live_sink: Option<PprofFileSink>,
    /// The collections and the heap after them, followed for the live heap and for the
    /// memory metrics (when there is an exporter).
    watch: Option<GcWatch>,
    capture: Option<String>,
    started: Instant,
    started_unix: i64,
    /// CLOCK_MONOTONIC time the last drain started: every sample taken before it is in the
    /// builder.
    last_drain_ns: u64,
    /// Unix time minus CLOCK_MONOTONIC, to date samples (the handler reads the monotonic
    /// clock, which is async-signal-safe and never jumps).
    unix_minus_monotonic: i64,
    jvmti: Jvmti,
    jni: *mut JNIEnv,
    /// What the log says about failed pprof writes (one line, then counts).
    write_failures: FailureLog,
}

/// One profile type's profile of the current period.
struct Lane {
    kind: SampleKind,
    /// The pprof `period` (see [`Config::kinds`]).
    period_value: i64,
    sink: Option<PprofFileSink>,
    builder: ProfileBuilder,
    /// The capture's id, when the session is one ([`Config::capture`]).
    capture: Option<String>,
    /// (jmethodID, bci) -> location, valid for this builder only.
    frames: HashMap<(usize, i32), LocationId>,
    pseudo: HashMap<i32, LocationId>,
    /// The frame of each role of the threads that are not walked (`[GC]`, `[VM]`, …).
    roles: HashMap<u8, LocationId>,
    /// Interned class name id -> leaf location (allocated class, monitor class).
    leaves: HashMap<u32, LocationId>,
    /// Native and kernel frames, valid for this builder only.
    native: NativeLocations,
    thread_labels: HashMap<u64, [Label; 3]>,
    /// Threads the sampler did not know (no table entry yet: started since the last thread
    /// scan), by tid: their role and kernel name, read when their first sample is drained.
    unknown_threads: HashMap<i32, (ThreadRole, String)>,
    /// Samples of this period, before labels are resolved: thread names and endpoint names
    /// are bound when the profile is written, so late renames still apply.
    samples: HashMap<SampleKey, Accumulated>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SampleKey {
    stack: Vec<LocationId>,
    serial: u64,
    tid: i32,
    span: Option<SpanKey>,
    /// A [`ThreadState`] for wall samples, 0 otherwise.
    state: u8,
}

#[derive(Default)]
struct Accumulated {
    weight: i64,
    count_milli: u64,
    timestamps: Vec<i64>,
}

fn new_builder(kind: SampleKind, period_value: i64) -> ProfileBuilder {
    ProfileBuilder::new(kind.sample_types(), kind.period_type(), period_value)
}

/// Code of the `[GC pause]` pseudo-frame: the leaf of wall time spent in garbage collection
/// pauses ([`crate::engines::wall`]), outside the walk failures' codes.
const GC_PAUSE_FRAME: i32 = -201;

/// Name of the pseudo-frame standing for a stack that could not be walked (or for a
/// collection's pause).
pub(crate) fn pseudo_frame_name(code: i32) -> &'static str {
    match code {
        GC_PAUSE_FRAME => "[GC pause]",
        ticks::NO_JAVA_FRAME => "[no_Java_frame]",
        ticks::NO_CLASS_LOAD => "[no_class_load]",
        ticks::GC_ACTIVE => "[GC_active]",
        ticks::UNKNOWN_NOT_JAVA => "[unknown_not_Java]",
        ticks::NOT_WALKABLE_NOT_JAVA => "[not_walkable_not_Java]",
        ticks::UNKNOWN_JAVA => "[unknown_Java]",
        ticks::NOT_WALKABLE_JAVA => "[not_walkable_Java]",
        ticks::UNKNOWN_STATE => "[unknown_state]",
        ticks::THREAD_EXIT => "[thread_exit]",
        ticks::DEOPT => "[deoptimization]",
        ticks::SAFEPOINT => "[safepoint]",
        NOT_A_JAVA_THREAD => "[non_Java_thread]",
        STACK_TRACE_FAILED => "[stack_trace_failed]",
        _ => "[unknown_failure]",
    }
}

impl Lane {
    fn new(
        kind: SampleKind,
        period_value: i64,
        out_dir: Option<&PathBuf>,
        capture: Option<String>,
    ) -> Lane {
        Lane {
            kind,
            period_value,
            capture,
            sink: out_dir.map(|d| PprofFileSink::new(d.clone(), std::process::id())),
            builder: new_builder(kind, period_value),
            frames: HashMap::new(),
            pseudo: HashMap::new(),
            roles: HashMap::new(),
            leaves: HashMap::new(),
            native: NativeLocations::default(),
            thread_labels: HashMap::new(),
            unknown_threads: HashMap::new(),
            samples: HashMap::new(),
        }
    }

    fn pseudo_location(&mut self, code: i32) -> LocationId {
        if let Some(&l) = self.pseudo.get(&code) {
            return l;
        }
        let f = self.builder.function(pseudo_frame_name(code), "", 0);
        let l = self.builder.location(f, 0, FrameKind::Pseudo);
        self.pseudo.insert(code, l);
        l
    }

    /// The frame of a thread that is not walked: its role, as native code of the JVM.
    fn role_location(&mut self, role: ThreadRole, name: &str) -> LocationId {
        if let Some(&l) = self.roles.get(&(role as u8)) {
            return l;
        }
        let f = self.builder.function(name, "", 0);
        let l = self.builder.location(f, 0, FrameKind::Native);
        self.roles.insert(role as u8, l);
        l
    }

    fn java_location(
        &mut self,
        symbols: &mut Symbols,
        method: jni::sys::jmethodID,
        bci: i32,
    ) -> LocationId {
        let key = (method as usize, bci);
        if let Some(&l) = self.frames.get(&key) {
            return l;
        }
        // SAFETY: `method` came from AsyncGetCallTrace or JVMTI GetStackTrace, which only
        // report VM-made jmethodIDs.
        let l = match unsafe { symbols.method(method) } {
            Some(m) => {
                let (name, file, start, line) = (
                    m.name.clone(),
                    m.file.clone(),
                    m.start_line(),
                    m.line_of(bci),
                );
                let f = self.builder.function(&name, &file, start);
                self.builder.location(f, line, FrameKind::Jvm)
            }
            None => {
                let f = self.builder.function("[unknown_method]", "", 0);
                self.builder.location(f, 0, FrameKind::Jvm)
            }
        };
        self.frames.insert(key, l);
        l
    }

    /// The leaf frame naming a class: the allocated type, or the contended monitor's.
    fn class_location(&mut self, class_id: u32) -> LocationId {
        if let Some(&l) = self.leaves.get(&class_id) {
            return l;
        }
        let name = CLASSES
            .name(class_id)
            .map_or_else(|| "[unknown class]".to_owned(), |n| n.to_string());
        let f = self.builder.function(&name, "", 0);
        let l = self.builder.location(f, 0, FrameKind::Jvm);
        self.leaves.insert(class_id, l);
        l
    }

    /// The role and name of a thread the sampler had no entry for, from its kernel name
    /// (`[Java]` and no name when it is already gone). The thread scan creates entries at
    /// most every 100 ms to 1 s, and the collector starts GC workers in the middle of a
    /// collection; the buffer is drained every 50 ms, so the thread is almost always still
    /// there to be named. Read off the signal handler: it opens a file.
    fn unknown_thread(&mut self, tid: i32) -> &(ThreadRole, String) {
        self.unknown_threads.entry(tid).or_insert_with(|| {
            match crate::threads::process_threads::name(tid) {
                Some(name) => (ThreadRole::of_name(&name), name),
                None => (ThreadRole::Java, String::new()),
            }
        })
    }

    fn labels(&mut self, serial: u64, tid: i32, jvmti: &Jvmti, jni: *mut JNIEnv) -> [Label; 3] {
        if serial == 0 {
            // No registry entry: not one thread but every thread the sampler did not know.
            let name = self
                .unknown_threads
                .get(&tid)
                .map(|(_, name)| name.clone())
                .unwrap_or_default();
            return self.thread_labels_named(tid, name);
        }
        if let Some(l) = self.thread_labels.get(&serial) {
            return *l;
        }
        let name = {
            let mut names = thread_registry::NAMES
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            // SAFETY: `jni` is this (attached) thread's JNIEnv.
            unsafe { names.current_name(serial, jvmti, jni) }.unwrap_or_default()
        };
        let labels = self.thread_labels_named(tid, name);
        self.thread_labels.insert(serial, labels);
        labels
    }

    fn thread_labels_named(&mut self, tid: i32, name: String) -> [Label; 3] {
        let name = if name.is_empty() {
            format!("[tid {tid}]")
        } else {
            name
        };
        [
            self.builder.str_label("thread_name", &name),
            self.builder.str_label("thread_id", &tid.to_string()),
            // The pool, for readers and backends to group by (few values, unlike names).
            self.builder.str_label(
                "thread_pool",
                &otelprof_primitives::thread_pool::pool_of(&name),
            ),
        ]
    }

    fn add(
        &mut self,
        symbols: &mut Symbols,
        names: &mut NativeNames,
        record: Record<'_>,
        max_depth: i32,
        unix_offset: i64,
    ) {
        let h = record.header;
        let mut stack =
            Vec::with_capacity(record.frames.len() + record.kernel.len() + record.native.len() + 3);
        if h.class_id != 0 {
            stack.push(self.class_location(h.class_id));
        }
        if self.kind == SampleKind::Wall && h.state == ThreadState::GcPause as u8 {
            // Time the thread sat through a collection's pause, on the stack it waited with.
            stack.push(self.pseudo_location(GC_PAUSE_FRAME));
        }
        // Leaf first: kernel frames, native frames, then the Java frames (or the role or
        // pseudo-frame) below.
        let native = NativeStack {
            kernel: record.kernel,
            native: record.native,
            end: End::from_u8(h.native_end),
            java_follows: h.num_frames > 0,
        };
        self.native
            .extend(&mut self.builder, names, &native, &mut stack);
        let mut role = ThreadRole::from_u8(h.role);
        if h.num_frames == NOT_A_JAVA_THREAD && role == ThreadRole::Java {
            role = self.unknown_thread(h.tid).0;
        }
        if let (NOT_A_JAVA_THREAD, Some(name)) = (h.num_frames, role.frame_name()) {
            stack.push(self.role_location(role, name));
        } else if h.num_frames <= 0 {
            stats::walk_failed(h.num_frames);
            stack.push(self.pseudo_location(h.num_frames));
        } else {
            for f in record.frames {
                stack.push(self.java_location(symbols, f.method_id, f.lineno));
            }
            if h.num_frames >= max_depth {
                stats::bump(&COUNTERS.truncated);
                let f = self.builder.function("[truncated]", "", 0);
                stack.push(self.builder.location(f, 0, FrameKind::Pseudo));
            }
        }
        if h.context.torn != 0 {
            stats::bump(&COUNTERS.context_torn);
        }
        if h.context.present != 0 {
            stats::bump(&COUNTERS.samples_with_span);
        }
        let key = SampleKey {
            stack,
            serial: h.serial,
            tid: h.tid,
            span: h.context.key(),
            state: if self.kind == SampleKind::Wall {
                h.state
            } else {
                0
            },
        };
        let acc = self.samples.entry(key).or_default();
        // CPU: a signal stands for `weight` sampling intervals (the kernel folds expirations
        // it could not deliver separately into the overrun count); `samples` counts intervals,
        // as pprof and Pyroscope expect (samples x period = CPU time). Other kinds: the
        // weight is already in the unit of the profile (ns, bytes).
        acc.weight = acc
            .weight
            .saturating_add(i64::try_from(h.weight).unwrap_or(i64::MAX));
        acc.count_milli = acc.count_milli.saturating_add(h.count_milli);
        acc.timestamps
            .push((h.time_ns as i64).saturating_add(unix_offset));
    }

    /// The values of an accumulated sample, one per sample type of the lane's kind.
    fn values(&self, acc: &Accumulated) -> Vec<i64> {
        let count = i64::try_from(acc.count_milli.saturating_add(500) / 1000).unwrap_or(i64::MAX);
        match self.kind {
            SampleKind::Cpu => vec![acc.weight, acc.weight.saturating_mul(self.period_value)],
            SampleKind::Wall => vec![acc.weight],
            SampleKind::Alloc | SampleKind::Lock | SampleKind::Live => vec![count, acc.weight],
        }
    }

    /// Resolves labels (thread names, endpoints) and builds the period's profile.
    fn finish_profile(
        &mut self,
        jvmti: &Jvmti,
        jni: *mut JNIEnv,
        started_unix: i64,
        now_unix: i64,
    ) -> Profile {
        for (key, acc) in std::mem::take(&mut self.samples) {
            let [thread_name, thread_id, thread_pool] =
                self.labels(key.serial, key.tid, jvmti, jni);
            let mut labels = vec![thread_name, thread_id, thread_pool];
            let mut link = None;
            if let Some(span) = key.span {
                if let Some(name) = ENDPOINTS.name(span.local_root_span_id) {
                    labels.push(self.builder.str_label("span_name", &name));
                }
                if span.link.is_some() {
                    link = span.link;
                    let lrs = span_id_hex(span.local_root_span_id);
                    labels.push(self.builder.str_label("local_root_span_id", &lrs));
                }
            }
            if self.kind == SampleKind::Wall {
                let state = ThreadState::from_u8(key.state).name();
                labels.push(self.builder.str_label("thread_state", state));
            }
            if let Some(id) = &self.capture {
                labels.push(self.builder.str_label(CAPTURE_LABEL, id));
            }
            let values = self.values(&acc);
            self.builder
                .add_linked_sample(&key.stack, &labels, link, &values, &acc.timestamps);
        }
        let mut builder =
            std::mem::replace(&mut self.builder, new_builder(self.kind, self.period_value));
        builder.add_comment(&format!("otelprof agent: {}", stats::summary()));
        self.frames.clear();
        self.pseudo.clear();
        self.roles.clear();
        self.leaves.clear();
        self.native.clear();
        self.thread_labels.clear();
        self.unknown_threads.clear();
        builder.build(started_unix, (now_unix - started_unix).max(0))
    }
}

/// Takes a drained record's object into the live heap, or deletes its weak reference when
/// the live heap is off (a record left by an earlier session).
///
/// # Safety
/// `jni` is the calling (aggregator) thread's JNIEnv; `record` was drained from the buffer.
unsafe fn take_object(
    live: &mut Option<LiveHeap>,
    watch: Option<&GcWatch>,
    symbols: &mut Symbols,
    record: Record<'_>,
    jni: *mut JNIEnv,
) {
    if record.header.object == 0 {
        return;
    }
    match (live, watch) {
        // SAFETY: per this function's contract.
        (Some(live), Some(watch)) => unsafe { live.ingest(symbols, record, watch.survival(), jni) },
        // SAFETY: per this function's contract: the reference is ours, deleted once.
        _ => unsafe {
            crate::jvm::jvmti::delete_weak_global_ref(
                jni,
                record.header.object as jni::sys::jobject,
            )
        },
    }
}

/// What one flush wrote and sent, profile by profile.
#[derive(Default)]
struct Delivery {
    flushed: Flushed,
    /// The last write error and how many writes failed (one verdict per flush).
    failed: Option<(std::io::Error, u64)>,
    wrote: bool,
    /// The profiles for a dump's own file.
    profiles: Vec<(SampleKind, Profile)>,
}

impl Delivery {
    /// Writes `profile` to `sink` (`out=`), queues it for export, and keeps it for a dump's
    /// file when there is one.
    fn deliver(
        &mut self,
        kind: SampleKind,
        profile: Profile,
        sink: &mut Option<PprofFileSink>,
        exporter: Option<&OtlpExporter>,
        also_to: Option<&Path>,
    ) {
        if let Some(sink) = sink {
            match sink.write(kind.name(), &profile) {
                Ok(path) => {
                    stats::bump(&COUNTERS.profiles_written);
                    self.wrote = true;
                    log_debug!(
                        "wrote {} ({} samples)",
                        path.display(),
                        profile.samples.len()
                    );
                    self.flushed.files.push(path);
                }
                Err(e) => {
                    stats::bump(&COUNTERS.write_errors);
                    self.flushed
                        .errors
                        .push(format!("{}: {e}", sink.dir().display()));
                    let count = self.failed.as_ref().map_or(0, |(_, n)| *n) + 1;
                    self.failed = Some((e, count));
                }
            }
        }
        if let Some(exporter) = exporter {
            // Encodes and queues; never waits for the network.
            match exporter.submit(&profile) {
                Ok(()) => self.flushed.exported += 1,
                Err(e) => {
                    self.flushed.errors.push(format!("not exported: {e}"));
                    if !SUBMIT_ERROR_LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        log_warn!("a profile was not exported: {e}");
                    }
                }
            }
        }
        if also_to.is_some() {
            self.profiles.push((kind, profile));
        }
    }
}

impl Period {
    fn new(config: &Config, jni: *mut JNIEnv) -> Period {
        let mut lanes = Vec::new();
        let mut lane_of = [None; SampleKind::ALL.len()];
        for &(kind, period_value) in &config.kinds {
            if let Some(slot) = lane_of.get_mut(kind.index()) {
                if slot.is_none() {
                    *slot = Some(lanes.len());
                    lanes.push(Lane::new(
                        kind,
                        period_value,
                        config.out_dir.as_ref(),
                        config.capture.clone(),
                    ));
                }
            }
        }
        let max_depth = config.sampler.max_depth();
        Period {
            exporter: config.exporter.clone(),
            symbols: Symbols::new(config.jvmti, jni),
            native_names: NativeNames::take_kept(),
            lanes,
            lane_of,
            live: config.live.map(|i| LiveHeap::new(u64::from(i), max_depth)),
            // SAFETY: `jni` is this (aggregator) thread's JNIEnv.
            watch: (config.live.is_some() || config.exporter.is_some())
                .then(|| unsafe { GcWatch::open(jni) }),
            live_sink: config
                .live
                .and(config.out_dir.as_ref())
                .map(|d| PprofFileSink::new(d.clone(), std::process::id())),
            capture: config.capture.clone(),
            started: Instant::now(),
            started_unix: unix_nanos(SystemTime::now()),
            last_drain_ns: 0,
            unix_minus_monotonic: unix_nanos(SystemTime::now()) - os::monotonic_ns() as i64,
            jvmti: config.jvmti,
            jni,
            write_failures: FailureLog::new(
                config.out_dir.as_ref().map_or_else(
                    || "writing pprof files".to_owned(),
                    |d| format!("writing pprof files to {}", d.display()),
                ),
                WRITE_FAILURES_TOLD_EVERY,
            ),
        }
    }

    fn drain(&mut self, sampler: &Sampler) {
        self.last_drain_ns = os::monotonic_ns();
        let max_depth = sampler.max_depth();
        let offset = self.unix_minus_monotonic;
        let jni = self.jni;
        if let Some(watch) = &mut self.watch {
            // SAFETY: `jni` is this (aggregator) thread's JNIEnv.
            unsafe { watch.follow(jni) };
        }
        let (lanes, lane_of, symbols, names) = (
            &mut self.lanes,
            &self.lane_of,
            &mut self.symbols,
            &mut self.native_names,
        );
        let (live, watch) = (&mut self.live, &self.watch);
        sampler.buffer.drain(|record| {
            let kind = SampleKind::from_u8(record.header.kind);
            // SAFETY: `jni` is this thread's JNIEnv; the drained record's weak reference is
            // the drainer's.
            unsafe { take_object(live, watch.as_ref(), symbols, record, jni) };
            if kind == Some(SampleKind::Live) {
                return;
            }
            let lane = kind
                .and_then(|k| lane_of.get(k.index()).copied().flatten())
                .and_then(|i| lanes.get_mut(i));
            match lane {
                Some(lane) => lane.add(symbols, names, record, max_depth, offset),
                None => stats::bump(&COUNTERS.dropped_kind_off),
            }
        });
        if let Some(live) = &mut self.live {
            // SAFETY: as above.
            unsafe { live.after_drain(&self.jvmti, jni) };
        }
    }

    /// Ends the session's live heap: every weak reference it holds is deleted, and the
    /// beans' references.
    fn release(&mut self) {
        std::mem::take(&mut self.native_names).keep();
        if let Some(live) = self.live.take() {
            // SAFETY: `self.jni` is this (aggregator) thread's JNIEnv.
            unsafe { live.release(self.jni) };
        }
        if let Some(watch) = self.watch.take() {
            // SAFETY: as above.
            unsafe { watch.close(self.jni) };
        }
    }

    /// Ends the period: each profile type's profile is written to `out=` and/or queued for
    /// export, and with `also_to` (a dump's `file=`) written there too.
    fn flush(&mut self, also_to: Option<&Path>) -> Flushed {
        let now_unix = unix_nanos(SystemTime::now());
        let mut out = Delivery::default();
        for lane in &mut self.lanes {
            let profile = lane.finish_profile(&self.jvmti, self.jni, self.started_unix, now_unix);
            out.deliver(
                lane.kind,
                profile,
                &mut lane.sink,
                self.exporter.as_deref(),
                also_to,
            );
        }
        if let (Some(live), Some(watch)) = (&mut self.live, &mut self.watch) {
            // SAFETY: `self.jni` is this (aggregator) thread's JNIEnv.
            let profile = unsafe {
                watch.follow(self.jni);
                let survival = *watch.survival();
                live.snapshot(
                    &self.jvmti,
                    self.jni,
                    &survival,
                    now_unix,
                    self.capture.as_deref(),
                )
            };
            out.deliver(
                SampleKind::Live,
                profile,
                &mut self.live_sink,
                self.exporter.as_deref(),
                also_to,
            );
        }
        let Delivery {
            mut flushed,
            failed,
            wrote,
            profiles,
        } = out;
        if let Some(path) = also_to {
            match crate::dump_file::write(path, &profiles) {
                Ok(paths) => flushed.files.extend(paths),
                Err(e) => flushed.errors.push(e),
            }
        }
        let now = Instant::now();
        let told = match &failed {
            Some((e, count)) => self.write_failures.failed(now, e, *count),
            None if wrote => self.write_failures.succeeded(now),
            None => None,
        };
        if let Some(line) = told {
            log_warn!("{line}");
        }
        self.started = now;
        self.started_unix = now_unix;
        self.symbols.clear();
        ENDPOINTS.expire();
        let mut names = thread_registry::NAMES
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // SAFETY: `self.jni` is this aggregator thread's JNIEnv.
        unsafe { names.evict_ended_before(self.last_drain_ns, self.jni) };
        flushed
    }
}
