//! pprof files in a directory, one per profile period.
//!
//! Each file is written under a temporary name, synced, and renamed into place, so a reader
//! (or a crash) never sees half a file under the final name.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use otelprof_profile::{pprof, Profile};

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

/// `YYYYMMDDTHHMMSSZ` for a Unix time in nanoseconds (proleptic Gregorian, UTC).
pub fn utc_stamp(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day); Howard Hinnant's civil-from-days algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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
        let profile = otelprof_profile::ProfileBuilder::new(
            &[("samples", "count")],
            ("cpu", "nanoseconds"),
            1,
        )
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
