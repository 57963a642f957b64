//! Retention: whole hour partitions older than the retention are deleted, never rewritten.

use std::path::{Path, PathBuf};

use super::schema::{self, HOUR};
use crate::error::Error;

/// Deletes the hour partitions of `store`'s columnar store whose hour ended before `now -
/// retention` (all Unix ns); returns the directories deleted. Each is first renamed into
/// `.tmp/` (one atomic step: a reader sees the partition whole or not at all), then removed.
pub fn retain(store: &Path, retention: i64, now: i64) -> Result<Vec<PathBuf>, Error> {
    let root = store.join(super::DIR);
    let tmp = root.join(crate::layout::TMP);
    let cutoff = now.saturating_sub(retention.max(0));
    let mut deleted = Vec::new();
    let services = match std::fs::read_dir(&root) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(deleted),
        Err(e) => return Err(Error::io("list", &root)(e)),
    };
    std::fs::create_dir_all(&tmp).map_err(Error::io("create", &tmp))?;
    for service in services.flatten() {
        let service_name = service.file_name();
        if service_name
            .to_str()
            .and_then(schema::service_of_dir)
            .is_none()
        {
            continue;
        }
        let Ok(hours) = std::fs::read_dir(service.path()) else {
            continue;
        };
        for hour in hours.flatten() {
            let name = hour.file_name();
            let Some(start) = name.to_str().and_then(schema::hour_of_dir) else {
                continue;
            };
            if start.saturating_add(HOUR) > cutoff {
                continue;
            }
            let doomed = tmp.join(format!(
                "expired-{}-{}",
                service_name.to_string_lossy(),
                name.to_string_lossy()
            ));
            std::fs::rename(hour.path(), &doomed).map_err(Error::io("expire", &hour.path()))?;
            std::fs::remove_dir_all(&doomed).map_err(Error::io("remove", &doomed))?;
            deleted.push(hour.path());
        }
    }
    deleted.sort();
    Ok(deleted)
}
