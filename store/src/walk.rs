//! The one directory walk of the store's readers (profiles and metrics alike).
//!
//! Entries come in sorted order, depth first, so that output never depends on the order a
//! file system lists them in. Hidden entries (`.tmp`, editors' files) are skipped. Symbolic
//! links to directories are followed, each directory once: a link back up the tree is reported,
//! not walked forever. The walk keeps its own stack, so the depth of a tree cannot exhaust the
//! thread's. A directory that cannot be listed is reported and the rest is still walked.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::error::FileError;
use crate::layout::is_hidden;

/// What a walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// Files whose name `keep` accepted, in sorted depth-first order.
    pub files: Vec<PathBuf>,
    /// Directories that could not be walked, and why.
    pub failures: Vec<(PathBuf, FileError)>,
}

/// Every file under `root` (a directory) whose name `keep` accepts.
pub fn walk(root: &Path, keep: impl Fn(&str) -> bool) -> Walked {
    let mut out = Walked::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    // Entries still to visit, the next one last.
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue; // a dangling link, or gone since it was listed
        };
        if !meta.is_dir() {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if keep(name) {
                out.files.push(path);
            }
            continue;
        }
        if !seen.insert((meta.dev(), meta.ino())) {
            out.failures.push((path, FileError::SeenBefore));
            continue;
        }
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) => {
                out.failures.push((path, FileError::List(e)));
                continue;
            }
        };
        let mut children: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_str().is_some_and(is_hidden))
            .map(|e| e.path())
            .collect();
        children.sort();
        pending.extend(children.into_iter().rev());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_depth_first_hidden_skipped_cycles_reported() {
        let root = std::env::temp_dir().join(format!("otelprof-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["b/d", "a", ".tmp"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in [
            "b/d/2.pb",
            "b/1.pb",
            "a/3.pb",
            "c.pb",
            ".tmp/4.pb",
            "a/x.txt",
        ] {
            std::fs::write(root.join(file), b"").unwrap();
        }
        std::os::unix::fs::symlink(&root, root.join("b/d/up")).unwrap();
        let w = walk(&root, |n| n.ends_with(".pb"));
        let rel: Vec<String> = w
            .files
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(rel, ["a/3.pb", "b/1.pb", "b/d/2.pb", "c.pb"]);
        assert_eq!(w.failures.len(), 1);
        assert!(matches!(w.failures[0].1, FileError::SeenBefore));
        assert_eq!(w.failures[0].0, root.join("b/d/up"));
        let _ = std::fs::remove_dir_all(&root);
    }
}
