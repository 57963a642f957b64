//! Reading profiles: `otelprof receive` store directories, directories of agent output, OTLP
//! files (`*.otlp.pb`, `*.otlp.pb.gz`) and pprof files (`*.pb.gz`, `*.pb`, `*.pprof`).
//!
//! A [`Source`] is the set of files named by the paths a command was given. Every pass over it
//! ([`scan`]) decodes the files again on all cores and hands each profile to the caller, who
//! folds it into its own state: memory does not grow with the store. A file that cannot be
//! read or decoded is reported (once per source) with its reason, and the others are still
//! used: one corrupt file must not hide an hour of data.
//!
//! Only regular files are read, and at most [`MAX_FILE_BYTES`] of each: a FIFO, socket or
//! device (given by name, found in a directory, or swapped in after it was listed) is refused
//! without being read, and a file that is huge or keeps growing stops at the limit. Every pass
//! reads the files again, which a pipe could not support anyway.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use opentelemetry::KeyValue;
use otel_bridge::gzip;
use otel_bridge::Profile;

use crate::error::{Error, FileError, OtlpFileError};
use crate::layout::{is_hidden, is_metrics_file};
use crate::parallel;
use crate::walk::{special_kind, walk};

/// The most of one file a reader reads: the size an OTLP request may inflate to
/// ([`gzip::MAX_INFLATED_BYTES`]). No profile file the receiver or the agent writes comes
/// near it, and a gzip file is smaller than what it inflates to.
pub const MAX_FILE_BYTES: u64 = gzip::MAX_INFLATED_BYTES as u64;

/// One decoded profile and the resource it came with (empty for pprof, which has none).
#[derive(Debug)]
pub struct Decoded {
    pub resource: Vec<KeyValue>,
    pub profile: Profile,
}

/// Told about every path that is skipped, once per [`Source`].
pub type SkipReporter = Box<dyn Fn(&Path, &FileError) + Send + Sync>;

/// What the query engine reads profiles from: files ([`Source`]) or the columnar store
/// ([`crate::columnar::ColumnarSource`]). Every pass hands each profile, with its resource, to
/// `visit` with a worker's own state, and returns the states for the caller to combine.
pub trait Profiles: Sync {
    fn scan<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded) + Sync,
    ) -> Result<Vec<S>, Error>;

    /// pprof files among those read in the last pass (they carry no resource attributes).
    fn pprof_files(&self) -> usize {
        0
    }
}

impl Profiles for Source {
    fn scan<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded) + Sync,
    ) -> Result<Vec<S>, Error> {
        Source::scan(self, init, visit)
    }

    fn pprof_files(&self) -> usize {
        Source::pprof_files(self)
    }
}

/// The files a reading command reads.
pub struct Source {
    pub files: Vec<PathBuf>,
    report: SkipReporter,
    reported: Mutex<BTreeSet<PathBuf>>,
    pprof_files: AtomicUsize,
}

impl Source {
    /// The profile files under `paths`; `report` hears of every path skipped, now and in later
    /// passes. Fails when nothing at all can be read.
    pub fn open(paths: &[PathBuf], report: SkipReporter) -> Result<Source, Error> {
        let (files, failures) = discover(paths);
        for (path, err) in &failures {
            report(path, err);
        }
        if files.is_empty() {
            return Err(Error::NothingReadable);
        }
        Ok(Source {
            files,
            report,
            reported: Mutex::new(BTreeSet::new()),
            pprof_files: AtomicUsize::new(0),
        })
    }

    /// A source of the given files, found already (by [`discover`]).
    pub fn from_files(files: Vec<PathBuf>, report: SkipReporter) -> Source {
        Source {
            files,
            report,
            reported: Mutex::new(BTreeSet::new()),
            pprof_files: AtomicUsize::new(0),
        }
    }

    /// pprof files among those read in the last pass (they carry no resource attributes).
    pub fn pprof_files(&self) -> usize {
        self.pprof_files.load(Ordering::Relaxed)
    }

    /// Decodes every file on all cores and hands each profile to `visit` with the worker's own
    /// state (made by `init`); returns the states, to be combined by the caller. Profiles are
    /// dropped as soon as they are visited.
    pub fn scan<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        visit: impl Fn(&mut S, &Decoded) + Sync,
    ) -> Result<Vec<S>, Error> {
        let (states, stats) = scan(&self.files, init, visit);
        self.pprof_files.store(stats.pprof_files, Ordering::Relaxed);
        if let Ok(mut reported) = self.reported.lock() {
            for (path, err) in &stats.failures {
                if reported.insert(path.clone()) {
                    (self.report)(path, err);
                }
            }
        }
        if stats.profiles == 0 {
            if stats.files > 0 {
                return Err(Error::OnlyEmptyRequests);
            }
            return Err(Error::NothingReadable);
        }
        Ok(states)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Otlp,
    Pprof,
    /// Not known from the name: try OTLP, then pprof.
    Unknown,
}

fn format_of(name: &OsStr) -> Option<Format> {
    if is_hidden(name) || is_metrics_file(name) {
        return None;
    }
    let ends = |suffixes: &[&str]| {
        suffixes
            .iter()
            .any(|s| name.as_bytes().ends_with(s.as_bytes()))
    };
    if ends(&[".otlp.pb", ".otlp.pb.gz", ".otlp"]) {
        Some(Format::Otlp)
    } else if ends(&[".pb.gz", ".pb", ".pprof"]) {
        Some(Format::Pprof)
    } else {
        None
    }
}

fn path_format(path: &Path) -> Option<Format> {
    format_of(path.file_name()?)
}

/// Every profile file under `paths`: regular files as given (any name), directories searched
/// recursively for profile file names (hidden entries, such as the store's `.tmp`, skipped).
/// A path that is neither (a FIFO, a device) is reported, never opened.
pub fn discover(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, FileError)>) {
    let mut files = Vec::new();
    let mut failures = Vec::new();
    for path in paths {
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                failures.push((path.clone(), FileError::Missing));
                continue;
            }
            Err(e) => {
                failures.push((path.clone(), FileError::Read(e)));
                continue;
            }
        };
        if meta.is_dir() {
            let found = walk(path, |name| format_of(name).is_some());
            if found.files.is_empty() && found.failures.is_empty() {
                failures.push((path.clone(), FileError::NoProfiles));
            }
            files.extend(found.files);
            failures.extend(found.failures);
        } else if let Some(kind) = special_kind(&meta.file_type()) {
            failures.push((path.clone(), FileError::NotAFile(kind)));
        } else {
            files.push(path.clone());
        }
    }
    (files, failures)
}

/// Reads the regular file at `path` into `buf` (emptied first), at most `limit` bytes.
///
/// The file is opened non-blocking and checked once open (`fstat`), so a FIFO put in its
/// place after it was listed fails at once instead of blocking the reader; a file larger than
/// `limit`, or growing past it while being read, is refused with [`FileError::TooLarge`].
pub fn read_bounded(path: &Path, buf: &mut Vec<u8>, limit: u64) -> Result<(), FileError> {
    buf.clear();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        // No effect on regular files; makes opening a FIFO return at once.
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(FileError::Read)?;
    let meta = file.metadata().map_err(FileError::Read)?;
    if let Some(kind) = special_kind(&meta.file_type()) {
        return Err(FileError::NotAFile(kind));
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge { limit });
    }
    buf.try_reserve(usize::try_from(meta.len()).unwrap_or(usize::MAX))
        .map_err(|_| FileError::Read(std::io::ErrorKind::OutOfMemory.into()))?;
    // One byte past the limit tells a file that grew past it from one that ends there.
    (&mut file)
        .take(limit.saturating_add(1))
        .read_to_end(buf)
        .map_err(FileError::Read)?;
    if buf.len() as u64 > limit {
        buf.clear();
        return Err(FileError::TooLarge { limit });
    }
    Ok(())
}

/// A file's profiles, and whether it was pprof.
type FileResult = Result<(Vec<Decoded>, bool), FileError>;

/// Decodes one file into its profiles, reading it into `buf`: a worker that reuses one buffer
/// for every file does not fault in fresh pages for each (the decoded profiles own copies of
/// what they keep).
pub fn decode_file(path: &Path, buf: &mut Vec<u8>) -> FileResult {
    read_bounded(path, buf, MAX_FILE_BYTES)?;
    let bytes = &buf[..];
    let otlp = |bytes: &[u8]| -> Result<Vec<Decoded>, OtlpFileError> {
        let raw = gzip::inflate_bounded(bytes, gzip::MAX_INFLATED_BYTES)?;
        Ok(otel_bridge::otlp::decode(&raw)?
            .into_iter()
            .map(|(resource, profile)| Decoded { resource, profile })
            .collect())
    };
    let pprof = |bytes: &[u8]| {
        otel_bridge::pprof::decode(bytes).map(|profile| {
            vec![Decoded {
                resource: Vec::new(),
                profile,
            }]
        })
    };
    match path_format(path).unwrap_or(Format::Unknown) {
        Format::Otlp => otlp(bytes).map(|d| (d, false)).map_err(FileError::NotOtlp),
        Format::Pprof => pprof(bytes).map(|d| (d, true)).map_err(FileError::NotPprof),
        Format::Unknown => match otlp(bytes) {
            Ok(d) if !d.is_empty() => Ok((d, false)),
            _ => pprof(bytes).map(|d| (d, true)).map_err(FileError::Neither),
        },
    }
}

/// What a [`scan`] went through.
#[derive(Debug, Default)]
pub struct ScanStats {
    pub files: usize,
    pub pprof_files: usize,
    pub profiles: usize,
    pub failures: Vec<(PathBuf, FileError)>,
}

/// Decodes every file on all cores and hands each profile to `visit` with the worker's own
/// state (made by `init`); returns the states, to be combined by the caller, and what was
/// read. Profiles are dropped as soon as they are visited, so memory does not grow with the
/// store.
pub fn scan<S: Send>(
    files: &[PathBuf],
    init: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, &Decoded) + Sync,
) -> (Vec<S>, ScanStats) {
    let workers = parallel::for_each(
        files,
        || (init(), ScanStats::default(), Vec::new()),
        |(state, local, buf), path| match decode_file(path, buf) {
            Ok((profiles, is_pprof)) => {
                local.files += 1;
                local.pprof_files += usize::from(is_pprof);
                local.profiles += profiles.len();
                for d in &profiles {
                    visit(state, d);
                }
            }
            Err(e) => local.failures.push((path.clone(), e)),
        },
    );
    let mut stats = ScanStats::default();
    let states = workers
        .into_iter()
        .map(|(state, local, _)| {
            stats.files += local.files;
            stats.pprof_files += local.pprof_files;
            stats.profiles += local.profiles;
            stats.failures.extend(local.failures);
            state
        })
        .collect();
    stats.failures.sort_by(|a, b| a.0.cmp(&b.0));
    (states, stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::chain;
    use otel_bridge::otlp::{EncodeOptions, ProfileId};
    use otel_bridge::{FrameKind, ProfileBuilder};

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("otelprof-src-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn profile() -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10,
        );
        let f = b.function("a.B.c", "B.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        b.add_sample(&[l], &[], &[7, 70]);
        b.build(0, 10)
    }

    #[test]
    fn reads_otlp_and_pprof_and_reports_bad_files() {
        let dir = scratch_dir("mixed");
        let sub = dir.join("profiles/2025-01-01");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(dir.join(".tmp")).unwrap();
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_attribute(KeyValue::new("service.name", "shop"))
            .build();
        let otlp = otel_bridge::otlp::encode_to_vec(
            &profile(),
            &resource,
            ProfileId::from_random([1; 16]),
            &EncodeOptions::default(),
        )
        .unwrap();
        std::fs::write(sub.join("1-1.otlp.pb"), &otlp).unwrap();
        std::fs::write(dir.join(".tmp/2-2.otlp.pb"), &otlp).unwrap();
        std::fs::write(
            dir.join("cpu.pb.gz"),
            otel_bridge::pprof::encode_gzip(&profile()),
        )
        .unwrap();
        std::fs::write(dir.join("broken.otlp.pb.gz"), [0x1f, 0x8b, 0, 1]).unwrap();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        let unnamed = dir.join("unnamed.bin");
        std::fs::write(&unnamed, &otlp).unwrap();

        let (files, mut failures) = discover(&[dir.clone(), unnamed, dir.join("missing")]);
        let (profiles, stats) = scan(&files, Vec::new, |all, d| {
            all.push(!d.resource.is_empty());
        });
        failures.extend(stats.failures);
        assert_eq!(stats.files, 3);
        assert_eq!(stats.pprof_files, 1);
        let with_resource: Vec<bool> = profiles.into_iter().flatten().collect();
        assert_eq!(with_resource.len(), 3);
        assert_eq!(with_resource.iter().filter(|r| **r).count(), 2);
        let failed: Vec<String> = failures
            .iter()
            .map(|(p, e)| format!("{}: {}", p.file_name().unwrap().to_string_lossy(), chain(e)))
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].starts_with("missing: no such file"), "{failed:?}");
        assert!(
            failed[1].starts_with("broken.otlp.pb.gz: not OTLP profiles"),
            "{failed:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_regular_files_are_read_and_only_so_much() {
        let dir = scratch_dir("special");
        let fifo = dir.join("given.otlp.pb");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let latin1 = dir.join(OsStr::from_bytes(b"caf\xe9.pb.gz"));
        std::fs::write(&latin1, otel_bridge::pprof::encode_gzip(&profile())).unwrap();
        // Given by name, a FIFO and a device are refused before anything opens them.
        let (files, failures) = discover(&[fifo.clone(), PathBuf::from("/dev/zero")]);
        assert!(files.is_empty());
        let reasons: Vec<String> = failures.iter().map(|(_, e)| e.to_string()).collect();
        assert!(
            reasons[0].starts_with("a FIFO, not a regular file"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].starts_with("a character device, not a regular file"),
            "{reasons:?}"
        );
        // Found in a directory: the FIFO is reported, the Latin-1 name read.
        let (files, failures) = discover(std::slice::from_ref(&dir));
        assert_eq!(files, std::slice::from_ref(&latin1));
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].0, fifo);
        let (_, stats) = scan(&files, || (), |_, _| {});
        assert_eq!((stats.files, stats.profiles), (1, 1));
        // Reading straight at a FIFO (one swapped in after listing) fails at once.
        let mut buf = Vec::new();
        assert!(matches!(
            read_bounded(&fifo, &mut buf, 1 << 20),
            Err(FileError::NotAFile("a FIFO"))
        ));
        // Too large by its size, and too large by what it yields (procfs files have size 0).
        assert!(matches!(
            read_bounded(&latin1, &mut buf, 10),
            Err(FileError::TooLarge { limit: 10 })
        ));
        let e = read_bounded(Path::new("/proc/self/maps"), &mut buf, 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "larger than 10 bytes, the most a profile file is read"
        );
        assert!(buf.is_empty());
        read_bounded(&latin1, &mut buf, 1 << 20).unwrap();
        assert_eq!(buf.len() as u64, std::fs::metadata(&latin1).unwrap().len());
        assert_eq!(
            FileError::TooLarge {
                limit: MAX_FILE_BYTES
            }
            .to_string(),
            "larger than 512 MiB, the most a profile file is read"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_source_reports_each_skipped_file_once() {
        let dir = scratch_dir("once");
        std::fs::write(
            dir.join("a.pb.gz"),
            otel_bridge::pprof::encode_gzip(&profile()),
        )
        .unwrap();
        std::fs::write(dir.join("b.pb.gz"), b"not gzip").unwrap();
        let heard = std::sync::Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        let source = Source::open(
            &[dir.clone(), dir.join("missing")],
            Box::new(move |p, e| {
                if let Ok(mut l) = log.lock() {
                    l.push(format!("{}: {e}", p.file_name().unwrap().to_string_lossy()));
                }
            }),
        )
        .unwrap();
        for _ in 0..2 {
            let states = source.scan(|| 0usize, |n, _| *n += 1).unwrap();
            assert_eq!(states.iter().sum::<usize>(), 1);
        }
        assert_eq!(source.pprof_files(), 1);
        assert_eq!(
            *heard.lock().unwrap(),
            [
                "missing: no such file or directory",
                "b.pb.gz: not a pprof profile"
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
