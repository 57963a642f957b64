//! Where finished profiles go: OTLP over gRPC or HTTP ([`OtlpExporter`]), and pprof files
//! ([`PprofFileSink`]).
//!
//! Module map, from the leaves (modules that import none of their siblings) up; no module
//! imports one that imports it back:
//! - leaves: [`config`] (the `OTEL_EXPORTER_OTLP_*` variables and agent options), `queue`
//!   (the byte-bounded queue of encoded requests), `retry` (the pure failure classification
//!   and the backoff), `logger` (where the few log lines go), `profile_ids`,
//!   `pprof_file_sink` (pprof files, no network) and `failure_log` (a repeated failure told
//!   once, then counted);
//! - `error` (one enum per operation; reads `retry`), `export_counters` (what the exporter
//!   did, with the queue it counts around);
//! - `transport/`: OTLP/gRPC and OTLP/HTTP behind one `Transport`, the HTTP client and gRPC
//!   channel they share with the metrics exporter, and `Sent`, the (leaf) answer both return;
//! - `memory_metrics` (the JVM's memory figures as OTLP metrics) and `self_metrics` (the
//!   agent's own OTLP metrics, which registers both);
//! - `export_thread` (the thread that drains the queue), then `otlp_exporter` (the handle
//!   the agent holds).
//!
//! The modules are private; what the agent uses is re-exported here, and the HTTP client
//! too, which the OpAMP client (the opamp crate) rides.

#![forbid(unsafe_code)]

/// Public: the variable names ([`config::env`]) and defaults are part of the interface.
pub mod config;
mod error;
mod export_counters;
mod export_thread;
mod failure_log;
mod logger;
mod memory_metrics;
mod otlp_exporter;
mod pprof_file_sink;
mod profile_ids;
mod queue;
mod retry;
mod self_metrics;
mod transport;

pub use config::{describe, AgentOtlpOptions, Compression, ConfigError, OtlpConfig, Protocol};
pub use error::{ExportError, StartError, SubmitError};
pub use export_counters::{ExportCounters, ExportStats};
pub use failure_log::FailureLog;
pub use logger::{LogLevel, Logger};
pub use memory_metrics::{names as memory_metric_names, LiveFigures, MemoryFigures};
pub use otlp_exporter::{ExporterSettings, OtlpExporter, ShutdownReport};
pub use pprof_file_sink::{utc_stamp, PprofFileSink};
pub use self_metrics::{names as metric_names, AgentCounters, CounterSource};
pub use transport::HttpClient;
