//! One module per command: each turns its parsed arguments into a question for the store's
//! query engine (or the agent, or the receiver) and prints the answer.

pub mod demo;
pub mod diff;
pub mod drilldown;
pub mod flame;
pub mod receive;
pub mod run;
pub mod top;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use otelprof_store::select::{Op, ProfileType, Selector};
use otelprof_store::{chain, format_time, Source};

pub fn now_unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The files under `paths`, with every file that cannot be read reported once on stderr.
pub fn open_source(paths: &[PathBuf]) -> anyhow::Result<Source> {
    let report = |path: &Path, err: &otelprof_store::FileError| {
        eprintln!("otelprof: skipped {}: {}", path.display(), chain(err));
    };
    Ok(Source::open(paths, Box::new(report))?)
}

/// The selection in words, for titles and subtitles.
pub fn describe(selector: &Selector, ty: ProfileType) -> String {
    let mut parts = vec![ty.name().to_owned()];
    for c in &selector.conditions {
        let op = match c.op {
            Op::Eq => "=",
            Op::Ne => "!=",
        };
        parts.push(format!("{}{op}{}", c.key, c.value));
    }
    if let Some(t) = selector.trace_id {
        parts.push(format!("trace {}", otelprof_profile::model::hex(&t)));
    }
    for s in &selector.span_ids {
        parts.push(format!("span {}", otelprof_profile::model::hex(s)));
    }
    if let Some(f) = selector.from {
        parts.push(format!("from {}", format_time(f)));
    }
    if let Some(t) = selector.to {
        parts.push(format!("to {}", format_time(t)));
    }
    parts.join(", ")
}
