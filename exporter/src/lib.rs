//! Where finished profiles go: OTLP over gRPC or HTTP ([`OtlpExporter`]), and pprof files
//! ([`PprofFileSink`]).
//!
//! Module map: [`config`] (the `OTEL_EXPORTER_OTLP_*` variables and agent options),
//! [`queue`] (the byte-bounded queue), [`retry`] (failure classification and backoff),
//! [`transport`] (the two transports), [`otlp_exporter`] (the export thread),
//! [`self_metrics`] (the agent's own OTLP metrics), [`pprof_file_sink`] (pprof files).

pub mod config;
pub mod error;
pub mod export_counters;
pub mod export_thread;
pub mod logger;
pub mod otlp_exporter;
pub mod pprof_file_sink;
pub mod profile_ids;
pub mod queue;
pub mod retry;
pub mod self_metrics;
pub mod transport;

pub use config::{AgentOtlpOptions, Compression, ConfigError, OtlpConfig, Protocol};
pub use error::{ExportError, StartError, SubmitError};
pub use export_counters::ExportStats;
pub use logger::{LogLevel, Logger};
pub use otlp_exporter::{ExporterSettings, OtlpExporter, ShutdownReport};
pub use pprof_file_sink::{utc_stamp, PprofFileSink};
pub use self_metrics::{AgentCounters, CounterSource};
