//! The hour partitions of a columnar store (`service=…/hour=…` directories), the files in
//! one, and which of them a selection can touch.

use std::path::{Path, PathBuf};

use crate::columnar::schema::{self, HOUR};
use crate::error::Error;
use crate::select::{Op, Selector};

/// One hour partition of one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub dir: PathBuf,
    pub service: String,
    /// Start of the hour, Unix ns.
    pub hour: i64,
}

/// Whether partition `p` can hold samples `s` selects: its service is not excluded by a
/// `service.name` condition, and its hour (or the profiles starting in the hour before, which
/// may reach into it) meets the time window.
pub(super) fn may_select(s: &Selector, p: &Partition) -> bool {
    for c in s.conditions.iter().filter(|c| c.key == "service.name") {
        let same = c.value == p.service;
        if (c.op == Op::Eq) != same {
            return false;
        }
    }
    // A profile lasts at most an hour in practice (the agent's period is 60 s): one hour of
    // slack before `from`.
    let starts_too_late = s.to.is_some_and(|to| p.hour >= to);
    let ends_too_early = s
        .from
        .is_some_and(|from| p.hour.saturating_add(2 * HOUR) <= from);
    !starts_too_late && !ends_too_early
}

/// Whether any of `selectors` can select samples in the partition of the service directory
/// `service` (`service=…`) and hour directory `hour` (`hour=…`); `None` when the names are
/// not a partition's.
pub fn dirs_may_select(selectors: &[Selector], service: &str, hour: &str) -> Option<bool> {
    let p = Partition {
        dir: PathBuf::new(),
        service: schema::service_of_dir(service)?,
        hour: schema::hour_of_dir(hour)?,
    };
    Some(selectors.iter().any(|s| may_select(s, &p)))
}

/// The columnar store of `store`: its `columnar/` directory, or `store` itself when it has
/// none (it may be the `columnar/` directory already).
pub(super) fn columnar_root(store: &Path) -> PathBuf {
    let dir = store.join(crate::columnar::DIR);
    if dir.is_dir() {
        dir
    } else {
        store.to_path_buf()
    }
}

/// The hour partitions under the columnar store's `root`, by hour then service.
pub(crate) fn list_partitions(root: &Path) -> Result<Vec<Partition>, Error> {
    let mut out = Vec::new();
    for service in std::fs::read_dir(root).map_err(Error::io("list", root))? {
        let service = service.map_err(Error::io("list", root))?;
        let name = service.file_name();
        let Some(service_name) = name.to_str().and_then(schema::service_of_dir) else {
            continue;
        };
        let Ok(hours) = std::fs::read_dir(service.path()) else {
            continue;
        };
        for hour in hours.flatten() {
            let name = hour.file_name();
            let Some(start) = name.to_str().and_then(schema::hour_of_dir) else {
                continue;
            };
            if hour.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(Partition {
                    dir: hour.path(),
                    service: service_name.clone(),
                    hour: start,
                });
            }
        }
    }
    out.sort_by(|a, b| (a.hour, &a.service).cmp(&(b.hour, &b.service)));
    Ok(out)
}

/// Files of a partition whose names start with `prefix`, sorted (by arrival).
pub(crate) fn files_in(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(prefix) && name.ends_with(".parquet")
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}
