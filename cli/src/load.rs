//! Finding and decoding the pprof files named on the command line.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use otel_bridge::Profile;

/// Profiles that decoded, and the files that did not with the reason.
#[derive(Debug, Default)]
pub struct Loaded {
    pub profiles: Vec<(PathBuf, Profile)>,
    pub failures: Vec<(PathBuf, anyhow::Error)>,
}

/// Reads every file in `paths`; a directory stands for the `*.pb.gz` files directly inside it
/// (not `*.otlp.pb`, which the exporter writes beside them and which are not pprof). A bad
/// file is recorded in [`Loaded::failures`] and the others are still read.
pub fn load(paths: &[PathBuf]) -> Loaded {
    let mut loaded = Loaded::default();
    for path in paths {
        if path.is_dir() {
            match pprof_files_in(path) {
                Ok(files) if files.is_empty() => loaded.failures.push((
                    path.clone(),
                    anyhow::anyhow!("directory has no *.pb.gz files"),
                )),
                Ok(files) => files.into_iter().for_each(|f| load_file(f, &mut loaded)),
                Err(e) => loaded.failures.push((path.clone(), e)),
            }
        } else {
            load_file(path.clone(), &mut loaded);
        }
    }
    loaded
}

fn load_file(path: PathBuf, loaded: &mut Loaded) {
    let result = std::fs::read(&path)
        .context("cannot read")
        .and_then(|bytes| Ok(otel_bridge::pprof::decode(&bytes)?));
    match result {
        Ok(profile) => loaded.profiles.push((path, profile)),
        Err(e) => loaded.failures.push((path, e)),
    }
}

/// `*.pb.gz` files directly in `dir`, sorted by name so that output does not depend on the
/// order the file system lists them in.
fn pprof_files_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).context("cannot list directory")? {
        let entry = entry.context("cannot list directory")?;
        let path = entry.path();
        let is_pprof = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".pb.gz"));
        if is_pprof && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use otel_bridge::{FrameKind, ProfileBuilder};

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("otelprof-load-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn profile_bytes() -> Vec<u8> {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 1);
        let f = b.function("a.B.c", "B.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        b.add_sample(&[l], &[], &[7]);
        otel_bridge::pprof::encode_gzip(&b.build(0, 0))
    }

    #[test]
    fn bad_files_are_reported_and_good_ones_kept() {
        let dir = scratch_dir("mixed");
        std::fs::write(dir.join("b.pb.gz"), profile_bytes()).unwrap();
        std::fs::write(dir.join("a.pb.gz"), profile_bytes()).unwrap();
        std::fs::write(dir.join("broken.pb.gz"), [0x1f, 0x8b, 1, 2, 3]).unwrap();
        std::fs::write(dir.join("c.otlp.pb"), b"not pprof").unwrap();
        let missing = dir.join("missing.pb.gz");
        let empty_dir = dir.join("empty");
        std::fs::create_dir(&empty_dir).unwrap();

        let loaded = load(&[dir.clone(), missing.clone(), empty_dir.clone()]);
        let names: Vec<_> = loaded
            .profiles
            .iter()
            .map(|(p, _)| p.file_name().unwrap())
            .collect();
        assert_eq!(names, ["a.pb.gz", "b.pb.gz"]);
        let failures: Vec<_> = loaded
            .failures
            .iter()
            .map(|(p, e)| (p.clone(), format!("{e:#}")))
            .collect();
        assert_eq!(failures.len(), 3);
        assert_eq!(failures[0].0, dir.join("broken.pb.gz"));
        assert!(
            failures[0].1.starts_with("bad gzip stream: "),
            "{}",
            failures[0].1
        );
        assert_eq!(failures[1].0, missing);
        assert!(
            failures[1].1.starts_with("cannot read: "),
            "{}",
            failures[1].1
        );
        assert_eq!(
            failures[2],
            (empty_dir, "directory has no *.pb.gz files".to_owned())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
