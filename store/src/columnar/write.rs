//! Writing the columnar store: the profiles of decoded requests (a conversion chunk), as samples and
//! stacks files of the partitions (service, hour) they fall in. See the module docs of
//! [`crate::columnar`] for the layout.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry::KeyValue;
use otel_bridge::model::{LabelValue, Profile, Sample, StackId, ValueType};
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use rustc_hash::{FxHashMap, FxHashSet};

use super::schema::{self, Frame};
use crate::error::Error;
use crate::merge::UNKNOWN_FRAME;
use crate::reader::{decode_file, discover};
use crate::select::{resource_value, Measure, ProfileType, ValueIndex};

/// Partitions whose stack ids the writer keeps in memory; past this it forgets them all
/// (and reads a partition's ids back from its files when it writes there again).
const REMEMBERED_PARTITIONS: usize = 256;

/// A partition: service and hour directory names.
type PartitionKey = (String, String);

/// Writes decoded requests into `STORE/columnar`; safe to share between receiver threads.
#[derive(Debug)]
pub struct ColumnarWriter {
    root: PathBuf,
    seq: AtomicU64,
    /// Stack ids stored per partition; one lock per partition, held while its stacks file is
    /// written so that two requests never both store (or both skip) a new stack.
    known: Mutex<FxHashMap<PartitionKey, Arc<Mutex<FxHashSet<i64>>>>>,
}

impl ColumnarWriter {
    /// Opens (creating) `store/columnar` and removes writes a crash left in its `.tmp/`.
    pub fn open(store: &Path) -> Result<ColumnarWriter, Error> {
        let root = store.join(super::DIR);
        let tmp = root.join(crate::layout::TMP);
        std::fs::create_dir_all(&tmp).map_err(Error::io("create the columnar store", &root))?;
        for entry in std::fs::read_dir(&tmp).map_err(Error::io("list", &tmp))? {
            let entry = entry.map_err(Error::io("list", &tmp))?;
            let _ = std::fs::remove_file(entry.path());
        }
        Ok(ColumnarWriter {
            root,
            seq: AtomicU64::new(0),
            known: Mutex::new(FxHashMap::default()),
        })
    }

    /// The directory the partitions are in (`STORE/columnar`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes the profiles of one request (each with its resource), received at `now` (Unix
    /// ns), durably; returns the files written. Stacks go before the samples that use them.
    pub fn write(
        &self,
        profiles: &[(Vec<KeyValue>, Profile)],
        now: i64,
    ) -> Result<Vec<PathBuf>, Error> {
        self.write_as(profiles, now, None)
    }

    /// [`ColumnarWriter::write`], naming the files after `stem` when given: the receiver
    /// passes the name of the OTLP file the request is kept in, so a file says which request
    /// it came from, and writing one request twice (a conversion run again after a crash)
    /// replaces the files of the first write instead of adding rows beside them (and a
    /// compacted hour's footer, which names the files it replaced, hides them).
    pub fn write_as(
        &self,
        profiles: &[(Vec<KeyValue>, Profile)],
        now: i64,
        stem: Option<&str>,
    ) -> Result<Vec<PathBuf>, Error> {
        let mut partitions: BTreeMap<PartitionKey, Vec<usize>> = BTreeMap::new();
        for (i, (resource, profile)) in profiles.iter().enumerate() {
            let service = resource_value(resource, "service.name").unwrap_or_default();
            let key = (
                schema::service_dir(&service),
                schema::hour_dir(profile.time_nanos),
            );
            partitions.entry(key).or_default().push(i);
        }
        let mut written = Vec::new();
        for (key, members) in partitions {
            let stem = match stem {
                Some(stem) => stem.to_owned(),
                None => {
                    let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                    format!("{now}-{:05}-{seq:06}", std::process::id() % 100_000)
                }
            };
            let dir = self.root.join(&key.0).join(&key.1);
            if !dir.is_dir() {
                std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
                crate::writer::sync_dir(&self.root.join(&key.0))?;
                crate::writer::sync_dir(&self.root)?;
            }
            // Profiles by start time, so that a reader's window skips whole row groups.
            let mut members = members;
            members.sort_by_key(|&i| profiles.get(i).map(|(_, p)| p.time_nanos));
            let samples_path = dir.join(format!("samples-{stem}.parquet"));
            let mut stacks: FxHashMap<i64, Vec<Frame>> = FxHashMap::default();
            let samples_tmp = write_tmp(&self.root, &samples_path, |file| {
                let mut out = SamplesFile::new(file, Vec::new())?;
                for (n, &i) in members.iter().enumerate() {
                    let Some((resource, profile)) = profiles.get(i) else {
                        continue;
                    };
                    let id = schema::stack_id([(stem.as_str(), key.1.as_str(), n as i64)]);
                    out.add_profile(id, resource, profile, &mut stacks)?;
                }
                out.finish()
            })?;
            let known = self.known_stacks(&key, &dir)?;
            {
                let mut known = known.lock().map_err(|_| poisoned(&dir))?;
                let mut new: Vec<(i64, Vec<Frame>)> = stacks
                    .into_iter()
                    .filter(|(id, _)| !known.contains(id))
                    .collect();
                if !new.is_empty() {
                    new.sort_by_key(|(id, _)| *id);
                    let path = dir.join(format!("stacks-{stem}.parquet"));
                    put_file(&self.root, &path, |file| {
                        write_stacks(file, &new, Vec::new())
                    })?;
                    known.extend(new.iter().map(|(id, _)| *id));
                    written.push(path);
                }
            }
            publish(&samples_tmp, &samples_path)?;
            written.push(samples_path);
        }
        Ok(written)
    }

    /// The stack ids partition `key` holds, read from its files the first time it is met.
    fn known_stacks(
        &self,
        key: &PartitionKey,
        dir: &Path,
    ) -> Result<Arc<Mutex<FxHashSet<i64>>>, Error> {
        let mut known = self.known.lock().map_err(|_| poisoned(dir))?;
        if let Some(set) = known.get(key) {
            return Ok(set.clone());
        }
        if known.len() >= REMEMBERED_PARTITIONS {
            known.clear();
        }
        // A stacks file that cannot be read is left out: its stacks are written again, and
        // the reader keeps the first row of an id.
        let ids = super::read::stacks::stack_ids_in(dir);
        let set = Arc::new(Mutex::new(ids));
        known.insert(key.clone(), set.clone());
        Ok(set)
    }
}

/// Writes a file under `root/.tmp/` with `fill`, syncs it, and renames it to `path`, whose
/// directory is then synced: a reader sees the whole file or none.
pub(super) fn put_file(
    root: &Path,
    path: &Path,
    fill: impl FnOnce(File) -> Result<File, parquet::errors::ParquetError>,
) -> Result<(), Error> {
    let tmp = write_tmp(root, path, fill)?;
    publish(&tmp, path)
}

/// Writes the file that will be `path` under `root/.tmp/` with `fill` and syncs it; returns
/// where it is ([`publish`] moves it into place).
fn write_tmp(
    root: &Path,
    path: &Path,
    fill: impl FnOnce(File) -> Result<File, parquet::errors::ParquetError>,
) -> Result<PathBuf, Error> {
    let name = path.file_name().unwrap_or_default();
    let tmp = root.join(crate::layout::TMP).join(name);
    let file = File::create(&tmp).map_err(Error::io("create", &tmp))?;
    let done = fill(file)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|f| f.sync_all());
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("write", &tmp)(e));
    }
    Ok(tmp)
}

/// Renames the written `tmp` to `path` and syncs its directory.
fn publish(tmp: &Path, path: &Path) -> Result<(), Error> {
    if let Err(e) = std::fs::rename(tmp, path) {
        let _ = std::fs::remove_file(tmp);
        return Err(Error::io("move into", path)(e));
    }
    match path.parent() {
        Some(dir) => crate::writer::sync_dir(dir),
        None => Ok(()),
    }
}

fn poisoned(dir: &Path) -> Error {
    Error::io("lock the stack index of", dir)(std::io::Error::other("a writer thread panicked"))
}

/// Converts the OTLP files (or any files a [`crate::Source`] reads) under `paths` into the
/// columnar store of `writer`, one written request per file read; returns the files read and
/// those skipped with their reason.
pub fn convert(
    paths: &[PathBuf],
    writer: &ColumnarWriter,
    now: i64,
) -> Result<(usize, Vec<(PathBuf, crate::FileError)>), Error> {
    let (files, mut skipped) = discover(paths);
    let mut buf = Vec::new();
    let mut read = 0;
    for path in files {
        match decode_file(&path, &mut buf) {
            Ok((decoded, _)) => {
                let profiles: Vec<(Vec<KeyValue>, Profile)> = decoded
                    .into_iter()
                    .map(|d| (d.resource, d.profile))
                    .collect();
                writer.write(&profiles, now)?;
                read += 1;
            }
            Err(e) => skipped.push((path, e)),
        }
    }
    Ok((read, skipped))
}

/// The frames of `stack` of `profile`, leaf first, as the merger names them.
fn frames_of(profile: &Profile, stack: StackId) -> Vec<Frame> {
    let mut frames = Vec::new();
    for loc in profile.stack(stack) {
        let Some(location) = profile.location(*loc) else {
            frames.push(Frame {
                function: UNKNOWN_FRAME.to_owned(),
                file: String::new(),
                line: 0,
            });
            continue;
        };
        if location.lines.is_empty() {
            let function = if location.address == 0 {
                UNKNOWN_FRAME.to_owned()
            } else {
                format!("{:#x}", location.address)
            };
            frames.push(Frame {
                function,
                file: String::new(),
                line: 0,
            });
            continue;
        }
        for line in &location.lines {
            let f = profile.function(line.function);
            frames.push(Frame {
                function: f.map(|f| profile.str(f.name)).unwrap_or("").to_owned(),
                file: profile.frame_file(location, f).to_owned(),
                line: line.line,
            });
        }
    }
    frames
}

/// `type/unit` with the separators percent-encoded, so that any name survives.
fn type_text(profile: &Profile, vt: &ValueType) -> String {
    let enc = |s: &str| {
        s.replace('%', "%25")
            .replace(',', "%2C")
            .replace('/', "%2F")
    };
    format!("{}/{}", enc(profile.str(vt.ty)), enc(profile.str(vt.unit)))
}

/// A column of Parquet levels and values (levels empty for a required top-level column).
#[derive(Default)]
struct Levels {
    def: Vec<i16>,
    rep: Vec<i16>,
}

impl Levels {
    /// Levels of one list (or map) of `n` entries: required group, repeated, required leaf.
    fn list(&mut self, n: usize) {
        if n == 0 {
            self.def.push(0);
            self.rep.push(0);
            return;
        }
        for i in 0..n {
            self.def.push(1);
            self.rep.push(i16::from(i > 0));
        }
    }
}

/// The samples table of one file, column by column.
#[derive(Default)]
pub(super) struct SampleRows {
    profile: Vec<i64>,
    time: Vec<i64>,
    duration: Vec<i64>,
    ty: Vec<ByteArray>,
    sample_types: Vec<ByteArray>,
    period_type: Vec<ByteArray>,
    period: Vec<i64>,
    value: (Vec<i64>, Vec<i16>),
    count: (Vec<i64>, Vec<i16>),
    values: (Vec<i64>, Levels),
    resource: (Vec<ByteArray>, Vec<ByteArray>, Levels),
    attributes: (Vec<ByteArray>, Vec<ByteArray>, Levels),
    span_name: (Vec<ByteArray>, Vec<i16>),
    trace_id: (Vec<ByteArray>, Vec<i16>),
    span_id: (Vec<ByteArray>, Vec<i16>),
    stack_id: Vec<i64>,
    timestamps: (Vec<i64>, Levels),
    /// With [`schema::SPANS`]: the links as integers ([`schema::link_bits`]), and no text.
    link_bits: Option<[(Vec<i64>, Vec<i16>); 3]>,
}

fn optional<T>(column: &mut (Vec<T>, Vec<i16>), value: Option<T>) {
    match value {
        Some(v) => {
            column.0.push(v);
            column.1.push(1);
        }
        None => column.1.push(0),
    }
}

/// What every row of one profile repeats, worked out once per profile.
struct RowHeader {
    id: i64,
    ty: Option<ProfileType>,
    amount: Option<ValueIndex>,
    count: Option<ValueIndex>,
    sample_types: String,
    period_type: String,
    resource: Vec<(String, String)>,
}

impl RowHeader {
    fn of(id: i64, resource: &[KeyValue], profile: &Profile) -> RowHeader {
        let ty = ProfileType::of(profile).or_else(|| {
            [ProfileType::Alloc, ProfileType::Lock]
                .into_iter()
                .find(|t| t.value_index(profile, Measure::Count).is_some())
        });
        RowHeader {
            id,
            ty,
            amount: ty.and_then(|t| t.value_index(profile, Measure::Amount)),
            count: ty.and_then(|t| t.value_index(profile, Measure::Count)),
            sample_types: profile
                .sample_types
                .iter()
                .map(|vt| type_text(profile, vt))
                .collect::<Vec<_>>()
                .join(","),
            period_type: type_text(profile, &profile.period_type),
            resource: resource
                .iter()
                .map(|kv| (kv.key.as_str().to_owned(), kv.value.to_string()))
                .collect(),
        }
    }
}

impl SampleRows {
    /// Rows of the [`schema::SPANS`] table.
    fn spans() -> SampleRows {
        SampleRows {
            link_bits: Some(Default::default()),
            ..SampleRows::default()
        }
    }

    pub(super) fn add_profile(
        &mut self,
        id: i64,
        resource: &[KeyValue],
        profile: &Profile,
        stacks: &mut FxHashMap<i64, Vec<Frame>>,
    ) {
        let header = RowHeader::of(id, resource, profile);
        // Stack ids of this profile's dictionary, each computed once.
        let mut ids: FxHashMap<u32, i64> = FxHashMap::default();
        // A profile without samples still counts as seen: one row with no values and stack
        // id 0 stands for it (the reader makes no sample of it; SQL sees a null value).
        let placeholder = otel_bridge::model::Sample::default();
        let samples = if profile.samples.is_empty() {
            std::slice::from_ref(&placeholder)
        } else {
            profile.samples.as_slice()
        };
        for sample in samples {
            self.push_header(&header, profile);
            self.push_values(&header, sample);
            self.push_labels(profile, sample);
            self.push_link(sample);
            if profile.samples.is_empty() {
                self.stack_id.push(0);
                self.timestamps.1.list(0);
                continue;
            }
            let stack_id = *ids.entry(sample.stack.0).or_insert_with(|| {
                let frames = frames_of(profile, sample.stack);
                let id = schema::stack_id(
                    frames
                        .iter()
                        .map(|f| (f.function.as_str(), f.file.as_str(), f.line)),
                );
                stacks.entry(id).or_insert(frames);
                id
            });
            self.stack_id.push(stack_id);
            self.timestamps.0.extend_from_slice(&sample.timestamps);
            self.timestamps.1.list(sample.timestamps.len());
        }
    }

    /// The columns that repeat the profile's header on each of its rows.
    fn push_header(&mut self, h: &RowHeader, profile: &Profile) {
        self.profile.push(h.id);
        self.time.push(profile.time_nanos);
        self.duration.push(profile.duration_nanos);
        self.ty
            .push(ByteArray::from(h.ty.map_or("other", ProfileType::name)));
        self.sample_types
            .push(ByteArray::from(h.sample_types.as_str()));
        self.period_type
            .push(ByteArray::from(h.period_type.as_str()));
        self.period.push(profile.period);
        for (k, v) in &h.resource {
            self.resource.0.push(ByteArray::from(k.as_str()));
            self.resource.1.push(ByteArray::from(v.as_str()));
        }
        self.resource.2.list(h.resource.len());
    }

    /// The sample's values: every one, and the type's amount and count apart.
    fn push_values(&mut self, h: &RowHeader, sample: &Sample) {
        optional(
            &mut self.value,
            h.amount.and_then(|v| sample.values.get(v.value).copied()),
        );
        optional(
            &mut self.count,
            h.count.and_then(|v| sample.values.get(v.value).copied()),
        );
        self.values.0.extend_from_slice(&sample.values);
        self.values.1.list(sample.values.len());
    }

    /// The sample's attributes, and its `span_name` in a column of its own.
    fn push_labels(&mut self, profile: &Profile, sample: &Sample) {
        let mut span_name = None;
        for label in &sample.labels {
            let key = profile.str(label.key);
            let value = match label.value {
                LabelValue::Str(s) => profile.str(s).to_owned(),
                LabelValue::Num { value, .. } => value.to_string(),
            };
            if key == "span_name" && span_name.is_none() {
                span_name = Some(ByteArray::from(value.as_str()));
            }
            self.attributes.0.push(ByteArray::from(key));
            self.attributes.1.push(ByteArray::from(value.into_bytes()));
        }
        self.attributes.2.list(sample.labels.len());
        optional(&mut self.span_name, span_name);
    }

    /// The sample's trace link: as integers in a spans file, as hex text otherwise.
    fn push_link(&mut self, sample: &Sample) {
        if let Some([hi, lo, span]) = &mut self.link_bits {
            let bits = sample.link.as_ref().map(schema::link_bits);
            optional(hi, bits.map(|b| b.0));
            optional(lo, bits.map(|b| b.1));
            optional(span, bits.map(|b| b.2));
            optional(&mut self.trace_id, None);
            optional(&mut self.span_id, None);
        } else {
            optional(
                &mut self.trace_id,
                sample
                    .link
                    .map(|l| ByteArray::from(l.trace_id_hex().into_bytes())),
            );
            optional(
                &mut self.span_id,
                sample
                    .link
                    .map(|l| ByteArray::from(l.span_id_hex().into_bytes())),
            );
        }
    }

    /// Rows held.
    pub(super) fn len(&self) -> usize {
        self.profile.len()
    }

    /// Writes the rows as the next row group of `w`.
    fn write_group(
        &self,
        w: &mut SerializedFileWriter<File>,
    ) -> Result<(), parquet::errors::ParquetError> {
        let mut rg = w.next_row_group()?;
        let mut i = 0;
        while let Some(mut col) = rg.next_column()? {
            match i {
                0 => i64s(&mut col, &self.profile, None, None)?,
                1 => i64s(&mut col, &self.time, None, None)?,
                2 => i64s(&mut col, &self.duration, None, None)?,
                3 => bytes(&mut col, &self.ty, None, None)?,
                4 => bytes(&mut col, &self.sample_types, None, None)?,
                5 => bytes(&mut col, &self.period_type, None, None)?,
                6 => i64s(&mut col, &self.period, None, None)?,
                7 => i64s(&mut col, &self.value.0, Some(&self.value.1), None)?,
                8 => i64s(&mut col, &self.count.0, Some(&self.count.1), None)?,
                9 => {
                    let (v, l) = &self.values;
                    i64s(&mut col, v, Some(&l.def), Some(&l.rep))?
                }
                10 | 11 => {
                    let (k, v, l) = &self.resource;
                    bytes(
                        &mut col,
                        if i == 10 { k } else { v },
                        Some(&l.def),
                        Some(&l.rep),
                    )?
                }
                12 | 13 => {
                    let (k, v, l) = &self.attributes;
                    bytes(
                        &mut col,
                        if i == 12 { k } else { v },
                        Some(&l.def),
                        Some(&l.rep),
                    )?
                }
                14 => bytes(&mut col, &self.span_name.0, Some(&self.span_name.1), None)?,
                15 => bytes(&mut col, &self.trace_id.0, Some(&self.trace_id.1), None)?,
                16 => bytes(&mut col, &self.span_id.0, Some(&self.span_id.1), None)?,
                17 => i64s(&mut col, &self.stack_id, None, None)?,
                18 => {
                    let (v, l) = &self.timestamps;
                    i64s(&mut col, v, Some(&l.def), Some(&l.rep))?
                }
                n => {
                    let Some((v, def)) = self.link_bits.as_ref().and_then(|b| b.get(n - 19)) else {
                        return Err(parquet::errors::ParquetError::General(format!(
                            "no values for column {n}"
                        )));
                    };
                    i64s(&mut col, v, Some(def), None)?
                }
            }
            col.close()?;
            i += 1;
        }
        rg.close()?;
        Ok(())
    }
}

/// Rows of a samples row group at most, cut at a profile's end: a reader skips the groups whose
/// times miss its window (their min/max statistics), reads the others on all cores, and never
/// holds more than a group's columns at once.
pub(super) const ROW_GROUP_ROWS: usize = 65_536;

/// A samples file written a row group at a time: profiles are added whole, and a group is
/// written once it holds [`ROW_GROUP_ROWS`] rows, so that no profile spans two groups.
pub(super) struct SamplesFile {
    writer: SerializedFileWriter<File>,
    rows: SampleRows,
    /// The links as integers ([`schema::SPANS`]).
    spans: bool,
}

impl SamplesFile {
    pub(super) fn new(
        file: File,
        meta: Vec<Meta>,
    ) -> Result<SamplesFile, parquet::errors::ParquetError> {
        Ok(SamplesFile {
            writer: table_writer(file, schema::SAMPLES, meta)?,
            rows: SampleRows::default(),
            spans: false,
        })
    }

    /// A file of the [`schema::SPANS`] table.
    pub(super) fn spans(
        file: File,
        meta: Vec<Meta>,
    ) -> Result<SamplesFile, parquet::errors::ParquetError> {
        Ok(SamplesFile {
            writer: table_writer(file, schema::SPANS, meta)?,
            rows: SampleRows::spans(),
            spans: true,
        })
    }

    /// Adds one profile (see [`SampleRows::add_profile`]).
    pub(super) fn add_profile(
        &mut self,
        id: i64,
        resource: &[KeyValue],
        profile: &Profile,
        stacks: &mut FxHashMap<i64, Vec<Frame>>,
    ) -> Result<(), parquet::errors::ParquetError> {
        self.rows.add_profile(id, resource, profile, stacks);
        if self.rows.len() >= ROW_GROUP_ROWS {
            self.rows.write_group(&mut self.writer)?;
            self.rows = if self.spans {
                SampleRows::spans()
            } else {
                SampleRows::default()
            };
        }
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<File, parquet::errors::ParquetError> {
        if self.rows.len() > 0 {
            self.rows.write_group(&mut self.writer)?;
        }
        self.writer.into_inner()
    }
}

pub(super) fn write_stacks(
    file: File,
    stacks: &[(i64, Vec<Frame>)],
    meta: Vec<Meta>,
) -> Result<File, parquet::errors::ParquetError> {
    let mut ids = Vec::with_capacity(stacks.len());
    let mut functions = Vec::new();
    let mut files = Vec::new();
    let mut lines = Vec::new();
    let mut levels = Levels::default();
    for (id, frames) in stacks {
        ids.push(*id);
        for f in frames {
            functions.push(ByteArray::from(f.function.as_str()));
            files.push(ByteArray::from(f.file.as_str()));
            lines.push(f.line);
        }
        levels.list(frames.len());
    }
    let mut w = table_writer(file, schema::STACKS, meta)?;
    let mut rg = w.next_row_group()?;
    let mut i = 0;
    let (def, rep) = (Some(levels.def.as_slice()), Some(levels.rep.as_slice()));
    while let Some(mut col) = rg.next_column()? {
        match i {
            0 => i64s(&mut col, &ids, None, None)?,
            1 => bytes(&mut col, &functions, def, rep)?,
            2 => bytes(&mut col, &files, def, rep)?,
            _ => i64s(&mut col, &lines, def, rep)?,
        }
        col.close()?;
        i += 1;
    }
    rg.close()?;
    w.into_inner()
}

/// A key-value pair of a Parquet file's footer (what compaction records, [`super::compact`]).
pub(super) type Meta = parquet::file::metadata::KeyValue;

fn table_writer(
    file: File,
    message: &str,
    meta: Vec<Meta>,
) -> Result<SerializedFileWriter<File>, parquet::errors::ParquetError> {
    let schema = Arc::new(parse_message_type(message)?);
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("otelprof {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata((!meta.is_empty()).then_some(meta))
        .build();
    SerializedFileWriter::new(file, schema, Arc::new(props))
}

fn i64s(
    col: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    values: &[i64],
    def: Option<&[i16]>,
    rep: Option<&[i16]>,
) -> Result<(), parquet::errors::ParquetError> {
    col.typed::<Int64Type>().write_batch(values, def, rep)?;
    Ok(())
}

fn bytes(
    col: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    values: &[ByteArray],
    def: Option<&[i16]>,
    rep: Option<&[i16]>,
) -> Result<(), parquet::errors::ParquetError> {
    col.typed::<ByteArrayType>().write_batch(values, def, rep)?;
    Ok(())
}
