//! The local profile store and its query engine, shared by every reading command of the CLI
//! and by the web UI, so that they give one answer.
//!
//! - [`layout`]: where things are in a store directory; [`Store`] writes requests there
//!   durably; [`bucket`]: the same store in object storage (`s3://`, `gs://`, `az://`),
//!   maintained by one of its writers at a time ([`shared`]).
//! - [`Source`]: the profiles a command reads (store directories, agent output, OTLP and pprof
//!   files), decoded on all cores, a bad file skipped and reported, never hiding the others.
//! - [`select`]: which samples count ([`Selector`]: attributes, trace and span, time, type);
//!   [`merge`]: the selected samples of many profiles as one table of stacks ([`Merged`]).
//! - [`columnar`]: the same profiles as Parquet partitioned by service and hour, converted from
//!   the received requests in the background and read without decoding every request (and
//!   by DuckDB, Spark, Trino).
//! - [`StoreSource`]: what a command reads from paths: the columnar store of a store
//!   directory, files otherwise; [`maintain`] compacts, expires and converts a store.
//! - [`query`]: merges made in as few passes as possible, and the computations behind `top`,
//!   `diff`, `drilldown` and flame graphs.
#![forbid(unsafe_code)]

pub mod bucket;
pub mod cache;
pub mod columnar;
mod error;
pub mod focus;
pub mod layout;
pub mod linked;
pub mod maintain;
pub mod merge;
mod parallel;
pub mod query;
mod reader;
pub mod select;
pub mod shared;
mod stored;
mod time;
mod walk;
mod writer;

pub use error::{chain, ColumnarFileError, Error, FileError, OtlpFileError};
pub use layout::Signal;
pub use merge::{Merged, Merger};
pub use reader::{Decoded, Profiles, SkipReporter, Source};
pub use select::{ProfileType, Selector};
pub use stored::StoreSource;
pub use time::{format_time, now_unix_nanos, parse_time, TimeError};
pub use writer::Store;
