//! OTLP out of a real JVM into independent receivers of the official classes, the JVM's
//! memory figures among the agent's metrics, and the Collector configurations that carry it.

mod collector_config;
mod export;
mod memory_metrics;
