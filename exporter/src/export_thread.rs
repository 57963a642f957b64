//! The export thread: it drains the queue with one small (current-thread) tokio runtime,
//! retrying and dropping as [`crate::retry`] decides, and exports the agent's own metrics on
//! the same schedule.
//!
//! It speaks rarely: one line when exports start failing (not one per attempt or period),
//! one when they recover, one per kind of rejection.
//!
//! A request is dropped, never retried, when the server rejects it for good; one that keeps
//! failing in a retryable way is retried for at most `OtlpConfig::retry_budget` from its
//! first failure, then dropped, so no request holds the newer ones behind it for long. Both
//! are counted (`permanent`, `retries_exhausted`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::config::OtlpConfig;
use crate::error::{ExportError, StartError};
use crate::export_counters::ExportCounters;
use crate::logger::{LogLevel, Logger};
use crate::queue::Item;
use crate::retry::{
    classify, spends_retry_budget, Backoff, Disposition, BACKOFF_INITIAL, BACKOFF_MAX,
};
use crate::self_metrics::{CounterSource, SelfMetrics};
use crate::transport::{HttpClient, Sent, Transport};

/// What the handle and the export thread share.
pub(crate) struct SharedState {
    pub(crate) counters: Arc<ExportCounters>,
    /// New work queued.
    pub(crate) wake: Notify,
    /// Shutdown requested.
    pub(crate) stop: Notify,
    pub(crate) deadline: Mutex<Option<Instant>>,
    pub(crate) stopping: AtomicBool,
    pub(crate) done: Mutex<bool>,
    pub(crate) done_cv: Condvar,
    pub(crate) log: Logger,
    pub(crate) endpoint: String,
    pub(crate) queue_full_logged: AtomicBool,
}

/// Seeds the backoff's jitter differently in each process, so that agents restarted
/// together do not retry in lockstep.
fn jitter_seed() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b) ^ std::process::id() as u64
}

/// Starts the export thread and waits until its runtime and transport are set up.
pub(crate) fn spawn_export_thread(
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
                ExportLoop::new(&config, &shared, transport, metrics, metrics_interval)
                    .run()
                    .await;
            }
            Err(e) => {
                let _ = ready.send(Err(e));
            }
        }
    });
}

/// The request at the head of the queue that has failed, and since when.
struct Failing {
    seq: u64,
    since: Instant,
}

/// State of an ongoing outage, to log it once and its end once.
struct Outage {
    since: Instant,
    failures: u64,
    kinds: HashSet<String>,
}

/// The export loop: the queue drained in order through `transport`, one request at a time,
/// with the backoff, the outage and what has been logged, and the agent's own metrics
/// exported on their schedule.
struct ExportLoop<'a> {
    config: &'a OtlpConfig,
    shared: &'a SharedState,
    transport: Transport,
    metrics: Option<SelfMetrics>,
    metrics_interval: Duration,
    next_metrics: tokio::time::Instant,
    metrics_failing: bool,
    backoff: Backoff,
    outage: Option<Outage>,
    /// Kinds of permanent rejection logged (once each for the whole run).
    rejected_kinds: HashSet<String>,
    /// Kinds of failure logged when a request's retry budget ran out.
    exhausted_kinds: HashSet<String>,
    failing: Option<Failing>,
    /// Messages of partial successes logged.
    partial_logged: HashSet<String>,
}

impl<'a> ExportLoop<'a> {
    fn new(
        config: &'a OtlpConfig,
        shared: &'a SharedState,
        transport: Transport,
        metrics: Option<SelfMetrics>,
        metrics_interval: Duration,
    ) -> ExportLoop<'a> {
        let metrics_interval = metrics_interval.max(Duration::from_millis(100));
        ExportLoop {
            config,
            shared,
            transport,
            metrics,
            metrics_interval,
            next_metrics: tokio::time::Instant::now() + metrics_interval,
            metrics_failing: false,
            backoff: Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX, jitter_seed()),
            outage: None,
            rejected_kinds: HashSet::new(),
            exhausted_kinds: HashSet::new(),
            failing: None,
            partial_logged: HashSet::new(),
        }
    }

    /// Exports until shutdown: when the deadline set at shutdown passes, or the queue is
    /// empty after it was set. Then exports the metrics a last time.
    async fn run(mut self) {
        let c = &self.shared.counters;
        loop {
            let d = self.deadline();
            if let Some(d) = d {
                if c.queue.is_empty() || Instant::now() >= d {
                    break;
                }
            }
            if d.is_none() {
                self.export_metrics_when_due().await;
            }
            let Some(item) = c.queue.peek() else {
                self.wait_for_work().await;
                continue;
            };
            let limit = match d {
                Some(d) => self
                    .config
                    .timeout
                    .min(d.saturating_duration_since(Instant::now())),
                None => self.config.timeout,
            };
            c.attempts.fetch_add(1, Relaxed);
            let sent = self.transport.send(item.bytes.clone());
            let result = match tokio::time::timeout(limit, sent).await {
                Ok(r) => r,
                Err(_) => Err(ExportError::Timeout(limit)),
            };
            match result {
                Ok(sent) => self.sent(&item, sent),
                Err(error) => {
                    if let Some(wait) = self.failed(&item, &error) {
                        self.back_off(wait).await;
                    }
                }
            }
        }
        if let Some(m) = &self.metrics {
            // The final collection: short runs report their counters too.
            let left = Duration::from_secs(1).min(self.config.timeout);
            export_metrics(m, left, c, &mut self.metrics_failing, self.shared).await;
        }
        c.unsent_at_exit.fetch_add(c.queue.len() as u64, Relaxed);
    }

    fn log(&self, level: LogLevel, msg: &str) {
        (self.shared.log)(level, msg)
    }

    /// The deadline shutdown set, if it has begun.
    fn deadline(&self) -> Option<Instant> {
        *self
            .shared
            .deadline
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Exports the agent's metrics when their time has come.
    async fn export_metrics_when_due(&mut self) {
        if let Some(m) = &self.metrics {
            if tokio::time::Instant::now() >= self.next_metrics {
                self.next_metrics += self.metrics_interval;
                let c = &self.shared.counters;
                let timeout = self.config.timeout;
                export_metrics(m, timeout, c, &mut self.metrics_failing, self.shared).await;
            }
        }
    }

    /// Waits for work queued, shutdown, or the metrics' next time.
    async fn wait_for_work(&self) {
        let shared = self.shared;
        if self.metrics.is_some() {
            tokio::select! {
                _ = shared.wake.notified() => {}
                _ = shared.stop.notified() => {}
                _ = tokio::time::sleep_until(self.next_metrics) => {}
            }
        } else {
            tokio::select! {
                _ = shared.wake.notified() => {}
                _ = shared.stop.notified() => {}
            }
        }
    }

    /// `item` went: it leaves the queue, the backoff starts again, a recovery is logged
    /// once, and a partial success once per message.
    fn sent(&mut self, item: &Item, sent: Sent) {
        let c = &self.shared.counters;
        c.queue.remove(item.seq);
        self.failing = None;
        c.sent.fetch_add(1, Relaxed);
        c.bytes_sent.fetch_add(item.bytes.len() as u64, Relaxed);
        self.backoff.reset();
        // Rejections stay logged once per kind for the whole run (then counted), even
        // with sends between them: a refused burst every few periods is one line.
        if self.shared.queue_full_logged.swap(false, Relaxed) || self.outage.is_some() {
            let o = self.outage.take();
            self.log(
                LogLevel::Info,
                &format!(
                    "profiles reach {} again{}; {} profiles dropped so far (queue bound)",
                    self.shared.endpoint,
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
                if self.partial_logged.insert(p.error_message.clone()) {
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "{} accepted an export partially: {} profiles rejected: {}",
                            self.shared.endpoint, p.rejected_profiles, p.error_message
                        ),
                    );
                }
            }
        }
    }

    /// `item` failed with `error`: drops it when the server rejected it for good or its
    /// retry budget is spent (`None`), else returns how long to wait before trying again.
    fn failed(&mut self, item: &Item, error: &ExportError) -> Option<Duration> {
        let c = &self.shared.counters;
        let failure = error.failure();
        let disposition = classify(&failure);
        if disposition != Disposition::Permanent && spends_retry_budget(&failure) {
            let since = match &self.failing {
                Some(f) if f.seq == item.seq => f.since,
                _ => Instant::now(),
            };
            self.failing = Some(Failing {
                seq: item.seq,
                since,
            });
            if since.elapsed() >= self.config.retry_budget {
                // Its retry budget is spent: drop it so that the newer ones go. The backoff
                // is kept, so a server failing every request is not hammered.
                c.queue.remove(item.seq);
                c.retries_exhausted.fetch_add(1, Relaxed);
                self.failing = None;
                if self.exhausted_kinds.insert(error.kind()) {
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "{} still failed a profile after {:.0?} of retries ({error}); it is dropped so that the newer ones can go",
                            self.shared.endpoint,
                            since.elapsed()
                        ),
                    );
                }
                return None;
            }
        }
        let wait = match disposition {
            Disposition::Permanent => {
                c.queue.remove(item.seq);
                self.failing = None;
                c.permanent.fetch_add(1, Relaxed);
                if self.rejected_kinds.insert(error.kind()) {
                    self.log(
                        LogLevel::Warn,
                        &format!(
                            "{} rejected a profile ({error}); it is dropped, not retried",
                            self.shared.endpoint
                        ),
                    );
                }
                return None;
            }
            Disposition::Retry => {
                c.retryable.fetch_add(1, Relaxed);
                self.backoff.next_delay()
            }
            Disposition::Throttled(d) => {
                c.throttled.fetch_add(1, Relaxed);
                d
            }
        };
        self.note_outage(error, wait);
        Some(wait)
    }

    /// Counts a failure of the outage, and logs it: the first kind of failure as a warning,
    /// other new kinds as information, repeats at debug level only.
    fn note_outage(&mut self, error: &ExportError, wait: Duration) {
        let o = self.outage.get_or_insert_with(|| Outage {
            since: Instant::now(),
            failures: 0,
            kinds: HashSet::new(),
        });
        o.failures += 1;
        let (new_kind, first_kind) = (o.kinds.insert(error.kind()), o.kinds.len() == 1);
        let endpoint = &self.shared.endpoint;
        if new_kind {
            let level = if first_kind {
                LogLevel::Warn
            } else {
                LogLevel::Info
            };
            let limit = self.shared.counters.queue.limit() as u64;
            self.log(
                level,
                &format!(
                    "cannot export profiles to {endpoint} ({error}); retrying with backoff, keeping at most {} (oldest dropped)",
                    crate::config::format_size(limit)
                ),
            );
        } else {
            self.log(
                LogLevel::Debug,
                &format!("export to {endpoint} failed again ({error}); next try in {wait:.1?}"),
            );
        }
    }

    /// Waits `wait` before the next try, no longer than the shutdown deadline allows.
    async fn back_off(&self, wait: Duration) {
        let wait = match self.deadline() {
            Some(d) => wait.min(d.saturating_duration_since(Instant::now())),
            None => wait,
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = self.shared.stop.notified() => {}
        }
    }
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
