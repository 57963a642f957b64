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
//! # Written at ingest, compacted later
//!
//! [`ColumnarWriter::write`] takes the profiles of one decoded request (as the receiver holds
//! them once it has checked the request) and writes, per partition the request touches, one
//! samples file and one stacks file with the stacks that partition has not stored yet. The
//! writer remembers the stack ids of the partitions it wrote to recently (reading them back
//! from the partition's stacks files after a restart), so a stack is written once per
//! partition; a reader keeps the first row of an id anyway. Files are written under `.tmp/`,
//! fsynced and renamed into place like the OTLP files ([`crate::Store`]), stacks before
//! samples, so a reader never sees a sample whose stack is missing.
//!
//! [`compact`] rewrites an hour once it is over (no profile starts in it any more after
//! `period` + the export retry window, its `grace` argument): its samples files into one
//! (`samples-compacted-*`, profile after profile, since the reader rebuilds a profile from
//! consecutive rows), its stacks files into one (`stacks-compacted-*`), and a **rollup**
//! (`rollup-*`) beside them, crash-safe as [`compact`]'s module says (footers name the files
//! replaced; one rename swaps the rows).
//!
//! The rollup has the samples schema. It **keeps** the resource (service, version, instance,
//! ...), the profile type and its values, every sample attribute (`span_name`, thread pool,
//! thread name, `local_root_span_id`: all the labels the views group and filter by), and the
//! stack; values are summed per (resource, type header, attributes, stack) over the hour, as
//! one profile per resource and type spanning the hour's profiles. It **drops** trace and
//! span ids, sample timestamps and each profile's own start: a question with a trace or span,
//! with per-span statistics, or whose time range cuts an hour reads that hour's sample rows.
//! Types whose observations are sample rows (no count value) keep their rows apart so counts
//! stay exact. `profiles_used`/`profiles_seen` then count rollup profiles. A rollup is used
//! only while the hour's sole live samples file is the compacted file it was made from (a late
//! request makes the hour answer from rows until it is compacted again).
//!
//! # How a question is answered
//!
//! [`ColumnarSource`] lists the partition directories (names only), keeps those of the
//! selection's services and hours, and in each reads the stacks once and the samples files in
//! row groups. It rebuilds each stored profile (its dictionary shared by every profile of the
//! file, as an OTLP request's is) and hands it to the same visitors the OTLP reader feeds:
//! [`crate::Merger`] gives the same [`crate::Merged`] table, by construction, for any type,
//! time range, attribute terms, trace/span and group-by key (a test compares the two).
//!
//! - **1 h window**: one or two hour partitions per service (the hour before is read when the
//!   window starts within a profile period of its end): ~1.2 M sample rows for 10 JVMs, read
//!   and merged with no protobuf, no gzip, and each stack resolved once per file instead of once
//!   per request.
//! - **24 h window**: with [`ColumnarSource::use_rollups`], every compacted hour wholly inside
//!   the window and with no trace or span condition is answered from its rollup, only the edge
//!   hours from samples. Without compaction a day reads every samples row (~29 M for the
//!   benchmark store). Not measured yet (NOTES-store.md says what to measure).
//!
//! What to measure (on a quiet machine, not while another build runs): `cargo run --release
//! --example bench_store -- --out /tmp/fleet` to generate the store (OTLP and columnar), then
//! time `otelprof top` on `/tmp/fleet/profiles` (OTLP) against the columnar reader for
//! `--from` 1 h and for the day, cold (`echo 3 > /proc/sys/vm/drop_caches`) and warm, with
//! `/usr/bin/time -v` for peak memory; `du -sb` of `profiles/` and `columnar/` for the size;
//! ingest rate as requests written per second by [`ColumnarWriter::write`] on the generated
//! requests.
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
//! The OTLP requests stay the receiver's durable record (replayable into any backend), and
//! [`convert`] writes the columnar form of a store of OTLP files (or of any files a
//! [`crate::Source`] reads). A reader given a store reads `columnar/` when it exists, else the
//! OTLP files as before.
//!
//! # Why the `parquet` crate, and without Arrow
//!
//! Writing Parquet by hand (Thrift compact footers, page headers, RLE/bit-packed levels) is a
//! format implementation of its own to keep conformant with every engine; the `parquet` crate
//! is the reference Rust one. Its Arrow integration (and arrow-* crates, several minutes of
//! compile on this 2-core machine) is not needed: the low-level column writers and readers
//! take plain vectors of values and levels, which is all a row of a sample is. Default
//! features are off; only `snap` (pure Rust snappy) is on, so no C library (zstd, lz4) is
//! built. A cold debug build of this crate with all its dependencies, parquet included, took
//! 35 s here (parquet alone was not timed apart; measure it with `cargo build --timings`).

pub mod compact;
pub mod read;
pub mod retention;
pub mod schema;
pub mod write;

pub use compact::compact;
pub use read::ColumnarSource;
pub use retention::retain;
pub use write::{convert, ColumnarWriter};

/// The columnar store's directory in a store.
pub const DIR: &str = "columnar";
