//! The OTLP exporter: a bounded queue of encoded requests drained by the exporter's own
//! thread, which runs one small (current-thread) tokio runtime.
//!
//! The producer (the agent's aggregator thread) calls [`OtlpExporter::submit`], which encodes
//! the profile, appends it to the queue and returns: it never waits for the network. The
//! export thread sends the oldest request; on a retryable failure it waits (exponential
//! backoff with jitter, or what the server asked for) and tries the same request again while
//! newer ones queue up behind it, the oldest being dropped once the byte bound is reached.
//! Permanent failures drop the request at once. [`OtlpExporter::shutdown`] gives the thread a
//! deadline to send what is queued and returns by then whatever happens: the JVM must
//! never hang at exit because a collector is slow or gone.
//!
//! It speaks rarely: one line when exports start failing (not one per attempt or period),
//! one when they recover, one per kind of rejection.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use otelprof_profile::otlp::{self, EncodeOptions, ProfileId};
use otelprof_profile::Profile;
use tokio::sync::Notify;

use crate::config::{Compression, OtlpConfig};
use crate::error::{ExportError, StartError, SubmitError};
use crate::http::HttpClient;
use crate::queue::ByteQueue;
use crate::retry::{classify, Backoff, Disposition};
use crate::self_metrics::{CounterSource, SelfMetrics};
use crate::transport::Transport;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Warn,
    Info,
    Debug,
}

/// Where the exporter's few log lines go (the agent prints them as `otelprof: …`).
pub type Logger = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

/// First wait after a failure, and the longest one (before the server's own requests).
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Everything besides the transport configuration.
pub struct ExporterSettings {
    pub resource: opentelemetry_sdk::Resource,
    pub encode: EncodeOptions,
    pub log: Logger,
    /// The agent's counters; with [`OtlpConfig::metrics_endpoint`] set they are exported as
    /// OTLP metrics every `metrics_interval`.
    pub counters: Option<CounterSource>,
    pub metrics_interval: Duration,
}

/// What the exporter did, for logs, metrics and tests.
#[derive(Debug)]
pub struct ExportCounters {
    queue: ByteQueue,
    attempts: AtomicU64,
    sent: AtomicU64,
    bytes_sent: AtomicU64,
    retryable: AtomicU64,
    throttled: AtomicU64,
    permanent: AtomicU64,
    partially_rejected: AtomicU64,
    encode_errors: AtomicU64,
    unsent_at_exit: AtomicU64,
    metrics_exports: AtomicU64,
    metrics_failures: AtomicU64,
}

/// A copy of [`ExportCounters`] at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    pub attempts: u64,
    pub sent: u64,
    pub bytes_sent: u64,
    pub retryable_failures: u64,
    pub throttled: u64,
    pub permanent_failures: u64,
    pub partially_rejected: u64,
    pub dropped_queue_full: u64,
    pub encode_errors: u64,
    pub unsent_at_exit: u64,
    pub queued: u64,
    pub queued_bytes: u64,
    pub metrics_exports: u64,
    pub metrics_failures: u64,
}

impl ExportCounters {
    fn new(queue_bytes: usize) -> ExportCounters {
        ExportCounters {
            queue: ByteQueue::new(queue_bytes),
            attempts: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            retryable: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            permanent: AtomicU64::new(0),
            partially_rejected: AtomicU64::new(0),
            encode_errors: AtomicU64::new(0),
            unsent_at_exit: AtomicU64::new(0),
            metrics_exports: AtomicU64::new(0),
            metrics_failures: AtomicU64::new(0),
        }
    }

    pub fn attempts(&self) -> u64 {
        self.attempts.load(Relaxed)
    }

    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent.load(Relaxed)
    }

    pub fn queued_bytes(&self) -> u64 {
        self.queue.bytes() as u64
    }

    /// Failed attempts by what happened next.
    pub fn failures(&self) -> [(&'static str, u64); 3] {
        [
            ("retried", self.retryable.load(Relaxed)),
            ("throttled", self.throttled.load(Relaxed)),
            ("dropped", self.permanent.load(Relaxed)),
        ]
    }

    /// Profiles that never reached a receiver, by reason.
    pub fn dropped(&self) -> [(&'static str, u64); 4] {
        [
            (
                "queue_full",
                self.queue.counters.dropped_items.load(Relaxed),
            ),
            ("rejected", self.permanent.load(Relaxed)),
            ("encode_error", self.encode_errors.load(Relaxed)),
            ("unsent_at_exit", self.unsent_at_exit.load(Relaxed)),
        ]
    }

    pub fn stats(&self) -> ExportStats {
        ExportStats {
            attempts: self.attempts(),
            sent: self.sent.load(Relaxed),
            bytes_sent: self.bytes_sent(),
            retryable_failures: self.retryable.load(Relaxed),
            throttled: self.throttled.load(Relaxed),
            permanent_failures: self.permanent.load(Relaxed),
            partially_rejected: self.partially_rejected.load(Relaxed),
            dropped_queue_full: self.queue.counters.dropped_items.load(Relaxed),
            encode_errors: self.encode_errors.load(Relaxed),
            unsent_at_exit: self.unsent_at_exit.load(Relaxed),
            queued: self.queue.len() as u64,
            queued_bytes: self.queued_bytes(),
            metrics_exports: self.metrics_exports.load(Relaxed),
            metrics_failures: self.metrics_failures.load(Relaxed),
        }
    }
}

/// What the handle and the export thread share.
struct SharedState {
    counters: Arc<ExportCounters>,
    /// New work queued.
    wake: Notify,
    /// Shutdown requested.
    stop: Notify,
    deadline: Mutex<Option<Instant>>,
    stopping: AtomicBool,
    done: Mutex<bool>,
    done_cv: Condvar,
    log: Logger,
    endpoint: String,
    queue_full_logged: AtomicBool,
}

/// Result of [`OtlpExporter::shutdown`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// The export thread finished within the timeout.
    pub finished: bool,
    /// Requests still queued (not delivered).
    pub unsent: u64,
}

pub struct OtlpExporter {
    shared: Arc<SharedState>,
    config: OtlpConfig,
    resource: opentelemetry_sdk::Resource,
    encode: EncodeOptions,
    ids: Mutex<IdSource>,
}

impl OtlpExporter {
    /// Starts the export thread. Connections are made lazily: a collector that is not up yet
    /// is an export failure (retried), not a start failure.
    pub fn start(
        config: OtlpConfig,
        settings: ExporterSettings,
    ) -> Result<OtlpExporter, StartError> {
        let counters = Arc::new(ExportCounters::new(config.queue_bytes));
        let shared = Arc::new(SharedState {
            counters,
            wake: Notify::new(),
            stop: Notify::new(),
            deadline: Mutex::new(None),
            stopping: AtomicBool::new(false),
            done: Mutex::new(false),
            done_cv: Condvar::new(),
            log: settings.log.clone(),
            endpoint: config.profiles_endpoint.clone(),
            queue_full_logged: AtomicBool::new(false),
        });
        spawn_export_thread(
            config.clone(),
            settings.resource.clone(),
            settings.counters,
            settings.metrics_interval,
            shared.clone(),
        )?;
        Ok(OtlpExporter {
            shared,
            config,
            resource: settings.resource,
            encode: settings.encode,
            ids: Mutex::new(IdSource::new()),
        })
    }

    pub fn config(&self) -> &OtlpConfig {
        &self.config
    }

    pub fn counters(&self) -> &ExportCounters {
        &self.shared.counters
    }

    /// Encodes `profile` and queues it. Never blocks on the network; takes the queue lock
    /// for a few pointer moves.
    pub fn submit(&self, profile: &Profile) -> Result<(), SubmitError> {
        if self.shared.stopping.load(Relaxed) {
            return Err(SubmitError::ShutDown);
        }
        let id = self.ids.lock().unwrap_or_else(|p| p.into_inner()).next();
        let bytes =
            otlp::encode_to_vec(profile, &self.resource, id, &self.encode).inspect_err(|_| {
                self.shared.counters.encode_errors.fetch_add(1, Relaxed);
            })?;
        self.submit_bytes(Bytes::from(bytes));
        Ok(())
    }

    /// Queues an already encoded `ExportProfilesServiceRequest`.
    pub fn submit_bytes(&self, bytes: Bytes) {
        let dropped = self.shared.counters.queue.push(bytes);
        if dropped > 0 && !self.shared.queue_full_logged.swap(true, Relaxed) {
            (self.shared.log)(
                LogLevel::Warn,
                &format!(
                    "OTLP export queue full ({} MiB): dropping the oldest profiles until {} accepts data again",
                    self.shared.counters.queue.limit() >> 20,
                    self.shared.endpoint
                ),
            );
        }
        self.shared.wake.notify_one();
    }

    /// Sends what is queued within `timeout`, then stops the export thread. Returns by
    /// `timeout` (plus scheduling slack) in every case.
    pub fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let start = Instant::now();
        self.shared.stopping.store(true, Relaxed);
        // Leave a quarter of the time for the final metrics export and the thread's exit.
        *self
            .shared
            .deadline
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(start + timeout.mul_f64(0.75));
        self.shared.stop.notify_one();
        self.shared.wake.notify_one();
        let mut done = self.shared.done.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                break;
            }
            done = match self.shared.done_cv.wait_timeout(done, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        ShutdownReport {
            finished: *done,
            unsent: self.shared.counters.queue.len() as u64,
        }
    }
}

/// Profile ids: random (getrandom) when the OS provides randomness, else a counter mixed
/// with the process's hash seed; never all zero.
struct IdSource {
    fallback: u64,
}

impl IdSource {
    fn new() -> IdSource {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        IdSource {
            fallback: h.finish(),
        }
    }

    fn next(&mut self) -> ProfileId {
        let mut b = [0u8; 16];
        if getrandom::fill(&mut b).is_err() {
            self.fallback = self
                .fallback
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b[..8].copy_from_slice(&self.fallback.to_le_bytes());
            b[8..].copy_from_slice(&(!self.fallback).to_le_bytes());
        }
        ProfileId::from_random(b)
    }
}

fn seed() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b) ^ std::process::id() as u64
}

/// Starts the export thread and waits until its runtime and transport are set up.
fn spawn_export_thread(
    config: OtlpConfig,
    resource: opentelemetry_sdk::Resource,
    counters: Option<CounterSource>,
    metrics_interval: Duration,
    shared: Arc<SharedState>,
) -> Result<(), StartError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), StartError>>();
    std::thread::Builder::new()
        .name("otelprof-export".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                thread_main(
                    config,
                    resource,
                    counters,
                    metrics_interval,
                    shared.clone(),
                    ready_tx,
                )
            }));
            if result.is_err() {
                (shared.log)(
                    LogLevel::Warn,
                    "internal error in the export thread; OTLP export stopped",
                );
            }
            let mut done = shared.done.lock().unwrap_or_else(|p| p.into_inner());
            *done = true;
            shared.done_cv.notify_all();
        })
        .map_err(StartError::Thread)?;
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(result) => result,
        Err(_) => Err(StartError::Runtime(std::io::Error::other(
            "the export thread did not start",
        ))),
    }
}

fn thread_main(
    config: OtlpConfig,
    resource: opentelemetry_sdk::Resource,
    counters: Option<CounterSource>,
    metrics_interval: Duration,
    shared: Arc<SharedState>,
    ready: std::sync::mpsc::Sender<Result<(), StartError>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("otelprof-export")
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(StartError::Runtime(e)));
            return;
        }
    };
    runtime.block_on(async move {
        let setup = (|| {
            let http = HttpClient::new(&config)?;
            let transport = Transport::new(&config, &http)?;
            let metrics = match (&config.metrics_endpoint, &counters) {
                (Some(endpoint), Some(source)) => Some(SelfMetrics::new(
                    &config,
                    endpoint,
                    resource.clone(),
                    source.clone(),
                    shared.counters.clone(),
                    &http,
                )?),
                _ => None,
            };
            Ok::<_, StartError>((transport, metrics))
        })();
        match setup {
            Ok((transport, metrics)) => {
                let _ = ready.send(Ok(()));
                run(&config, &shared, transport, metrics, metrics_interval).await;
            }
            Err(e) => {
                let _ = ready.send(Err(e));
            }
        }
    });
}

/// State of an ongoing outage, to log it once and its end once.
struct Outage {
    since: Instant,
    failures: u64,
    kinds: HashSet<String>,
}

async fn run(
    config: &OtlpConfig,
    shared: &SharedState,
    mut transport: Transport,
    metrics: Option<SelfMetrics>,
    metrics_interval: Duration,
) {
    let log = |level: LogLevel, msg: &str| (shared.log)(level, msg);
    let c = &shared.counters;
    let mut backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX, seed());
    let mut outage: Option<Outage> = None;
    let mut rejected_kinds: HashSet<String> = HashSet::new();
    let mut partial_logged: HashSet<String> = HashSet::new();
    let metrics_interval = metrics_interval.max(Duration::from_millis(100));
    let mut next_metrics = tokio::time::Instant::now() + metrics_interval;
    let mut metrics_failing = false;
    let deadline = || *shared.deadline.lock().unwrap_or_else(|p| p.into_inner());

    loop {
        let d = deadline();
        if let Some(d) = d {
            if c.queue.is_empty() || Instant::now() >= d {
                break;
            }
        }
        if let Some(m) = &metrics {
            if d.is_none() && tokio::time::Instant::now() >= next_metrics {
                next_metrics += metrics_interval;
                export_metrics(m, config.timeout, c, &mut metrics_failing, shared).await;
            }
        }
        let Some(item) = c.queue.peek() else {
            if metrics.is_some() {
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = shared.stop.notified() => {}
                    _ = tokio::time::sleep_until(next_metrics) => {}
                }
            } else {
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = shared.stop.notified() => {}
                }
            }
            continue;
        };

        let limit = match d {
            Some(d) => config
                .timeout
                .min(d.saturating_duration_since(Instant::now())),
            None => config.timeout,
        };
        c.attempts.fetch_add(1, Relaxed);
        let result = match tokio::time::timeout(limit, transport.send(item.bytes.clone())).await {
            Ok(r) => r,
            Err(_) => Err(ExportError::Timeout(limit)),
        };
        let error = match result {
            Ok(sent) => {
                c.queue.remove(item.seq);
                c.sent.fetch_add(1, Relaxed);
                c.bytes_sent.fetch_add(item.bytes.len() as u64, Relaxed);
                backoff.reset();
                rejected_kinds.clear();
                if shared.queue_full_logged.swap(false, Relaxed) || outage.is_some() {
                    let o = outage.take();
                    log(
                        LogLevel::Info,
                        &format!(
                            "profiles reach {} again{}; {} profiles dropped so far (queue bound)",
                            shared.endpoint,
                            o.map(|o| format!(
                                " after {} failed attempts over {:.0?}",
                                o.failures,
                                o.since.elapsed()
                            ))
                            .unwrap_or_default(),
                            c.queue.counters.dropped_items.load(Relaxed),
                        ),
                    );
                }
                if let Some(p) = sent.response.partial_success {
                    if p.rejected_profiles > 0 || !p.error_message.is_empty() {
                        c.partially_rejected
                            .fetch_add(p.rejected_profiles.max(0) as u64, Relaxed);
                        if partial_logged.insert(p.error_message.clone()) {
                            log(
                                LogLevel::Warn,
                                &format!(
                                    "{} accepted an export partially: {} profiles rejected: {}",
                                    shared.endpoint, p.rejected_profiles, p.error_message
                                ),
                            );
                        }
                    }
                }
                continue;
            }
            Err(e) => e,
        };
        let disposition = classify(&error.failure());
        let wait = match disposition {
            Disposition::Permanent => {
                c.queue.remove(item.seq);
                c.permanent.fetch_add(1, Relaxed);
                if rejected_kinds.insert(error.kind()) {
                    log(
                        LogLevel::Warn,
                        &format!(
                            "{} rejected a profile ({error}); it is dropped, not retried",
                            shared.endpoint
                        ),
                    );
                }
                continue;
            }
            Disposition::Retry => {
                c.retryable.fetch_add(1, Relaxed);
                backoff.next_delay()
            }
            Disposition::Throttled(d) => {
                c.throttled.fetch_add(1, Relaxed);
                d
            }
        };
        let o = outage.get_or_insert_with(|| Outage {
            since: Instant::now(),
            failures: 0,
            kinds: HashSet::new(),
        });
        o.failures += 1;
        if o.kinds.insert(error.kind()) {
            let level = if o.kinds.len() == 1 {
                LogLevel::Warn
            } else {
                LogLevel::Info
            };
            log(
                level,
                &format!(
                    "cannot export profiles to {} ({error}); retrying with backoff, keeping at most {} MiB (oldest dropped)",
                    shared.endpoint,
                    c.queue.limit() >> 20
                ),
            );
        } else {
            log(
                LogLevel::Debug,
                &format!(
                    "export to {} failed again ({error}); next try in {wait:.1?}",
                    shared.endpoint
                ),
            );
        }
        let wait = match deadline() {
            Some(d) => wait.min(d.saturating_duration_since(Instant::now())),
            None => wait,
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shared.stop.notified() => {}
        }
    }

    if let Some(m) = &metrics {
        // The final collection: short runs report their counters too.
        let left = Duration::from_secs(1).min(config.timeout);
        export_metrics(m, left, c, &mut metrics_failing, shared).await;
    }
    c.unsent_at_exit.fetch_add(c.queue.len() as u64, Relaxed);
}

async fn export_metrics(
    m: &SelfMetrics,
    timeout: Duration,
    c: &ExportCounters,
    failing: &mut bool,
    shared: &SharedState,
) {
    let result = match tokio::time::timeout(timeout, m.export()).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    };
    match result {
        Ok(()) => {
            c.metrics_exports.fetch_add(1, Relaxed);
            *failing = false;
        }
        Err(e) => {
            c.metrics_failures.fetch_add(1, Relaxed);
            if !*failing {
                *failing = true;
                (shared.log)(
                    LogLevel::Debug,
                    &format!("cannot export the agent's metrics: {e}"),
                );
            }
        }
    }
}

/// Human summary of a configuration, for the agent's start line.
pub fn describe(config: &OtlpConfig) -> String {
    format!(
        "{} ({}{})",
        config.profiles_endpoint,
        config.protocol.name(),
        match config.compression {
            Compression::Gzip => ", gzip",
            Compression::None => "",
        }
    )
}
