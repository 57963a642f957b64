//! The store's errors, by what the caller does next: [`Error`] stops the command, a
//! [`FileError`] skips one file and the others are still read (one corrupt file must not hide
//! an hour of data).

use std::path::{Path, PathBuf};

/// The store, or everything a reader was given, cannot be used: stop and say why.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot {what} {}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{url} is not a store URL: {why}")]
    BadUrl { url: String, why: String },
    #[error("cannot {what} {object}")]
    Bucket {
        what: &'static str,
        object: String,
        #[source]
        source: object_store::Error,
    },
    #[error("another process maintains {} already", .0.display())]
    Busy(PathBuf),
    #[error("another writer took the store's maintenance lease before this pass could commit")]
    LeaseLost,
    #[error("no profile could be read")]
    NothingReadable,
    #[error("the files hold no profiles (empty requests only)")]
    OnlyEmptyRequests,
    /// Compaction stops at a file it cannot read rather than drop its rows.
    #[error("cannot compact {}: the file is unreadable", path.display())]
    Uncompactable {
        path: PathBuf,
        #[source]
        source: ColumnarFileError,
    },
}

impl Error {
    /// `map_err` for an I/O failure: "cannot `what` `path`: cause".
    pub(crate) fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_path_buf();
        move |source| Error::Io { what, path, source }
    }
}

/// Why one path given to a reader was skipped.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("no such file or directory")]
    Missing,
    #[error("no profiles here (looked for *.otlp.pb.gz, *.otlp.pb, *.pb.gz, *.pb)")]
    NoProfiles,
    #[error("cannot list")]
    List(#[source] std::io::Error),
    #[error("already read through another path (a symbolic link leads back to it)")]
    SeenBefore,
    #[error("cannot read")]
    Read(#[source] std::io::Error),
    #[error("{0}, not a regular file: never opened (profiles are read from regular files)")]
    NotAFile(&'static str),
    #[error("larger than {}, the most a profile file is read", limit_text(*.limit))]
    TooLarge { limit: u64 },
    #[error("not OTLP profiles")]
    NotOtlp(#[source] OtlpFileError),
    #[error("not a pprof profile")]
    NotPprof(#[source] otel_bridge::pprof::DecodeError),
    #[error("neither OTLP profiles nor pprof")]
    Neither(#[source] otel_bridge::pprof::DecodeError),
    #[error("not a file of the columnar store")]
    Columnar(#[source] ColumnarFileError),
}

/// `512 MiB`, or bytes when the limit is not a whole number of MiB.
fn limit_text(limit: u64) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

/// Why a file read as OTLP is not.
#[derive(Debug, thiserror::Error)]
pub enum OtlpFileError {
    #[error(transparent)]
    Inflate(#[from] otel_bridge::gzip::InflateError),
    #[error(transparent)]
    Decode(#[from] otel_bridge::otlp::DecodeError),
}

/// An error and its causes on one line, `outer: inner: innermost`, as people read them.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Why a file of the columnar store (Parquet) was skipped.
#[derive(Debug, thiserror::Error)]
pub enum ColumnarFileError {
    #[error("cannot read")]
    Read(#[source] std::io::Error),
    #[error("not a regular file")]
    NotAFile,
    #[error(
        "larger than {}, the most a profile file is read",
        limit_text(otel_bridge::gzip::MAX_INFLATED_BYTES as u64)
    )]
    TooLarge,
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("malformed Parquet (the decoder gave up)")]
    Malformed,
    #[error("no column {0}")]
    MissingColumn(String),
    #[error("column {0} is not of the schema's type")]
    ColumnType(String),
    #[error("column {0} has fewer values than rows")]
    ShortColumn(String),
    #[error("column {0} has levels the schema does not allow")]
    BadLevels(String),
    #[error("more rows, values or frames than a reader takes")]
    TooManyValues,
    #[error("a string is not UTF-8")]
    NotUtf8,
}
