//! Reading the columnar store: the partitions a selection can touch, their stacks once, and
//! their samples files as the profiles they came from, handed to the same visitors as the
//! OTLP reader's ([`crate::Source::scan`]), so that every query gives the same answer.
//!
//! - [`source`]: [`ColumnarSource`], what answers a question in each partition and the scan
//!   on all cores;
//! - [`partitions`]: the hour partitions and the files in one; [`live`]: which of those
//!   files count (compaction's replacements, rollups, series, spans, slot rollups);
//! - [`row_groups`]: the row groups a question reads, planned by their statistics, and
//!   reading one; [`rows`]: profiles rebuilt from sample rows;
//! - [`stacks`]: a partition's stacks, and the per-process cache of them;
//! - [`dictionary`]: the tables the profiles of one file share; [`columns`]: Parquet
//!   columns read within bounds.
//!
//! Outside input: a Parquet file may be corrupt or hostile. Every file is read within
//! [`MAX_FILE_BYTES`], a row group within [`MAX_ROWS`] rows and [`MAX_VALUES`] values per
//! column, levels are checked against the schema before use, a column of another type is an
//! error, and a panic inside the `parquet` crate on a malformed file is caught and reported as
//! that file's error: one bad file is skipped with its reason and never hides the others.

pub(crate) mod columns;
pub(crate) mod dictionary;
pub(crate) mod live;
pub(crate) mod partitions;
pub(crate) mod row_groups;
pub(crate) mod rows;
pub(crate) mod source;
pub(crate) mod stacks;

pub use columns::{MAX_FILE_BYTES, MAX_FRAMES, MAX_ROWS, MAX_VALUES};
pub use partitions::Partition;
pub use source::ColumnarSource;
pub use stacks::warm_stacks;
