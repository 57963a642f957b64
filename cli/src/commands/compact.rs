//! `otelprof compact --store DIR`: the maintenance a receiver does as hours close, done now
//! on a store at rest: every request it received converted into the columnar store, every
//! hour compacted (with its rollup, series and spans), retention and the raw requests' keep
//! applied. It takes the store's maintenance lock, so it refuses to run beside a receiver
//! that maintains the same store.

use anyhow::{bail, Context as _};
use otelprof_store::maintain::{maintain, MaintainLock, Policy};

use crate::cli::CompactArgs;
use otelprof_primitives::escape;

pub fn run(args: &CompactArgs) -> anyhow::Result<()> {
    let store = match otelprof_store::bucket::Location::parse(&args.store)? {
        otelprof_store::bucket::Location::Dir(dir) => dir,
        otelprof_store::bucket::Location::Bucket(b) => bail!(
            "{}: compacting a store in object storage is not done yet; compact a store on \
             disk and copy it into the bucket (its columnar files are read from there)",
            escape::escape(b.url())
        ),
    };
    if !store.is_dir() {
        bail!("{} is not a directory", escape::path(&store));
    }
    let lock =
        MaintainLock::try_take(&store).map_err(|e| anyhow::anyhow!(otelprof_store::chain(&e)))?;
    let Some(lock) = lock else {
        bail!(
            "another otelprof process (a receiver) maintains {}; it converts and compacts \
             the store by itself as hours close",
            escape::path(&store)
        );
    };
    let nanos = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let policy = Policy {
        grace: 0,
        retention: args.retention.map(nanos),
        keep_raw: args.keep_otlp.0.map(nanos),
        at_rest: true,
    };
    let done = maintain(&store, super::now_unix_nanos(), &policy, &lock)
        .map_err(|e| anyhow::anyhow!(otelprof_store::chain(&e)))
        .with_context(|| format!("cannot compact {}", escape::path(&store)))?;
    for (path, err) in &done.unconvertible {
        errln!(
            "otelprof: cannot convert a stored request (kept as {}, not read): {}",
            escape::path(path),
            escape::escape(&otelprof_store::chain(err))
        );
    }
    outln!(
        "{} requests converted, {} hours compacted, {} hours or days expired, {} raw requests removed",
        done.converted,
        done.compacted.len(),
        done.expired.len(),
        done.raw_removed
    )?;
    Ok(())
}
