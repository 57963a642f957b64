//! OTLP out of a real JVM into independent receivers of the official classes, and the
//! Collector configurations that carry it.

mod collector_config;
mod export;
