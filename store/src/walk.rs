//! The one directory walk of the store's readers (profiles and metrics alike).
//!
//! Entries come in sorted order, depth first, so that output never depends on the order a
//! file system lists them in. Hidden entries (`.tmp`, editors' files) are skipped. Symbolic
//! links to directories are followed, each directory once: a link back up the tree is reported,
//! not walked forever. The walk keeps its own stack, so the depth of a tree cannot exhaust the
//! thread's. A directory that cannot be listed is reported and the rest is still walked.
//!
//! Only regular files are ever returned. A FIFO, socket or device found under a profile's name
//! is reported and never opened: opening a FIFO blocks until someone writes to it, a device
//! may never end (`/dev/zero`) or act on being opened. Names are matched on their bytes, so
//! names that are not UTF-8 are found like any other.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::FileType;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use crate::error::FileError;
use crate::layout::is_hidden;

/// What a walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// Regular files whose name `keep` accepted, in sorted depth-first order.
    pub files: Vec<PathBuf>,
    /// Directories that could not be walked, and entries that `keep` accepted but that are not
    /// regular files, with the reason.
    pub failures: Vec<(PathBuf, FileError)>,
}

/// What a file that is not a regular file is, in words (`None` for a regular file): the
/// readers open regular files only.
pub(crate) fn special_kind(t: &FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else {
        Some("not a regular file")
    }
}

/// Every regular file under `root` (a directory) whose name `keep` accepts.
pub fn walk(root: &Path, keep: impl Fn(&OsStr) -> bool) -> Walked {
    let mut out = Walked::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    // Entries still to visit, the next one last.
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        // Follows links; stat never opens what it looks at.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue; // a dangling link, or gone since it was listed
        };
        if !meta.is_dir() {
            if !path.file_name().is_some_and(&keep) {
                continue;
            }
            match special_kind(&meta.file_type()) {
                None => out.files.push(path),
                Some(kind) => out.failures.push((path, FileError::NotAFile(kind))),
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
            .filter(|e| !is_hidden(&e.file_name()))
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
    use std::os::unix::ffi::OsStrExt as _;

    fn scratch(name: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("otelprof-walk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        root
    }

    fn ends_with_pb(name: &OsStr) -> bool {
        name.as_bytes().ends_with(b".pb")
    }

    #[test]
    fn sorted_depth_first_hidden_skipped_cycles_reported() {
        let root = scratch("order");
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
        let w = walk(&root, ends_with_pb);
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

    #[test]
    fn special_files_are_reported_never_returned() {
        let root = scratch("special");
        std::fs::write(root.join("good.pb"), b"").unwrap();
        let fifo = root.join("stuck.pb");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let _socket = std::os::unix::net::UnixListener::bind(root.join("sock.pb")).unwrap();
        // A special file whose name is not a profile's is none of the walk's business.
        let _other = std::os::unix::net::UnixListener::bind(root.join("app.sock")).unwrap();
        std::os::unix::fs::symlink("/dev/null", root.join("null.pb")).unwrap();
        let w = walk(&root, ends_with_pb);
        assert_eq!(w.files, [root.join("good.pb")]);
        let failed: Vec<(String, String)> = w
            .failures
            .iter()
            .map(|(p, e)| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    e.to_string(),
                )
            })
            .collect();
        assert_eq!(failed.len(), 3, "{failed:?}");
        assert_eq!(failed[0].0, "null.pb");
        assert!(failed[0]
            .1
            .starts_with("a character device, not a regular file"));
        assert_eq!(failed[1].0, "sock.pb");
        assert!(failed[1].1.starts_with("a socket"));
        assert_eq!(failed[2].0, "stuck.pb");
        assert!(failed[2].1.starts_with("a FIFO"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn names_that_are_not_utf8_are_found() {
        let root = scratch("latin1");
        let name = OsStr::from_bytes(b"caf\xe9.pb");
        std::fs::write(root.join(name), b"").unwrap();
        let w = walk(&root, ends_with_pb);
        assert_eq!(w.files, [root.join(name)]);
        let _ = std::fs::remove_dir_all(&root);
    }
}
