//! The columnar store's commit point: `columnar/.converted-until` holds the receipt time W
//! before which every raw request is in the columnar store ([`crate::maintain`]). Files a
//! conversion writes are named `samples-w<W>-…` and `stacks-w<W>-…` after the marker they
//! wait for; readers and compaction ignore those whose W is past the marker.

use std::path::Path;

use crate::error::Error;

/// Name of the marker file in the columnar store.
pub const MARKER: &str = ".converted-until";
/// What the stem of a file written by a conversion starts with, before its W.
const COMMITTED_BY: &str = "w";

/// The receipt time before which the raw requests of `store` are in its columnar store, when
/// a conversion has run there.
pub fn converted_until(store: &Path) -> Option<i64> {
    marker_in(&store.join(super::DIR))
}

/// [`converted_until`] of the columnar store at `root`.
pub(crate) fn marker_in(root: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(root.join(MARKER)).ok()?;
    text.trim().parse().ok()
}

/// Moves the marker of `store` to `until`, durably: the files it commits are synced already;
/// the marker is written beside, synced, and renamed over the old one.
pub fn commit_until(store: &Path, until: i64) -> Result<(), Error> {
    let root = store.join(super::DIR);
    std::fs::create_dir_all(&root).map_err(Error::io("create", &root))?;
    let tmp = root.join(crate::layout::TMP).join(MARKER);
    if let Some(dir) = tmp.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
    }
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, format!("{until}\n").as_bytes())?;
        f.sync_all()
    };
    write().map_err(Error::io("write", &tmp))?;
    let path = root.join(MARKER);
    std::fs::rename(&tmp, &path).map_err(Error::io("move into", &path))?;
    crate::writer::sync_dir(&root)
}

/// The stem of the files of part `part` of a conversion committed by the marker `until`
/// (what [`waits_for`] reads back).
pub fn conversion_stem(until: i64, part: usize) -> String {
    format!("{COMMITTED_BY}{until:020}-{part:04}")
}

/// The W a file name of a conversion waits for (`samples-w<W>-…`, `stacks-w<W>-…`).
pub(crate) fn waits_for(name: &str) -> Option<i64> {
    let stem = name
        .strip_prefix("samples-")
        .or_else(|| name.strip_prefix("stacks-"))?;
    let digits = stem.strip_prefix(COMMITTED_BY)?;
    let end = digits.find(|c: char| !c.is_ascii_digit())?;
    digits.get(..end)?.parse().ok()
}

/// Whether a file of the columnar store at `root` counts: any file but a conversion's whose
/// W is past the marker (`marker`, read once per partition).
pub fn committed(name: &str, marker: Option<i64>) -> bool {
    waits_for(name).is_none_or(|w| marker.is_some_and(|m| w <= m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversion_file_counts_once_the_marker_passes_it() {
        let name = &format!("samples-{}.parquet", conversion_stem(1200, 0));
        assert_eq!(name, "samples-w00000000000000001200-0000.parquet");
        assert_eq!(waits_for(name), Some(1200));
        assert_eq!(
            waits_for("stacks-w00000000000000001200-0001.parquet"),
            Some(1200)
        );
        assert!(!committed(name, None));
        assert!(!committed(name, Some(600)));
        assert!(committed(name, Some(1200)));
        // Files of other writers (per request, compaction) always count.
        assert!(committed(
            "samples-1738324800000000000-00042-000001.parquet",
            None
        ));
        assert!(committed("samples-compacted-17-00042.parquet", None));
        assert!(committed("rollup-17-00042.parquet", Some(0)));
    }
}
