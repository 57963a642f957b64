//! Stores in object storage as reading commands see them: a store argument that is a bucket
//! URL (`s3://bucket/prefix`, `gs://`, `az://`) is mirrored into a local cache directory
//! ([`otelprof_store::bucket::Bucket::mirror`]: only objects new since the last command are
//! fetched) and read from there by the same engine as a local store; `file://DIR` is DIR.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use otelprof_store::bucket::{self, Bucket, Location};
use otelprof_store::chain;

use otelprof_primitives::escape;

/// `--cache DIR`: where bucket stores are mirrored (the user's cache directory otherwise).
static CACHE: OnceLock<PathBuf> = OnceLock::new();

/// Sets `--cache DIR` for the whole process (before any command reads).
pub fn set_cache(dir: &Path) {
    let _ = CACHE.set(dir.to_path_buf());
}

/// `--cache DIR`, when given.
pub fn cache() -> Option<&'static Path> {
    CACHE.get().map(PathBuf::as_path)
}

/// The local paths to read for `paths`: bucket URLs mirrored into the cache, `file://` URLs
/// as their paths, anything else as given.
pub fn local_paths(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    paths.iter().map(|p| local_path(p)).collect()
}

fn local_path(path: &Path) -> anyhow::Result<PathBuf> {
    if !bucket::is_bucket_url(path) && !path.to_string_lossy().starts_with("file://") {
        return Ok(path.to_path_buf());
    }
    match Location::parse(path)? {
        Location::Dir(dir) => Ok(dir),
        Location::Bucket(b) => mirror(&b),
    }
}

fn mirror(b: &Bucket) -> anyhow::Result<PathBuf> {
    let dir = bucket::cache_dir(b.url(), cache());
    let done = b.mirror(&dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the store {}: {}",
            escape::escape(b.url()),
            escape::escape(&chain(&e))
        )
    })?;
    if std::env::var_os("OTELPROF_BUCKET_STATS").is_some() {
        errln!(
            "otelprof: {}: {} objects, {} fetched ({} bytes), {} local copies removed",
            escape::escape(b.url()),
            done.listed,
            done.fetched,
            done.bytes,
            done.removed
        );
    }
    Ok(dir)
}
