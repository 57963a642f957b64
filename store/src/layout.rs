//! Where things are in a store directory, in one place: the writer puts files here and the
//! readers find them here.
//!
//! ```text
//! STORE/profiles/2025-01-31/1738324800123456789-04242-000001.otlp.pb      ExportProfilesServiceRequest
//! STORE/metrics/2025-01-31/1738324800123456789-04242-000002.metrics.otlp.pb   ExportMetricsServiceRequest
//! STORE/.tmp/                                                        writes in progress
//! ```
//!
//! A file is the request's protobuf as it arrived: a gzip body sent over HTTP keeps its gzip
//! (`.otlp.pb.gz`). The name's first number is the time of receipt in Unix nanoseconds, so
//! names sort by arrival; then the receiver's process id and a sequence number. Entries whose
//! names start with `.` are never read.
//!
//! Names are tested on their bytes, not as UTF-8: a directory of agent output or a copied
//! store may hold names in any encoding (`caf\xe9.pb.gz` from a Latin-1 system), and a name
//! that is not UTF-8 is still a profile's name.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;

/// Writes in progress; readers never look here, and opening a store empties it.
pub const TMP: &str = ".tmp";

const METRICS_SUFFIX: &str = ".metrics.otlp.pb";
const PROFILES_SUFFIX: &str = ".otlp.pb";

/// What a stored request carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Profiles,
    Metrics,
}

impl Signal {
    /// The top-level directory of the signal's files.
    pub fn dir(self) -> &'static str {
        match self {
            Signal::Profiles => "profiles",
            Signal::Metrics => "metrics",
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Signal::Profiles => PROFILES_SUFFIX,
            Signal::Metrics => METRICS_SUFFIX,
        }
    }
}

/// Whether a file name is a stored metrics request (not a profile).
pub fn is_metrics_file<N: AsRef<OsStr> + ?Sized>(name: &N) -> bool {
    let name = name.as_ref().as_bytes();
    name.ends_with(METRICS_SUFFIX.as_bytes()) || name.ends_with(b".metrics.otlp.pb.gz")
}

/// Whether readers skip an entry of this name (hidden: `.tmp`, editors' files).
pub fn is_hidden<N: AsRef<OsStr> + ?Sized>(name: &N) -> bool {
    name.as_ref().as_bytes().first() == Some(&b'.')
}

/// The name of a stored request: received at `unix_nanos`, by process `pid`, `seq`th of the
/// process, `gzip` if its bytes are a gzip stream.
pub fn file_name(signal: Signal, unix_nanos: i64, pid: u32, seq: u64, gzip: bool) -> String {
    format!(
        "{unix_nanos}-{:05}-{seq:06}{}{}",
        pid % 100_000,
        signal.suffix(),
        if gzip { ".gz" } else { "" }
    )
}

/// [`file_name`] with a writer id (`w` and hex digits) in place of the process id: the names
/// of a store in object storage, which processes on many machines write.
pub fn file_name_by(signal: Signal, unix_nanos: i64, writer: &str, seq: u64, gzip: bool) -> String {
    format!(
        "{unix_nanos}-{writer}-{seq:06}{}{}",
        signal.suffix(),
        if gzip { ".gz" } else { "" }
    )
}

/// The day directory (UTC date) a request received at `unix_nanos` goes in.
pub fn day_dir(unix_nanos: i64) -> String {
    crate::time::day(unix_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_arrival_and_say_what_they_hold() {
        let p = file_name(Signal::Profiles, 1_738_324_800_000_000_000, 4242, 1, false);
        assert_eq!(p, "1738324800000000000-04242-000001.otlp.pb");
        let m = file_name(Signal::Metrics, 1, 123_456, 2, true);
        assert_eq!(m, "1-23456-000002.metrics.otlp.pb.gz");
        assert!(is_metrics_file(&m) && !is_metrics_file(&p));
        assert_eq!(day_dir(1_738_324_800_000_000_000), "2025-01-31");
        assert!(is_hidden(TMP));
    }

    #[test]
    fn names_need_not_be_utf8() {
        let latin1 = OsStr::from_bytes(b"caf\xe9.metrics.otlp.pb");
        assert!(is_metrics_file(latin1));
        assert!(is_hidden(OsStr::from_bytes(b".\xff")));
        assert!(!is_hidden(OsStr::from_bytes(b"\xff.")));
    }
}
