//! The store `otelprof receive` writes: plain files in the OTLP format, one per accepted
//! request, so that anything in it can be read by `otelprof top|flame|drilldown|diff` or
//! replayed into any OTLP backend.
//!
//! ```text
//! STORE/profiles/2025-01-31/1738324800123456789-04242-000001.otlp.pb      ExportProfilesServiceRequest
//! STORE/metrics/2025-01-31/1738324800123456789-04242-000002.metrics.otlp.pb   ExportMetricsServiceRequest
//! STORE/.tmp/                                                        writes in progress
//! ```
//!
//! A file is written under `.tmp/`, `fsync`ed, renamed into place and its directory
//! `fsync`ed before the request is acknowledged: an acknowledged request survives a crash or
//! power loss, and a crash mid-write leaves only a `.tmp/` file, which readers never look at
//! and the next `receive` removes. The bytes are the request's protobuf as it arrived: a gzip
//! body sent over HTTP is kept as is (`.otlp.pb.gz`), anything else is stored uncompressed,
//! because compressing at request rate cost more CPU than checking the request (see
//! BENCHMARKS.md). The name's first number is the time of receipt in Unix nanoseconds, so
//! names sort by arrival.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;

const TMP: &str = ".tmp";
const METRICS_SUFFIX: &str = ".metrics.otlp.pb";
const PROFILES_SUFFIX: &str = ".otlp.pb";

/// Whether a file name is a stored metrics request (not a profile).
pub fn is_metrics_file(name: &str) -> bool {
    name.ends_with(METRICS_SUFFIX) || name.ends_with(".metrics.otlp.pb.gz")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Profiles,
    Metrics,
}

impl Signal {
    fn dir(self) -> &'static str {
        match self {
            Signal::Profiles => "profiles",
            Signal::Metrics => "metrics",
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Signal::Profiles => PROFILES_SUFFIX,
            Signal::Metrics => METRICS_SUFFIX,
        }
    }
}

#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    seq: AtomicU64,
}

impl Store {
    /// Opens (creating) a store and removes writes a crash left behind.
    pub fn open(root: &Path) -> anyhow::Result<Store> {
        let tmp = root.join(TMP);
        std::fs::create_dir_all(&tmp)
            .with_context(|| format!("cannot create the store {}", root.display()))?;
        for entry in
            std::fs::read_dir(&tmp).with_context(|| format!("cannot list {}", tmp.display()))?
        {
            let entry = entry.with_context(|| format!("cannot list {}", tmp.display()))?;
            let _ = std::fs::remove_file(entry.path());
        }
        // Probe now that files can be created and synced here, rather than at the first request.
        let probe = tmp.join("probe");
        File::create(&probe)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("cannot write into the store {}", root.display()))?;
        let _ = std::fs::remove_file(&probe);
        Ok(Store {
            root: root.to_path_buf(),
            seq: AtomicU64::new(0),
        })
    }

    /// Stores `gzip` (a gzip stream of one OTLP request, as a client sent it) durably.
    pub fn put_gzip(&self, signal: Signal, gzip: &[u8], now: i64) -> anyhow::Result<PathBuf> {
        self.put(signal, gzip, ".gz", now)
    }

    /// Stores `raw` (protobuf) durably, as it is: compressing at request rate would cost the
    /// receiver more CPU than checking the request, and every reader an inflate.
    pub fn put_raw(&self, signal: Signal, raw: &[u8], now: i64) -> anyhow::Result<PathBuf> {
        self.put(signal, raw, "", now)
    }

    /// Writes `bytes` under `.tmp/`, syncs it, renames it into place and syncs the directory.
    fn put(
        &self,
        signal: Signal,
        bytes: &[u8],
        extension: &str,
        now_unix_nanos: i64,
    ) -> anyhow::Result<PathBuf> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let day = crate::select::format_time(now_unix_nanos);
        let day = day.get(..10).unwrap_or("unknown-date");
        let dir = self.root.join(signal.dir()).join(day);
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            // The new directory entries must be durable too.
            sync_dir(&self.root.join(signal.dir()))?;
            sync_dir(&self.root)?;
        }
        let name = format!(
            "{now_unix_nanos}-{:05}-{seq:06}{}{extension}",
            std::process::id() % 100_000,
            signal.suffix()
        );
        let tmp = self.root.join(TMP).join(&name);
        let mut file =
            File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot write {}", tmp.display()));
        }
        drop(file);
        let path = dir.join(&name);
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot move into {}", dir.display()));
        }
        sync_dir(&dir)?;
        Ok(path)
    }
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn files_land_atomically_and_leftovers_are_removed() {
        let root = std::env::temp_dir().join(format!("otelprof-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(TMP)).unwrap();
        std::fs::write(root.join(TMP).join("half-written"), b"x").unwrap();
        let store = Store::open(&root).unwrap();
        assert_eq!(std::fs::read_dir(root.join(TMP)).unwrap().count(), 0);
        let p = store
            .put_raw(Signal::Profiles, b"hello", 1_738_324_800_000_000_000)
            .unwrap();
        assert!(p.starts_with(root.join("profiles/2025-01-31")));
        assert!(p.to_string_lossy().ends_with(".otlp.pb"));
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        let g = store.put_gzip(Signal::Profiles, &[0x1f, 0x8b], 1).unwrap();
        assert!(g.to_string_lossy().ends_with(".otlp.pb.gz"));
        let m = store
            .put_raw(Signal::Metrics, b"m", 1_738_324_800_000_000_001)
            .unwrap();
        assert!(is_metrics_file(&m.file_name().unwrap().to_string_lossy()));
        assert_eq!(std::fs::read_dir(root.join(TMP)).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&root);
    }
}
