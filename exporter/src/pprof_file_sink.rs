//! pprof files in a directory, one per profile period.
//!
//! Each file is written under a temporary name, synced, and renamed into place, so a reader
//! (or a crash) never sees half a file under the final name.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use otel_bridge::{pprof, Profile};

pub struct PprofFileSink {
    dir: PathBuf,
    pid: u32,
    seq: u32,
}

impl PprofFileSink {
    pub fn new(dir: impl Into<PathBuf>, pid: u32) -> PprofFileSink {
        PprofFileSink {
            dir: dir.into(),
            pid,
            seq: 0,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `profile` as gzipped pprof named
    /// `<kind>-<UTC start, e.g. 20261122T031500Z>-pid<pid>-<seq>.pb.gz`, and returns the path.
    /// Names sort by time within one process.
    pub fn write(&mut self, kind: &str, profile: &Profile) -> io::Result<PathBuf> {
        self.seq += 1;
        let name = format!(
            "{kind}-{}-pid{}-{:04}.pb.gz",
            utc_stamp(profile.time_nanos),
            self.pid,
            self.seq
        );
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let bytes = pprof::encode_gzip(profile);
        let result = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map(|()| path)
    }
}

/// `YYYYMMDDTHHMMSSZ` for a Unix time in nanoseconds (UTC).
pub fn utc_stamp(unix_nanos: i64) -> String {
    jiff::Timestamp::from_nanosecond(i128::from(unix_nanos))
        .and_then(|t| jiff::fmt::strtime::format("%Y%m%dT%H%M%SZ", t))
        // Cannot fail: i64 nanoseconds span the years 1677 to 2262, inside jiff's range, and
        // the format has numeric fields only. Were it to, the number still names the file.
        .unwrap_or_else(|_| unix_nanos.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        // 2026-11-22 03:15:00 UTC
        assert_eq!(utc_stamp(1_795_317_300 * 1_000_000_000), "20261122T031500Z");
        assert_eq!(utc_stamp(951_782_400 * 1_000_000_000), "20000229T000000Z");
        assert_eq!(utc_stamp(-1_000_000_000), "19691231T235959Z");
    }

    #[test]
    fn writes_atomically_named_files() {
        let dir = std::env::temp_dir().join(format!("otelprof-sink-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut sink = PprofFileSink::new(&dir, 42);
        let profile =
            otel_bridge::ProfileBuilder::new(&[("samples", "count")], ("cpu", "nanoseconds"), 1)
                .build(0, 1);
        let a = sink.write("cpu", &profile).unwrap();
        let b = sink.write("cpu", &profile).unwrap();
        assert!(a
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("cpu-19700101T000000Z-pid42-0001"));
        assert!(a < b);
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let back = pprof::decode(&fs::read(&a).unwrap()).unwrap();
        assert_eq!(back.sample_types.len(), 1);
        fs::remove_dir_all(&dir).unwrap();
        let mut broken = PprofFileSink::new(dir.join("missing"), 1);
        assert!(broken.write("cpu", &profile).is_err());
    }
}
