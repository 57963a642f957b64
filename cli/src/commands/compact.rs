//! `otelprof compact --store DIR`: the maintenance a receiver does as hours close, done now
//! on a store at rest: every request it received converted into the columnar store, every
//! hour compacted (with its rollup, series and spans), retention and the raw requests' keep
//! applied. It takes the store's maintenance lock, so it refuses to run beside a receiver
//! that maintains the same store; a store in object storage, its lease
//! ([`otelprof_store::shared`]).

use anyhow::{bail, Context as _};
use otelprof_store::maintain::{maintain, MaintainLock, Policy};

use crate::cli::CompactArgs;
use otelprof_primitives::escape;

pub fn run(args: &CompactArgs) -> anyhow::Result<()> {
    let store = match otelprof_store::bucket::Location::parse(&args.store)? {
        otelprof_store::bucket::Location::Dir(dir) => dir,
        otelprof_store::bucket::Location::Bucket(b) => return compact_bucket(args, &b),
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
    let done = maintain(&store, super::now_unix_nanos(), &policy(args), &lock)
        .map_err(|e| anyhow::anyhow!(otelprof_store::chain(&e)))
        .with_context(|| format!("cannot compact {}", escape::path(&store)))?;
    report(&done)
}

fn policy(args: &CompactArgs) -> Policy {
    let nanos = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    Policy::at_rest(args.retention.map(nanos), args.keep_otlp.0.map(nanos))
}

/// A store in object storage: compacted by this process as the holder of its lease, in a
/// working directory beside the readers' cache, and written back
/// ([`otelprof_store::shared`]).
fn compact_bucket(
    args: &CompactArgs,
    bucket: &otelprof_store::bucket::Bucket,
) -> anyhow::Result<()> {
    let now = super::now_unix_nanos();
    let holder = format!("compact-{}-{now}", std::process::id());
    let work = otelprof_store::bucket::work_dir(bucket.url(), super::stores::cache(), &holder);
    let lease = otelprof_store::shared::Lease::new(&holder, LEASE_TTL);
    let pass = otelprof_store::shared::maintain_shared(
        bucket,
        &work,
        &lease,
        now,
        &policy(args),
        otelprof_store::shared::Stop::Never,
    );
    let _ = std::fs::remove_dir_all(&work);
    let _ = lease.release(bucket);
    let pass = pass
        .map_err(|e| anyhow::anyhow!(otelprof_store::chain(&e)))
        .with_context(|| format!("cannot compact {}", escape::escape(bucket.url())))?;
    let Some(pass) = pass else {
        bail!(
            "another otelprof process (a receiver) maintains {} (it holds the store's lease); \
             it converts and compacts the store by itself as hours close",
            escape::escape(bucket.url())
        );
    };
    report(&pass.done)
}

/// How long this command's lease lasts (renewed before its commit).
const LEASE_TTL: i64 = 10 * 60 * 1_000_000_000;

fn report(done: &otelprof_store::maintain::Done) -> anyhow::Result<()> {
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
