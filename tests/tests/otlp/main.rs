//! OTLP out of a real JVM into independent receivers of the official classes, the JVM's
//! memory figures among the agent's metrics, the Collector configurations that carry it, and
//! what Grafana Pyroscope makes of it.

mod collector_config;
mod export;
mod memory_metrics;
mod pyroscope;
mod traces_to_profiles;
