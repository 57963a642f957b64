//! The OTLP exporter: a bounded queue of encoded requests drained by the exporter's own
//! thread, which runs one small (current-thread) tokio runtime.
//!
//! The producer (the agent's aggregator thread) calls [`OtlpExporter::submit`], which encodes
//! the profile, appends it to the queue and returns: it never waits for the network. The
//! export thread sends the oldest request; on a retryable failure it waits (exponential
//! backoff with jitter, or what the server asked for) and tries the same request again while
//! newer ones queue up behind it, the oldest being dropped once the byte bound is reached.
//! Permanent failures drop the request at once; a request still failing when its retry budget
//! (`OtlpConfig::retry_budget`) is spent is dropped too, so that it cannot hold the newer ones
//! back for longer than that. [`OtlpExporter::shutdown`] gives the thread a
//! deadline to send what is queued and returns by then whatever happens: the JVM must
//! never hang at exit because a collector is slow or gone.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use otel_bridge::otlp::{self, EncodeOptions};
use otel_bridge::Profile;
use tokio::sync::Notify;

use crate::config::OtlpConfig;
use crate::error::{StartError, SubmitError};
use crate::export_counters::ExportCounters;
use crate::export_thread::{spawn_export_thread, SharedState};
use crate::logger::{LogLevel, Logger};
use crate::profile_ids::ProfileIdSource;
use crate::self_metrics::CounterSource;

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
    ids: Mutex<ProfileIdSource>,
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
            endpoint: crate::config::shown_endpoint(&config.profiles_endpoint),
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
            ids: Mutex::new(ProfileIdSource::new()),
        })
    }

    pub fn config(&self) -> &OtlpConfig {
        &self.config
    }

    pub fn counters(&self) -> &ExportCounters {
        &self.shared.counters
    }

    /// Encodes `profile` and queues it: one request, or one per part when the encode
    /// options' bounds split it. Never blocks on the network; takes the queue lock for a few
    /// pointer moves per request.
    pub fn submit(&self, profile: &Profile) -> Result<(), SubmitError> {
        if self.shared.stopping.load(Relaxed) {
            return Err(SubmitError::ShutDown);
        }
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        let requests =
            otlp::encode_bounded(profile, &self.resource, &self.encode, &mut || ids.next())
                .inspect_err(|_| {
                    self.shared.counters.encode_errors.fetch_add(1, Relaxed);
                })?;
        drop(ids);
        for request in requests {
            self.submit_bytes(Bytes::from(prost::Message::encode_to_vec(&request)));
        }
        Ok(())
    }

    /// Queues an already encoded `ExportProfilesServiceRequest`.
    pub fn submit_bytes(&self, bytes: Bytes) {
        let dropped = self.shared.counters.queue.push(bytes);
        if dropped > 0 && !self.shared.queue_full_logged.swap(true, Relaxed) {
            (self.shared.log)(
                LogLevel::Warn,
                &format!(
                    "OTLP export queue full ({}): dropping the oldest profiles until {} accepts data again",
                    crate::config::format_size(self.shared.counters.queue.limit() as u64),
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
