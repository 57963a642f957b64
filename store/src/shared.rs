//! Maintaining a store in object storage that several receivers write to: one of them at a
//! time, the holder of a lease object, converts and compacts it ([`crate::maintain`]'s work),
//! and a holder killed at any moment leaves the store readable with nothing counted twice,
//! for the next holder to finish.
//!
//! # The lease
//!
//! `PREFIX/.maintain-lease` holds `<holder> <expiry ns>`. It is taken with a conditional
//! write: created with `If-None-Match: *` when absent, replaced with `If-Match: <its ETag>`
//! when it is the taker's own or has expired; a writer that lost either race gets a
//! precondition failure and does not maintain. The holder renews it every pass and once
//! more right before it commits (the fence below), so a holder that stalled past its
//! expiry, and whose lease another took, stops before its commit.
//!
//! # A pass
//!
//! The holder copies the store into a working directory ([`Bucket::mirror`]), runs the
//! maintenance of a local store there in two rounds (converting, then compacting: a compacted
//! file must never reach the bucket before the marker that commits its rows), and writes each
//! round's difference back in an order that keeps every intermediate state of the bucket
//! readable, each step one object:
//!
//! 1. delete the conversion files that wait for a marker the bucket has not reached (left by
//!    a holder that died before its commit): readers skip them anyway; on a store converted
//!    for the first time, write the marker at 0 (every raw request still read);
//! 2. upload every new file but the samples files and the marker (stacks first, as locally:
//!    a reader never meets a sample whose stack is missing; rollups and series are used only
//!    beside the compacted samples file they were made from);
//! 3. upload the conversion's samples files (past the bucket's marker: not read yet);
//! 4. renew the lease (the fence), then upload the marker: the commit of the conversion,
//!    after which readers read those files and no longer the raw requests before it;
//! 5. upload the compacted samples files, whose footers name the files they replace: from
//!    then on readers skip those;
//! 6. delete what the pass removed (replaced files, converted raw requests past their time,
//!    expired partitions).
//!
//! Conversion files are named after the chunk they hold (`samples-w<W>-<k>`), so two holders
//! converting the same chunk write the same names: the later write replaces the earlier.

use std::collections::BTreeMap;
use std::path::Path;

use crate::bucket::{Bucket, LEASE};
use crate::columnar;
use crate::error::Error;
use crate::maintain::{maintain, Done, MaintainLock, Policy};

/// A writer's claim on a store's maintenance.
#[derive(Debug)]
pub struct Lease {
    holder: String,
    /// How long a lease lasts past its last renewal (ns).
    ttl: i64,
}

impl Lease {
    /// The lease of writer `holder`, lasting `ttl` ns past each renewal.
    pub fn new(holder: &str, ttl: i64) -> Lease {
        Lease {
            holder: holder.to_owned(),
            ttl,
        }
    }

    /// Takes or renews the lease at `now`: whether this writer holds it until `now + ttl`.
    pub fn hold(&self, bucket: &Bucket, now: i64) -> Result<bool, Error> {
        let body = format!("{} {}\n", self.holder, now.saturating_add(self.ttl)).into_bytes();
        let Some((current, etag)) = bucket.get(LEASE)? else {
            return Ok(bucket.put_new(LEASE, body)?.is_some());
        };
        let text = String::from_utf8_lossy(&current);
        let mut fields = text.split_whitespace();
        let holder = fields.next().unwrap_or_default();
        let until: i64 = fields.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        if holder != self.holder && until > now {
            return Ok(false);
        }
        match etag {
            Some(etag) => Ok(bucket.put_replacing(LEASE, body, &etag)?.is_some()),
            // Without an ETag nothing can be replaced safely.
            None => Ok(false),
        }
    }
}

impl Lease {
    /// Gives the lease up (expired at once) if this writer holds it, so that another takes
    /// it at its next pass rather than after the lease's time.
    pub fn release(&self, bucket: &Bucket) -> Result<(), Error> {
        if let Some((current, Some(etag))) = bucket.get(LEASE)? {
            let text = String::from_utf8_lossy(&current);
            if text.split_whitespace().next() == Some(self.holder.as_str()) {
                let body = format!("{} 0\n", self.holder).into_bytes();
                bucket.put_replacing(LEASE, body, &etag)?;
            }
        }
        Ok(())
    }
}

/// What a pass wrote back, and the maintenance it did.
#[derive(Debug, Default)]
pub struct Pass {
    pub done: Done,
    pub uploaded: usize,
    pub deleted: usize,
    /// Where the pass stopped short at its [`Stop`]: the round and the last object written
    /// or deleted.
    pub stopped: Option<String>,
}

/// Where a pass stops writing back. In service it never does; tests stop it to stand for a
/// holder killed there (an object write is whole or absent, so a holder killed during one
/// leaves the bucket as one stopped before or after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Never,
    /// After this many object writes and deletes of the pass.
    After(usize),
    /// After this many of its converting round, of a pass that writes more.
    Converting(usize),
    /// After this many of its compacting round, of a pass that writes more.
    Compacting(usize),
}

/// The rounds of a pass ([`maintain_shared`]).
const ROUNDS: [&str; 2] = ["converting", "compacting"];

/// One maintenance pass of the store in `bucket` by the holder of `lease`, in the working
/// directory `work` (this writer's own); `None` when another writer holds the lease. The
/// write-back ends early at `stop` ([`Stop::Never`] in service).
pub fn maintain_shared(
    bucket: &Bucket,
    work: &Path,
    lease: &Lease,
    now: i64,
    policy: &Policy,
    stop: Stop,
) -> Result<Option<Pass>, Error> {
    let started = std::time::Instant::now();
    if !lease.hold(bucket, now)? {
        return Ok(None);
    }
    let mirrored = bucket.mirror(work)?;
    let mut before: BTreeMap<String, u64> = mirrored
        .objects
        .into_iter()
        .map(|o| (o.key, o.size))
        .collect();
    let Some(lock) = MaintainLock::try_take(work)? else {
        return Err(Error::Busy(work.to_path_buf()));
    };
    let mut sync = Sync {
        bucket,
        work,
        lease,
        now,
        started,
        stop,
        round: 0,
        in_round: 0,
        last: String::new(),
        pass: Pass::default(),
    };
    // Two rounds, each written back before the next: converting (the marker moves; no hour is
    // compacted, whose compacted file would carry rows the bucket's marker does not commit
    // yet), then compacting what the first committed.
    let converting = Policy {
        grace: i64::MAX,
        ..*policy
    };
    for (round, policy) in [&converting, policy].into_iter().enumerate() {
        sync.round = round;
        sync.in_round = 0;
        let marker_before = columnar::converted_until(work);
        let done = maintain(work, now, policy, &lock)?;
        let after = local_files(work);
        sync.pass.done.converted += done.converted;
        sync.pass.done.unconvertible.extend(done.unconvertible);
        sync.pass.done.compacted.extend(done.compacted);
        sync.pass.done.expired.extend(done.expired);
        sync.pass.done.raw_removed += done.raw_removed;
        if !sync.write_back(&before, &after, marker_before)? {
            break;
        }
        before = after;
    }
    Ok(Some(sync.pass))
}

/// Writing a pass's changes back to the bucket, up to its [`Stop`].
struct Sync<'a> {
    bucket: &'a Bucket,
    work: &'a Path,
    lease: &'a Lease,
    now: i64,
    started: std::time::Instant,
    stop: Stop,
    /// The round being written back ([`ROUNDS`]), and its steps so far.
    round: usize,
    in_round: usize,
    last: String,
    pass: Pass,
}

impl Sync<'_> {
    /// Whether the next step is past the pass's [`Stop`]; if so, says where it stopped.
    fn stops(&mut self) -> bool {
        let made = self.pass.uploaded + self.pass.deleted;
        let stops = match self.stop {
            Stop::Never => false,
            Stop::After(n) => made >= n,
            Stop::Converting(n) => self.round == 0 && self.in_round >= n,
            Stop::Compacting(n) => self.round == 1 && self.in_round >= n,
        };
        if stops && self.pass.stopped.is_none() {
            let last = if self.last.is_empty() {
                "none"
            } else {
                &self.last
            };
            self.pass.stopped = Some(format!(
                "{} round, after {} of its object writes and deletes (the last: {last})",
                ROUNDS.get(self.round).unwrap_or(&"?"),
                self.in_round,
            ));
        }
        stops
    }

    /// One object write or delete, unless the pass stops here: whether it was made.
    fn step(&mut self, upload: Option<&str>, delete: Option<&str>) -> Result<bool, Error> {
        if self.stops() {
            return Ok(false);
        }
        if let Some(k) = upload {
            let path = self.work.join(k);
            let bytes = std::fs::read(&path).map_err(Error::io("read", &path))?;
            self.bucket.put(k, bytes)?;
            self.pass.uploaded += 1;
            self.last = format!("wrote {k}");
        }
        if let Some(k) = delete {
            self.bucket.delete(k)?;
            self.pass.deleted += 1;
            self.last = format!("deleted {k}");
        }
        self.in_round += 1;
        Ok(true)
    }

    /// Writes the difference between the objects `before` and the working directory's files
    /// `after` back, in the module's order; whether it got to the end.
    fn write_back(
        &mut self,
        before: &BTreeMap<String, u64>,
        after: &BTreeMap<String, u64>,
        marker_before: Option<i64>,
    ) -> Result<bool, Error> {
        let marker_key = format!("{}/{}", columnar::DIR, columnar::commit::MARKER);
        let marker_after = columnar::converted_until(self.work);
        let name = |k: &str| k.rsplit('/').next().unwrap_or(k).to_owned();
        let is_samples = |k: &str| name(k).starts_with("samples-");
        let pending = |k: &str| !columnar::commit::committed(&name(k), marker_before);
        let new: Vec<&String> = after
            .iter()
            .filter(|(k, size)| **k != marker_key && before.get(*k) != Some(size))
            .map(|(k, _)| k)
            .collect();
        // Hidden objects (the lease) are no part of the store's data.
        let gone: Vec<&String> = before
            .keys()
            .filter(|k| !after.contains_key(*k) && !crate::layout::is_hidden(&name(k)))
            .collect();
        // 1: uncommitted leftovers of an earlier holder.
        for k in gone.iter().filter(|k| pending(k)) {
            if !self.step(None, Some(k))? {
                return Ok(false);
            }
        }
        // A store converted for the first time: a marker at 0 first, so that readers keep
        // reading every raw request while the columnar files arrive (a columnar store
        // without a marker would answer alone).
        if marker_before.is_none() && marker_after.is_some() {
            if self.stops() {
                return Ok(false);
            }
            self.bucket.put(&marker_key, b"0\n".to_vec())?;
            self.pass.uploaded += 1;
            self.in_round += 1;
            self.last = format!("wrote {marker_key} (0)");
        }
        // 2, 3: everything but samples, then the conversion's samples.
        let phase2 = new.iter().filter(|k| !is_samples(k));
        let phase3 = new.iter().filter(|k| is_samples(k) && pending(k));
        for k in phase2.chain(phase3) {
            if !self.step(Some(k), None)? {
                return Ok(false);
            }
        }
        // 4: the fence, then the commit.
        if marker_after != marker_before {
            // On the pass's clock: `now` and the time the pass took since.
            let elapsed = i64::try_from(self.started.elapsed().as_nanos()).unwrap_or(i64::MAX);
            if !self
                .lease
                .hold(self.bucket, self.now.saturating_add(elapsed))?
            {
                return Err(Error::LeaseLost);
            }
            if !self.step(Some(&marker_key), None)? {
                return Ok(false);
            }
        }
        // 5: compacted samples files.
        for k in new.iter().filter(|k| is_samples(k) && !pending(k)) {
            if !self.step(Some(k), None)? {
                return Ok(false);
            }
        }
        // 6: what the pass removed.
        for k in gone.iter().filter(|k| !pending(k)) {
            if !self.step(None, Some(k))? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The files below `dir` by key (`/`-separated path below it) and size; hidden directories
/// (`.tmp`) and hidden files (the lock) aside, but for the conversion marker.
fn local_files(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let hidden = crate::layout::is_hidden(&name);
            let path = entry.path();
            if is_dir {
                if !hidden {
                    stack.push(path);
                }
                continue;
            }
            if hidden && name != columnar::commit::MARKER {
                continue;
            }
            let (Ok(rel), Ok(meta)) = (path.strip_prefix(dir), entry.metadata()) else {
                continue;
            };
            let key: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(key.join("/"), meta.len());
        }
    }
    out
}
