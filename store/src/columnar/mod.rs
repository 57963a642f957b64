//! The columnar store: the profiles a store received, as Parquet files partitioned by service
//! and hour, which the query engine reads without decoding every OTLP request, and which DuckDB,
//! Spark or Trino/Athena read as they are when a team outgrows one machine.
//!
//! # Layout
//!
//! ```text
//! STORE/columnar/service=shop/hour=2025-01-31T13/samples-<received ns>-<pid>-<seq>.parquet
//! STORE/columnar/service=shop/hour=2025-01-31T13/stacks-<received ns>-<pid>-<seq>.parquet
//! STORE/columnar/.tmp/                                              writes in progress
//! ```
//!
//! Directories are Hive partitions (`key=value`), so `read_parquet('STORE/columnar/*/*/samples-*.parquet',
//! hive_partitioning = true)` gives `service` and `hour` columns, and a query on them reads only
//! the directories it names. The hour is the UTC hour in which a profile *starts* (not when it
//! was received): a time range selects directories by name. A service name is kept as it is
//! unless it holds a byte outside `[A-Za-z0-9._-]`, which is percent-encoded (`/`, `=` and `..`
//! never reach a path).
//!
//! Two tables ([`schema`] has both, column by column):
//!
//! - **samples**: one row per sample of every profile, flat: profile id, start and duration,
//!   profile type, the type's amount (`value`: nanoseconds, bytes, delay) and observations
//!   (`count`), every sample type's value (`values`), the resource and the sample attributes as
//!   two `MAP<STRING, STRING>`, `span_name`, `trace_id` and `span_id` (hex), `stack_id`, and the
//!   sample's timestamps when the agent sent them. Columns repeat per profile (resource, times,
//!   types) and per request (stacks), which Parquet's dictionary and run-length encodings store
//!   in a few bits a row.
//! - **stacks**: one row per distinct stack of the partition: `stack_id` (a 64-bit FNV-1a hash
//!   of the frames, so that every writer and every engine gets the same id without
//!   coordination), and `function`, `file`, `line`, three lists leaf first. Top functions in SQL
//!   are a join on `stack_id` and `function[1]` (DuckDB lists are 1-based).
//!
//! Stacks are stored once per partition, where the OTLP requests repeat a stack's locations,
//! functions and strings in every request (one a minute per JVM): that is where the columnar
//! form wins its size.
//!
//! # Converted in the background, compacted once an hour is over
//!
//! The receiver writes OTLP files only (cheap and durable before the acknowledgement);
//! [`crate::maintain`] converts the requests received in each closed 10-minute chunk of
//! receipt time with [`ColumnarWriter::write_as`]: per partition the chunk touches, one
//! samples file (profiles ordered by start, in row groups of at most 65,536 rows cut at a
//! profile's end) and one stacks file with the stacks that partition has not stored yet. The
//! files are named after the marker they wait for (`samples-w<W>-…`), and the marker
//! `.converted-until` ([`commit`]) is the single commit point: readers skip a conversion's
//! files past it and read the raw requests received at or after it instead. The writer
//! remembers the stack ids of the partitions it wrote to recently (reading them back from the
//! partition's stacks files), so a stack is written once per partition; a reader keeps the
//! first row of an id anyway. Files are written under `.tmp/`, fsynced and renamed into place
//! like the OTLP files ([`crate::Store`]), stacks before samples, so a reader never sees a
//! sample whose stack is missing.
//!
//! [`compact`] rewrites an hour once the conversion has passed its end by `grace` (the
//! agents' period and their export retry window, after which no profile starts in it any
//! more): its samples files into one (`samples-compacted-*`, profile after profile, ordered by
//! type and start, in row groups as above), its stacks files into one (`stacks-compacted-*`),
//! and a **rollup** (`rollup-*`) beside them, crash-safe as [`compact`]'s module says
//! (footers name the files replaced; one rename swaps the rows).
//!
//! The rollup has the samples schema. It **keeps** the resource (service, version, instance,
//! ...), the profile type and its values, the sample attributes the views group and filter
//! by (`span_name`, `thread.pool`, ...), and the stack; values are summed per (resource, type
//! header, attributes, stack) over the hour, as one profile per resource and type spanning
//! the hour's profiles. It **drops** trace and span ids, sample timestamps, each profile's own
//! start, and the attributes with a value per thread or per request (`thread.name`,
//! `thread.id`, `local_root_span_id`: [`schema::DROPPED_LABELS`]), which would keep a row per
//! thread apart; a thread's name leaves its pool (`thread.pool`) behind. A question with a
//! trace or span, with per-span statistics, with one of those attributes, or whose time range
//! cuts an hour reads that hour's sample rows. Types whose observations are sample rows (no
//! count value) keep their rows apart so counts stay exact. Each rollup profile says in the
//! footer how many profiles it adds up (all, and those with samples), so `profiles_seen` and
//! `profiles_used` are those of the rows. A rollup is used only while the hour's sole live
//! samples file is the compacted file it was made from (a late request makes the hour answer
//! from rows until it is compacted again).
//!
//! Beside it, compaction writes the hour's **series** (`series-*`, samples schema too): each
//! profile as it came (its own resource, type, start and duration, so the time semantics and
//! `profiles_used` stay those of the rows), with its samples added up per attribute set
//! (the same attributes dropped), their stacks dropped (a thread role's one-frame stack kept,
//! which names the group of a sample without a span), no trace links, and timestamps
//! gathered into 10-second ticks (a sample's values shared out among its ticks in
//! proportion). It answers what needs no stack: the timeline (group sums per time bucket,
//! any attribute terms, any group-by key), the values present and the instances: on the
//! fleet-day store, 48 rows a profile where its sample rows are 1,899. A time cut is exact at
//! tick boundaries, otherwise within a tick. Used on the rollup's condition (the hour's only
//! samples file is the one it was made from).
//!
//! The hour's **slot rollup** (`slots-*`) is its rollup cut in ten 6-minute slots (by each
//! profile's start): one profile per resource, type and slot, each slot profile's window and
//! counts in the footer. A question whose time range cuts an hour is answered from the slot
//! profiles it covers whole (or leaves whole), and from the sample rows of the other slots'
//! profiles only; slices of whole slots (a diff's noise estimate of a 1 h side) come from it
//! alone ([`ColumnarSource::use_slots`]).
//!
//! The hour's **spans** (`spans-*`) are its series with the trace links kept: a linked
//! sample's row is its span's (per attribute set), its timestamps reduced to the first and
//! the last. They answer per-span statistics without stacks, the list of traces, with any
//! trace or span condition, in a row per span instead of a row per sample. Their table is
//! [`schema::SPANS`]: the samples table with the trace link as three integers (`trace_hi`,
//! `trace_lo`, `span_bits`; `trace_id` and `span_id` null), which reads far faster than hex
//! text. Footers carry the
//! version of what derived files keep (`otelprof.derived`): files of another version are not
//! read, and the next compaction pass writes them again.
//!
//! # How a question is answered
//!
//! [`ColumnarSource`] lists the partition directories (names only) and keeps those of the
//! selection's services and hours. On all cores it reads each kept partition's stacks (once,
//! interned into one dictionary that every row group of the partition starts from) and the
//! footers of its samples files, keeping the row groups whose `time`/`duration` statistics
//! can meet the time window; then, on all cores again, it reads those row groups one by one
//! and rebuilds their profiles, a profile's header (resource, types, times) read once per
//! profile rather than per row, and hands each profile to the same visitors the OTLP reader
//! feeds: [`crate::Merger`] gives the same [`crate::Merged`] table, by construction, for any
//! type, time range, attribute terms, trace/span and group-by key (a test compares the two).
//! Memory holds one row group's columns per core, not the hour.
//!
//! - **1 h window**: the row groups of one or two hour partitions per service.
//! - **Whole hours**: with [`ColumnarSource::use_rollups`], every compacted hour wholly inside
//!   the window and with no trace or span condition is answered from its rollup; the edge
//!   hours from their slot rollups for the slots inside the window, and from sample rows for
//!   the slot the window's edge cuts.
//! - **No stacks needed** (timeline, pickers, instances): with [`ColumnarSource::use_series`],
//!   every compacted hour from its series, whatever the window.
//! - **Spans without stacks** (the list of traces): with [`ColumnarSource::use_spans`], every
//!   compacted hour from its spans; [`ColumnarSource::scan_hour_linked`] reads them (and any
//!   sample rows) without making a sample of each linked row (`linked`), and without stacks.
//!
//! `bench/store_scale.py` measures both on the fleet-day store of `examples/bench_store.rs`
//! (figures in `BENCHMARKS.md`).
//!
//! # Size
//!
//! Expected well under the OTLP received: a sample row costs its `stack_id` (dictionary index,
//! ~11 bits for 2,000 stacks), values (delta-friendly, snappy), and attribute map entries that
//! repeat per profile and compress to run lengths; stacks are stored per partition, not per
//! request. The generator prints both sizes.
//!
//! # Retention
//!
//! [`retain`] deletes whole hour partitions whose hour ended before `now - retention`
//! (`--retention 7d`): a directory rename out of the tree, then its removal, so a reader sees a
//! partition whole or not at all. No file is ever rewritten to expire data.
//!
//! # Existing OTLP stores
//!
//! A store of OTLP files only (written before the columnar store existed, or by a receiver
//! that has not converted yet) is read as files; a receiver started on it converts it a chunk
//! at a time, oldest first ([`crate::maintain`]). [`convert`] writes the columnar form of any
//! files a [`crate::Source`] reads.
//!
//! # Why the `parquet` crate, and without Arrow
//!
//! Writing Parquet by hand (Thrift compact footers, page headers, RLE/bit-packed levels) is a
//! format implementation of its own to keep conformant with every engine; the `parquet` crate
//! is the reference Rust one. Its Arrow integration (and the arrow-* crates, several minutes
//! of compile on two cores) is not needed: the low-level column writers and readers
//! take plain vectors of values and levels, which is all a row of a sample is. Default
//! features are off; only `snap` (pure Rust snappy) is on, so no C library (zstd, lz4) is
//! built. A cold debug build of this crate with all its dependencies, parquet included, took
//! 35 s on two cores (parquet alone was not timed apart; measure it with
//! `cargo build --timings`).

pub mod commit;
pub mod compact;
mod linked;
pub mod read;
pub mod retention;
pub mod schema;
pub mod write;

pub use commit::{commit_until, conversion_stem, converted_until};
pub use compact::compact;
pub use read::{warm_stacks, ColumnarSource};
pub use retention::retain;
pub use write::{convert, ColumnarWriter};

/// The columnar store's directory in a store.
pub const DIR: &str = "columnar";
