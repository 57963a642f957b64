//! Stores in object storage as reading commands see them: a store argument that is a bucket
//! URL (`s3://bucket/prefix`, `gs://`, `az://`) is copied into a local cache directory, the
//! objects the command's selections read and no more
//! ([`otelprof_store::cache::mirror_to_read`]: only objects new since the last
//! command are fetched), kept within `--cache-size` ([`otelprof_store::cache`]), and read from
//! there by the same engine as a local store; `file://DIR` is DIR.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use otelprof_store::bucket::{self, Bucket, Location};
use otelprof_store::{chain, Selector};

use otelprof_primitives::escape;

/// `--cache DIR`: where bucket stores are mirrored (the user's cache directory otherwise).
static CACHE: OnceLock<PathBuf> = OnceLock::new();

/// Sets `--cache DIR` for the whole process (before any command reads).
pub fn set_cache(dir: &Path) {
    let _ = CACHE.set(dir.to_path_buf());
}

/// `--cache-size SIZE`: the most the cache holds after a command (beyond what it reads).
static CACHE_SIZE: OnceLock<u64> = OnceLock::new();

/// Sets `--cache-size SIZE` for the whole process.
pub fn set_cache_size(size: u64) {
    let _ = CACHE_SIZE.set(size);
}

/// `--cache DIR`, when given.
pub fn cache() -> Option<&'static Path> {
    CACHE.get().map(PathBuf::as_path)
}

/// The local paths to read for `paths` by a command that narrows what it reads to
/// `selectors` (`None`: it reads the whole store): bucket URLs copied into the cache (what
/// the selections read), `file://` URLs as their paths, anything else as given.
pub fn local_paths(
    paths: &[PathBuf],
    selectors: Option<&[Selector]>,
) -> anyhow::Result<Vec<PathBuf>> {
    paths.iter().map(|p| local_path(p, selectors)).collect()
}

fn local_path(path: &Path, selectors: Option<&[Selector]>) -> anyhow::Result<PathBuf> {
    if !bucket::is_bucket_url(path) && !path.to_string_lossy().starts_with("file://") {
        return Ok(path.to_path_buf());
    }
    match Location::parse(path)? {
        Location::Dir(dir) => Ok(dir),
        Location::Bucket(b) => mirror(&b, selectors),
    }
}

fn mirror(b: &Bucket, selectors: Option<&[Selector]>) -> anyhow::Result<PathBuf> {
    let dir = bucket::cache_dir(b.url(), cache());
    let failed = |e: otelprof_store::Error| {
        anyhow::anyhow!(
            "cannot read the store {}: {}",
            escape::escape(b.url()),
            escape::escape(&chain(&e))
        )
    };
    let done = otelprof_store::cache::mirror_to_read(b, &dir, selectors).map_err(failed)?;
    otelprof_store::cache::touch(&done.in_use);
    let trimmed = match CACHE_SIZE.get() {
        Some(&limit) => {
            let in_use = done.in_use.iter().cloned().collect();
            let base = bucket::cache_base(cache());
            Some(otelprof_store::cache::trim(&base, limit, &in_use).map_err(failed)?)
        }
        None => None,
    };
    if std::env::var_os("OTELPROF_BUCKET_STATS").is_some() {
        let trimmed = trimmed
            .map(|t| {
                format!(
                    "; cache {} bytes after removing {} least recently used ({} bytes)",
                    t.size, t.removed, t.removed_bytes
                )
            })
            .unwrap_or_default();
        errln!(
            "otelprof: {}: {} objects, {} read, {} fetched ({} bytes), {} local copies removed{trimmed}",
            escape::escape(b.url()),
            done.listed,
            done.in_use.len(),
            done.fetched,
            done.bytes,
            done.removed
        );
    }
    Ok(dir)
}
