//! Reading the columns of a Parquet file within bounds: every file within
//! [`MAX_FILE_BYTES`], a row group within [`MAX_ROWS`] rows and [`MAX_VALUES`] values per
//! column, levels checked against the schema before use, a column of another type an error,
//! and a panic of the `parquet` crate on a malformed file caught as that file's error
//! ([`guarded`]).

use std::fs::File;
use std::path::Path;

use parquet::data_type::ByteArray;
use parquet::file::reader::{RowGroupReader, SerializedFileReader};

use crate::error::ColumnarFileError;

/// The most of one columnar file read, as for OTLP files.
pub const MAX_FILE_BYTES: u64 = crate::reader::MAX_FILE_BYTES;

/// Rows of one row group read at most (an hour's compacted samples of a large fleet fit).
pub const MAX_ROWS: usize = 50_000_000;

/// Values of one column of one row group read at most (lists included).
pub const MAX_VALUES: usize = 200_000_000;

/// Frames of one stack kept at most (the OTLP decoder's limit).
pub const MAX_FRAMES: usize = 16_384;

/// Runs a file's decoding, turning a panic of the `parquet` crate on malformed input into
/// that file's error (the release profile unwinds; see the workspace `Cargo.toml`).
pub(super) fn guarded<T>(
    read: impl FnOnce() -> Result<T, ColumnarFileError>,
) -> Result<T, ColumnarFileError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
        .unwrap_or(Err(ColumnarFileError::Malformed))
}

pub(in crate::columnar) fn open(
    path: &Path,
) -> Result<SerializedFileReader<File>, ColumnarFileError> {
    let file = File::open(path).map_err(ColumnarFileError::Read)?;
    let meta = file.metadata().map_err(ColumnarFileError::Read)?;
    if !meta.is_file() {
        return Err(ColumnarFileError::NotAFile);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ColumnarFileError::TooLarge);
    }
    Ok(SerializedFileReader::new(file)?)
}

/// One leaf column of a row group: values, and definition and repetition levels.
pub(in crate::columnar) struct Column<T> {
    pub(in crate::columnar) values: Vec<T>,
    pub(super) def: Vec<i16>,
    pub(super) rep: Vec<i16>,
}

/// Index of the leaf column at `path` in a row group.
pub(super) fn column_index(
    rg: &dyn RowGroupReader,
    path: &str,
) -> Result<usize, ColumnarFileError> {
    rg.metadata()
        .columns()
        .iter()
        .position(|c| c.column_path().string() == path)
        .ok_or_else(|| ColumnarFileError::MissingColumn(path.to_owned()))
}

/// The reader of the column at `path`, of the physical type `$variant`, and an empty
/// [`Column`] to read it into.
macro_rules! typed_reader {
    ($rg:expr, $path:expr, $variant:ident) => {{
        let i = $crate::columnar::read::columns::column_index($rg, $path)?;
        let parquet::column::reader::ColumnReader::$variant(reader) = $rg.get_column_reader(i)?
        else {
            return Err($crate::error::ColumnarFileError::ColumnType(
                $path.to_owned(),
            ));
        };
        let col = $crate::columnar::read::columns::Column {
            values: Vec::new(),
            def: Vec::new(),
            rep: Vec::new(),
        };
        (reader, col)
    }};
}

/// Refuses a column grown past [`MAX_VALUES`] values or levels.
pub(in crate::columnar) fn within_bounds<T>(col: &Column<T>) -> Result<(), ColumnarFileError> {
    if col.values.len() > MAX_VALUES || col.def.len() > MAX_VALUES {
        return Err(ColumnarFileError::TooManyValues);
    }
    Ok(())
}

/// Reads `rows` records of one column in batches, within [`MAX_VALUES`].
macro_rules! read_column {
    ($rg:expr, $path:expr, $rows:expr, $variant:ident) => {{
        let (mut reader, mut col) =
            $crate::columnar::read::columns::typed_reader!($rg, $path, $variant);
        let mut read = 0;
        while read < $rows {
            let batch = ($rows - read).min(65_536);
            let (records, _, _) = reader.read_records(
                batch,
                Some(&mut col.def),
                Some(&mut col.rep),
                &mut col.values,
            )?;
            if records == 0 {
                return Err($crate::error::ColumnarFileError::ShortColumn(
                    $path.to_owned(),
                ));
            }
            read += records;
            $crate::columnar::read::columns::within_bounds(&col)?;
        }
        col
    }};
}

/// Reads, of the column at `path`, the first record of each run of `runs` rows and skips
/// the others: the columns that repeat a profile's header on each of its rows.
macro_rules! read_runs {
    ($rg:expr, $path:expr, $runs:expr, $variant:ident) => {{
        let (mut reader, mut col) =
            $crate::columnar::read::columns::typed_reader!($rg, $path, $variant);
        for &run in $runs {
            let (records, _, _) =
                reader.read_records(1, Some(&mut col.def), Some(&mut col.rep), &mut col.values)?;
            if records != 1 || (run > 1 && reader.skip_records(run - 1)? != run - 1) {
                return Err($crate::error::ColumnarFileError::ShortColumn(
                    $path.to_owned(),
                ));
            }
            $crate::columnar::read::columns::within_bounds(&col)?;
        }
        col
    }};
}

/// The value of each profile of a required column: [`read_runs`], checked to hold one value a
/// run.
macro_rules! required_runs {
    ($rg:expr, $path:expr, $runs:expr, $variant:ident) => {{
        let col = $crate::columnar::read::columns::read_runs!($rg, $path, $runs, $variant);
        if col.values.len() != $runs.len() {
            return Err($crate::error::ColumnarFileError::ShortColumn(
                $path.to_owned(),
            ));
        }
        col.values
    }};
}

/// The `i64` column at `path`, required: one value a row.
pub(super) fn required_i64(
    rg: &dyn RowGroupReader,
    path: &str,
    rows: usize,
) -> Result<Vec<i64>, ColumnarFileError> {
    let col = read_column!(rg, path, rows, Int64ColumnReader);
    if col.values.len() != rows {
        return Err(ColumnarFileError::ShortColumn(path.to_owned()));
    }
    Ok(col.values)
}

/// An optional top-level column: per row, the index of its value or `None`.
pub(super) fn optional_text(
    rg: &dyn RowGroupReader,
    path: &str,
    rows: usize,
) -> Result<(Vec<ByteArray>, Vec<Option<usize>>), ColumnarFileError> {
    let col = read_column!(rg, path, rows, ByteArrayColumnReader);
    let index = optional_index(&col.def, col.values.len(), rows, path)?;
    Ok((col.values, index))
}

/// An optional top-level `i64` column: per row, the index of its value or `None`.
pub(super) fn optional_i64(
    rg: &dyn RowGroupReader,
    path: &str,
    rows: usize,
) -> Result<(Vec<i64>, Vec<Option<usize>>), ColumnarFileError> {
    let col = read_column!(rg, path, rows, Int64ColumnReader);
    let index = optional_index(&col.def, col.values.len(), rows, path)?;
    Ok((col.values, index))
}

fn optional_index(
    def: &[i16],
    values: usize,
    rows: usize,
    path: &str,
) -> Result<Vec<Option<usize>>, ColumnarFileError> {
    if def.len() != rows {
        return Err(ColumnarFileError::ShortColumn(path.to_owned()));
    }
    let mut next = 0;
    let mut out = Vec::with_capacity(rows);
    for &d in def {
        if d == 1 {
            out.push(Some(next));
            next += 1;
        } else {
            out.push(None);
        }
    }
    if next != values {
        return Err(ColumnarFileError::ShortColumn(path.to_owned()));
    }
    Ok(out)
}

/// The rows of a list (or map) column as ranges of its values: `offsets[r]..offsets[r + 1]`.
pub(super) fn list_offsets<T>(
    col: &Column<T>,
    rows: usize,
    path: &str,
) -> Result<Vec<usize>, ColumnarFileError> {
    if col.def.len() != col.rep.len() {
        return Err(ColumnarFileError::BadLevels(path.to_owned()));
    }
    let mut offsets = Vec::with_capacity(rows + 1);
    let mut values = 0;
    for (&d, &r) in col.def.iter().zip(&col.rep) {
        if r == 0 {
            offsets.push(values);
        }
        if d == 1 {
            values += 1;
        } else if d != 0 || r != 0 {
            return Err(ColumnarFileError::BadLevels(path.to_owned()));
        }
    }
    offsets.push(values);
    if offsets.len() != rows + 1 || values != col.values.len() {
        return Err(ColumnarFileError::BadLevels(path.to_owned()));
    }
    Ok(offsets)
}

pub(super) fn text(b: &ByteArray) -> Result<&str, ColumnarFileError> {
    b.as_utf8().map_err(|_| ColumnarFileError::NotUtf8)
}

pub(super) fn row_count(rg: &dyn RowGroupReader) -> Result<usize, ColumnarFileError> {
    let rows = usize::try_from(rg.metadata().num_rows()).unwrap_or(usize::MAX);
    if rows > MAX_ROWS {
        return Err(ColumnarFileError::TooManyValues);
    }
    Ok(rows)
}

pub(super) use {read_column, read_runs, required_runs, typed_reader};
