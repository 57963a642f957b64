//! The exporter's log sink: it speaks rarely, and the agent decides where the lines go.

use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Warn,
    Info,
    Debug,
}

/// Where the exporter's few log lines go (the agent prints them as `otelprof: …`).
pub type Logger = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;
