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
use crate::retry::{
    classify, spends_retry_budget, Backoff, Disposition, BACKOFF_INITIAL, BACKOFF_MAX,
};
use crate::self_metrics::{CounterSource, SelfMetrics};
use crate::transport::{HttpClient, Transport};

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
                run(&config, &shared, transport, metrics, metrics_interval).await;
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

async fn run(
    config: &OtlpConfig,
    shared: &SharedState,
    mut transport: Transport,
    metrics: Option<SelfMetrics>,
    metrics_interval: Duration,
) {
    let log = |level: LogLevel, msg: &str| (shared.log)(level, msg);
    let c = &shared.counters;
    let mut backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX, jitter_seed());
    let mut outage: Option<Outage> = None;
    let mut rejected_kinds: HashSet<String> = HashSet::new();
    let mut exhausted_kinds: HashSet<String> = HashSet::new();
    let mut failing: Option<Failing> = None;
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
                failing = None;
                c.sent.fetch_add(1, Relaxed);
                c.bytes_sent.fetch_add(item.bytes.len() as u64, Relaxed);
                backoff.reset();
                // Rejections stay logged once per kind for the whole run (then counted), even
                // with sends between them: a refused burst every few periods is one line.
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
        let failure = error.failure();
        let disposition = classify(&failure);
        if disposition != Disposition::Permanent && spends_retry_budget(&failure) {
            let since = match &failing {
                Some(f) if f.seq == item.seq => f.since,
                _ => Instant::now(),
            };
            failing = Some(Failing {
                seq: item.seq,
                since,
            });
            if since.elapsed() >= config.retry_budget {
                // Its retry budget is spent: drop it so that the newer ones go. The backoff
                // is kept, so a server failing every request is not hammered.
                c.queue.remove(item.seq);
                c.retries_exhausted.fetch_add(1, Relaxed);
                failing = None;
                if exhausted_kinds.insert(error.kind()) {
                    log(
                        LogLevel::Warn,
                        &format!(
                            "{} still failed a profile after {:.0?} of retries ({error}); it is dropped so that the newer ones can go",
                            shared.endpoint,
                            since.elapsed()
                        ),
                    );
                }
                continue;
            }
        }
        let wait = match disposition {
            Disposition::Permanent => {
                c.queue.remove(item.seq);
                failing = None;
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
                    "cannot export profiles to {} ({error}); retrying with backoff, keeping at most {} (oldest dropped)",
                    shared.endpoint,
                    crate::config::format_size(c.queue.limit() as u64)
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
