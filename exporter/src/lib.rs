//! Where finished profiles go: OTLP over gRPC or HTTP ([`OtlpExporter`]), and pprof files
//! ([`PprofFileSink`]).
//!
//! Module map, leaves first (no module imports one that imports it back):
//! - `queue` (the byte-bounded queue of encoded requests), `retry` (the pure failure
//!   classification and the backoff), `logger` (where the few log lines go), `profile_ids`;
//! - [`config`] (the `OTEL_EXPORTER_OTLP_*` variables and agent options), `error` (one enum
//!   per operation), `export_counters` (what the exporter did, around the queue);
//! - `transport/` (OTLP/gRPC and OTLP/HTTP behind one `Transport`, the HTTP client they
//!   share with the metrics exporter, and `Sent`, the answer both return);
//! - `self_metrics` (the agent's own OTLP metrics), `export_thread` (the thread that drains
//!   the queue), `otlp_exporter` (the handle the agent holds);
//! - `pprof_file_sink` (pprof files, no network).
//!
//! The modules are private; what the agent uses is re-exported here.

#![forbid(unsafe_code)]

/// Public: the variable names ([`config::env`]) and defaults are part of the interface.
pub mod config;
mod error;
mod export_counters;
mod export_thread;
mod logger;
/// Public only for the path the agent uses, `otlp_exporter::describe` (also
/// [`config::describe`]); everything in it is re-exported here.
pub mod otlp_exporter;
mod pprof_file_sink;
mod profile_ids;
mod queue;
mod retry;
mod self_metrics;
mod transport;

pub use config::{describe, AgentOtlpOptions, Compression, ConfigError, OtlpConfig, Protocol};
pub use error::{ExportError, StartError, SubmitError};
pub use export_counters::{ExportCounters, ExportStats};
pub use logger::{LogLevel, Logger};
pub use otlp_exporter::{ExporterSettings, OtlpExporter, ShutdownReport};
pub use pprof_file_sink::{utc_stamp, PprofFileSink};
pub use self_metrics::{names as metric_names, AgentCounters, CounterSource};
