//! Where finished profiles go. For now: pprof files in a directory (OTLP transport comes with
//! the export work).

pub mod files;

pub use files::{utc_stamp, PprofFileSink};
