//! The agent's own telemetry as OTLP metrics, through `opentelemetry` +
//! `opentelemetry-otlp`.
//!
//! Instruments are observable: their callbacks read counters the agent already keeps
//! (atomics), so instrumenting costs the sampler nothing. A manual reader is collected and
//! exported from the export thread's own runtime on the exporter's schedule (no extra
//! thread, no second runtime), and once more at shutdown so short runs report too.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::Resource;

use crate::config::{Compression, OtlpConfig, Protocol};
use crate::error::StartError;
use crate::export_counters::ExportCounters;
use crate::transport::{lazy_channel, metadata, HttpClient};

/// The agent's counters at one instant, as the agent reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentCounters {
    /// Signals that produced a sample.
    pub samples: u64,
    /// Sampling intervals those signals stand for (1 + timer overruns each).
    pub sampled_intervals: u64,
    /// CPU stack walks: one per CPU sample taken in the signal handler. Beside
    /// `sampled_intervals` it says how finely CPU is sampled (one walk per interval with perf
    /// events; several intervals per walk with tick-bound timers).
    pub cpu_walks: u64,
    /// The sampling interval.
    pub interval: Duration,
    /// Samples dropped, by reason (`buffer_full`, `contended`, `unknown_thread`, …).
    pub dropped: Vec<(&'static str, u64)>,
    /// Stack walks that failed, by AsyncGetCallTrace outcome (`gc_active`, …).
    pub failed_walks: Vec<(&'static str, u64)>,
    /// Stacks cut at the depth limit.
    pub truncated: u64,
    /// Samples taken while the thread was working for a span.
    pub samples_with_span: u64,
    /// The JVM's memory figures ([`crate::memory_metrics`]).
    pub memory: crate::memory_metrics::MemoryFigures,
}

/// Reads the agent's counters; called on the export thread at each collection.
pub type CounterSource = Arc<dyn Fn() -> AgentCounters + Send + Sync>;

/// Metric names (all under `otelprof.`).
pub mod names {
    pub const SAMPLES: &str = "otelprof.samples";
    pub const SAMPLED_CPU: &str = "otelprof.sampled_cpu_time";
    pub const DROPPED: &str = "otelprof.samples.dropped";
    pub const FAILED_WALKS: &str = "otelprof.stack_walks.failed";
    pub const CPU_WALKS: &str = "otelprof.stack_walks.cpu";
    pub const TRUNCATED: &str = "otelprof.stacks.truncated";
    pub const WITH_SPAN: &str = "otelprof.samples.with_span";
    pub const CPU_UTILIZATION: &str = "otelprof.cpu.utilization";
    pub const EXPORT_ATTEMPTS: &str = "otelprof.export.attempts";
    pub const EXPORT_FAILURES: &str = "otelprof.export.failures";
    pub const EXPORT_BYTES: &str = "otelprof.export.bytes";
    pub const EXPORT_DROPPED: &str = "otelprof.export.dropped";
    pub const QUEUE_BYTES: &str = "otelprof.export.queue.size";
}

/// Lets the exporter keep a handle on the reader the provider owns.
#[derive(Debug, Clone)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: std::sync::Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

pub(crate) struct SelfMetrics {
    // Kept alive: dropping the provider unregisters the instruments.
    _provider: SdkMeterProvider,
    reader: Arc<ManualReader>,
    exporter: opentelemetry_otlp::MetricExporter,
}

impl SelfMetrics {
    /// Must run inside the exporter's tokio runtime (the gRPC channel's task lives there).
    pub(crate) fn new(
        config: &OtlpConfig,
        endpoint: &str,
        resource: Resource,
        source: CounterSource,
        export: Arc<ExportCounters>,
        http: &HttpClient,
    ) -> Result<SelfMetrics, StartError> {
        let bad = |e: &dyn std::fmt::Display| StartError::Endpoint {
            url: endpoint.to_owned(),
            reason: e.to_string(),
        };
        let exporter = match config.protocol {
            Protocol::Grpc => {
                let channel = lazy_channel(config, endpoint)?;
                let metadata = metadata(&config.headers)?;
                let mut b = opentelemetry_otlp::MetricExporter::builder()
                    .with_tonic()
                    .with_channel(channel)
                    .with_endpoint(endpoint)
                    .with_timeout(config.timeout)
                    .with_metadata(metadata);
                if config.compression == Compression::Gzip {
                    b = b.with_compression(opentelemetry_otlp::Compression::Gzip);
                }
                b.build().map_err(|e| bad(&e))?
            }
            Protocol::HttpProtobuf => opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_http_client(http.clone())
                .with_endpoint(endpoint)
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(config.timeout)
                .with_headers(config.headers.iter().cloned().collect())
                .build()
                .map_err(|e| bad(&e))?,
        };
        let reader = Arc::new(ManualReader::builder().build());
        let provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(SharedReader(reader.clone()))
            .build();
        register_instruments(&provider, source, export);
        Ok(SelfMetrics {
            _provider: provider,
            reader,
            exporter,
        })
    }

    /// Collects every instrument and sends one export request.
    pub(crate) async fn export(&self) -> Result<(), String> {
        let mut rm = ResourceMetrics::default();
        self.reader.collect(&mut rm).map_err(|e| e.to_string())?;
        self.exporter.export(&rm).await.map_err(|e| e.to_string())
    }
}

fn register_instruments(
    provider: &SdkMeterProvider,
    source: CounterSource,
    export: Arc<ExportCounters>,
) {
    let meter = provider.meter("otelprof");
    let s = source.clone();
    crate::memory_metrics::register(&meter, Arc::new(move || s().memory));
    register_sampler_instruments(&meter, source);
    register_export_instruments(&meter, export);
}

/// A counter of what `read` returns at each collection.
fn counter(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    read: impl Fn() -> u64 + Send + Sync + 'static,
) {
    meter
        .u64_observable_counter(name)
        .with_description(description)
        .with_unit(unit)
        .with_callback(move |o| o.observe(read(), &[]))
        .build();
}

/// A counter with one series per value of attribute `key`: what `read` returns at each
/// collection, `(value, count)` pairs.
fn counter_by<I>(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    key: &'static str,
    read: impl Fn() -> I + Send + Sync + 'static,
) where
    I: IntoIterator<Item = (&'static str, u64)>,
{
    meter
        .u64_observable_counter(name)
        .with_description(description)
        .with_unit(unit)
        .with_callback(move |o| {
            for (value, n) in read() {
                o.observe(n, &[KeyValue::new(key, value)]);
            }
        })
        .build();
}

/// The sampler's instruments: samples, the CPU time they stand for, drops and failed walks
/// by reason, truncated stacks, samples with a span, and the CPU utilization they show.
fn register_sampler_instruments(meter: &Meter, source: CounterSource) {
    let s = source.clone();
    counter(
        meter,
        names::SAMPLES,
        "Signals that produced a CPU sample",
        "{sample}",
        move || s().samples,
    );
    let s = source.clone();
    meter
        .f64_observable_counter(names::SAMPLED_CPU)
        .with_description("CPU time the samples stand for (intervals x sampling interval)")
        .with_unit("s")
        .with_callback(move |o| {
            let c = s();
            o.observe(c.sampled_intervals as f64 * c.interval.as_secs_f64(), &[])
        })
        .build();
    let s = source.clone();
    counter_by(
        meter,
        names::DROPPED,
        "Samples the agent could not record, by reason",
        "{sample}",
        "reason",
        move || s().dropped,
    );
    let s = source.clone();
    counter_by(
        meter,
        names::FAILED_WALKS,
        "Stack walks that failed (recorded as pseudo-frames), by reason",
        "{sample}",
        "reason",
        move || s().failed_walks,
    );
    let s = source.clone();
    counter(
        meter,
        names::CPU_WALKS,
        "CPU stack walks taken (each stands for one or more sampling intervals)",
        "{walk}",
        move || s().cpu_walks,
    );
    let s = source.clone();
    counter(
        meter,
        names::TRUNCATED,
        "Stacks cut at the depth limit",
        "{sample}",
        move || s().truncated,
    );
    let s = source.clone();
    counter(
        meter,
        names::WITH_SPAN,
        "Samples taken while the thread worked for a span",
        "{sample}",
        move || s().samples_with_span,
    );
    register_cpu_utilization(meter, source);
}

/// CPU seen by the sampler per second of wall time since the previous collection, in cores
/// (1.0 = one core busy): the rate users compare with their CPU metrics.
fn register_cpu_utilization(meter: &Meter, source: CounterSource) {
    let last: Mutex<Option<(u64, Instant)>> = Mutex::new(None);
    meter
        .f64_observable_gauge(names::CPU_UTILIZATION)
        .with_description("CPU used by the profiled threads as seen by the sampler, in cores")
        .with_unit("1")
        .with_callback(move |o| {
            let c = source();
            let now = Instant::now();
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((intervals, at)) = *last {
                let wall = now.duration_since(at).as_secs_f64();
                if wall > 0.0 {
                    let cpu = c.sampled_intervals.saturating_sub(intervals) as f64
                        * c.interval.as_secs_f64();
                    o.observe(cpu / wall, &[]);
                }
            }
            *last = Some((c.sampled_intervals, now));
        })
        .build();
}

/// The exporter's instruments: requests sent, failures by what happened next, bytes
/// accepted, profiles dropped by reason, and the queue's size.
fn register_export_instruments(meter: &Meter, export: Arc<ExportCounters>) {
    let e = export.clone();
    counter(
        meter,
        names::EXPORT_ATTEMPTS,
        "Profile export requests sent",
        "{request}",
        move || e.attempts(),
    );
    let e = export.clone();
    counter_by(
        meter,
        names::EXPORT_FAILURES,
        "Profile export requests that failed, by what happened next",
        "{request}",
        "disposition",
        move || e.failures(),
    );
    let e = export.clone();
    counter(
        meter,
        names::EXPORT_BYTES,
        "Encoded profile bytes accepted by the receiver (before compression)",
        "By",
        move || e.bytes_sent(),
    );
    let e = export.clone();
    counter_by(
        meter,
        names::EXPORT_DROPPED,
        "Profiles dropped before delivery, by reason",
        "{profile}",
        "reason",
        move || e.dropped(),
    );
    let e = export;
    meter
        .u64_observable_gauge(names::QUEUE_BYTES)
        .with_description("Encoded profile bytes waiting to be sent")
        .with_unit("By")
        .with_callback(move |o| o.observe(e.queued_bytes(), &[]))
        .build();
}
