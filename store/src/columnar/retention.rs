//! Retention: whole hour partitions older than the retention are deleted, never rewritten.

use std::path::{Path, PathBuf};

use super::read::partitions::{list_partitions, Partition};
use super::schema::HOUR;
use crate::error::Error;

/// Deletes the hour partitions of `store`'s columnar store whose hour ended before `now -
/// retention` (all Unix ns); returns the directories deleted. Each is first renamed into
/// `.tmp/` (one atomic step: a reader sees the partition whole or not at all), then removed.
pub fn retain(store: &Path, retention: i64, now: i64) -> Result<Vec<PathBuf>, Error> {
    let root = store.join(super::DIR);
    let tmp = root.join(crate::layout::TMP);
    let cutoff = now.saturating_sub(retention.max(0));
    let mut deleted = Vec::new();
    if !root.exists() {
        return Ok(deleted);
    }
    let expired: Vec<Partition> = list_partitions(&root)?
        .into_iter()
        .filter(|p| p.hour.saturating_add(HOUR) <= cutoff)
        .collect();
    if expired.is_empty() {
        return Ok(deleted);
    }
    std::fs::create_dir_all(&tmp).map_err(Error::io("create", &tmp))?;
    for p in expired {
        let service_dir = p.dir.parent().and_then(Path::file_name).unwrap_or_default();
        let hour_dir = p.dir.file_name().unwrap_or_default();
        let doomed = tmp.join(format!(
            "expired-{}-{}",
            service_dir.to_string_lossy(),
            hour_dir.to_string_lossy()
        ));
        std::fs::rename(&p.dir, &doomed).map_err(Error::io("expire", &p.dir))?;
        std::fs::remove_dir_all(&doomed).map_err(Error::io("remove", &doomed))?;
        deleted.push(p.dir);
    }
    deleted.sort();
    Ok(deleted)
}
