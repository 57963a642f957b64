//! The file a `dump` names (`dump,file=<path>`): the period's profile as gzipped pprof.
//!
//! With one profile type the profile goes to the path as given; with several, each goes to
//! the path with `-<type>` before its `.pb.gz` (or at its end), since one pprof file holds one
//! profile type here. Each file is written under a temporary name beside it, synced and
//! renamed into place, so a reader never sees half a file and a symbolic link at the path is
//! replaced, not followed.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

use otel_bridge::{pprof, Profile};

use crate::kinds::SampleKind;

/// Where each profile type's profile goes for a dump to `path`.
pub(crate) fn paths(path: &Path, kinds: &[SampleKind]) -> Vec<PathBuf> {
    if kinds.len() <= 1 {
        return vec![path.to_path_buf()];
    }
    let text = path.to_string_lossy();
    let (stem, ext) = match text.strip_suffix(".pb.gz") {
        Some(stem) => (stem.to_owned(), ".pb.gz"),
        None => (text.into_owned(), ""),
    };
    kinds
        .iter()
        .map(|k| PathBuf::from(format!("{stem}-{}{ext}", k.name())))
        .collect()
}

/// Writes `profiles` for a dump to `path` (absolute). Returns the files written.
pub(crate) fn write(
    path: &Path,
    profiles: &[(SampleKind, Profile)],
) -> Result<Vec<PathBuf>, String> {
    if !path.is_absolute() {
        return Err(format!("file={} is not an absolute path", path.display()));
    }
    let kinds: Vec<SampleKind> = profiles.iter().map(|(k, _)| *k).collect();
    let mut written = Vec::new();
    for ((_, profile), target) in profiles.iter().zip(paths(path, &kinds)) {
        write_one(&target, &pprof::encode_gzip(profile))
            .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
        written.push(target);
    }
    Ok(written)
}

fn write_one(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = target
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let tmp = target.with_file_name(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_type_keeps_the_path_several_get_their_type() {
        let p = Path::new("/tmp/x.pb.gz");
        assert_eq!(
            paths(p, &[SampleKind::Cpu]),
            vec![PathBuf::from("/tmp/x.pb.gz")]
        );
        assert_eq!(
            paths(p, &[SampleKind::Cpu, SampleKind::Wall]),
            vec![
                PathBuf::from("/tmp/x-cpu.pb.gz"),
                PathBuf::from("/tmp/x-wall.pb.gz")
            ]
        );
        assert_eq!(
            paths(Path::new("/tmp/y"), &[SampleKind::Alloc, SampleKind::Lock]),
            vec![PathBuf::from("/tmp/y-alloc"), PathBuf::from("/tmp/y-lock")]
        );
        assert!(write(Path::new("rel.pb.gz"), &[]).is_err());
    }
}
