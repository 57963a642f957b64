//! Maintaining a store in object storage from a receiver: every pass, the receiver tries to
//! take or renew the store's lease; the one that holds it converts and compacts
//! ([`otelprof_store::shared`]), the others only receive. A holder that dies stops renewing,
//! and another receiver takes the lease once it has expired and finishes the work. The
//! holder's working directory is a copy of the store (new objects fetched each pass), under
//! the user's cache directory, removed when the receiver stops.

use std::time::Duration;

use otelprof_store::bucket::Bucket;
use otelprof_store::shared::{maintain_shared, Lease, Pass, Stop};
use tokio::sync::watch;

use crate::{Keep, Maintenance};

/// How long a lease lasts past its holder's last renewal: a few passes, so that a holder
/// whose pass runs late keeps it, and a dead one is replaced within minutes.
const LEASE_PASSES: u32 = 5;

/// A fault for the tests that kill a holder in the middle of its write-back from outside the
/// process (`converting:N` or `compacting:N`: stop after N object writes and deletes of that
/// round of a pass, say so, and keep the lease until it expires, as a holder killed there
/// does). The step a holder is at cannot be seen from outside, and a kill at a guessed moment
/// would rarely land in the few milliseconds a write-back takes. Not a user setting.
const STOP_FAULT: &str = "OTELPROF_MAINTAIN_STOP";

fn stop_fault() -> Stop {
    let text = std::env::var(STOP_FAULT).unwrap_or_default();
    let parsed = text.split_once(':').and_then(|(round, n)| {
        let n = n.parse().ok()?;
        match round {
            "converting" => Some(Stop::Converting(n)),
            "compacting" => Some(Stop::Compacting(n)),
            _ => None,
        }
    });
    parsed.unwrap_or(Stop::Never)
}

/// Maintains the store in `bucket` every `maintenance.every` until shutdown, as [`crate`]'s
/// loop does for a directory; `writer` is this receiver's id in the store, and its working
/// directory is under `cache` (the user's cache directory when `None`).
pub(crate) async fn maintain_loop(
    bucket: Bucket,
    writer: String,
    keep: Keep,
    maintenance: Maintenance,
    cache: Option<std::path::PathBuf>,
    mut shutdown: watch::Receiver<bool>,
) {
    let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let policy = maintenance.policy(keep);
    let every = maintenance.every;
    let stop = stop_fault();
    let work = otelprof_store::bucket::work_dir(bucket.url(), cache.as_deref(), &writer);
    let lease = std::sync::Arc::new(Lease::new(&writer, nanos(every * LEASE_PASSES)));
    let bucket = std::sync::Arc::new(bucket);
    let mut failing = false;
    let mut said_busy = false;
    loop {
        let (b, l, w) = (bucket.clone(), lease.clone(), work.clone());
        let pass = tokio::task::spawn_blocking(move || {
            maintain_shared(&b, &w, &l, otelprof_store::now_unix_nanos(), &policy, stop)
        })
        .await;
        if let Ok(Ok(Some(Pass {
            stopped: Some(at), ..
        }))) = &pass
        {
            eprintln!("otelprof: maintenance stopped by {STOP_FAULT} in the {at}");
            let _ = shutdown.changed().await;
            return;
        }
        match pass {
            Ok(Ok(None)) if !said_busy => {
                said_busy = true;
                eprintln!(
                    "otelprof: another receiver maintains this store (holds its lease); this \
                     one only receives, and takes over if that one stops"
                );
            }
            Ok(Ok(Some(pass))) => {
                failing = false;
                said_busy = false;
                crate::report_pass(&pass.done);
            }
            Ok(Err(e)) if !failing => {
                failing = true;
                crate::report_failure(&e);
            }
            _ => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => break,
        }
        if *shutdown.borrow() {
            break;
        }
    }
    // The working copy is this run's own (a new writer id every start): not left behind.
    let _ = tokio::task::spawn_blocking(move || {
        let _ = std::fs::remove_dir_all(&work);
        lease.release(&bucket)
    })
    .await;
}
