//! Writing the store: every accepted request durably, in the layout of [`crate::layout`], so
//! that anything in it can be read by the query engine or replayed into any OTLP backend.
//!
//! A file is written under `.tmp/`, `fsync`ed, renamed into place and its directory
//! `fsync`ed before the request is acknowledged: an acknowledged request survives a crash or
//! power loss, and a crash mid-write leaves only a `.tmp/` file, which readers never look at
//! and the next open removes. A gzip body is kept as it came; anything else is stored
//! uncompressed, because compressing at request rate was the receiver's largest cost, more than
//! checking the request (measured on the receiver's benchmark before compression was dropped).
//!
//! A store in object storage ([`crate::bucket`]) takes each request as one PUT to its final
//! name, acknowledged once the PUT answers: an object is whole or absent, so no `.tmp/` and no
//! rename. Its names carry a writer id drawn at open (`<received ns>-w<16 hex>-<seq>`) in
//! place of the process id, so that receivers on many machines never choose the same name.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bucket::{Bucket, Location};
use crate::error::Error;
use crate::layout::{self, Signal, TMP};

#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    seq: AtomicU64,
    /// The store's bucket when it is in object storage (`root` is then its URL, for messages).
    bucket: Option<(Bucket, String)>,
}

impl Store {
    /// Opens (creating) the store that `root` names: a directory (or `file://` URL), or a
    /// prefix in object storage ([`Location::parse`]).
    pub fn open(root: &Path) -> Result<Store, Error> {
        match Location::parse(root)? {
            Location::Dir(dir) => Store::open_dir(&dir),
            Location::Bucket(bucket) => {
                bucket.probe()?;
                let writer = format!("w{:016x}", writer_id()?);
                Ok(Store {
                    root: root.to_path_buf(),
                    seq: AtomicU64::new(0),
                    bucket: Some((bucket, writer)),
                })
            }
        }
    }

    /// The store's bucket and this writer's id in it, when it is in object storage.
    pub fn bucket(&self) -> Option<(&Bucket, &str)> {
        self.bucket.as_ref().map(|(b, w)| (b, w.as_str()))
    }

    /// The store's directory, when it is a local one (maintenance works there).
    pub fn local_dir(&self) -> Option<&Path> {
        self.bucket.is_none().then_some(self.root.as_path())
    }

    /// Opens (creating) a store directory and removes writes a crash left behind.
    fn open_dir(root: &Path) -> Result<Store, Error> {
        let tmp = root.join(TMP);
        std::fs::create_dir_all(&tmp).map_err(Error::io("create the store", root))?;
        for entry in std::fs::read_dir(&tmp).map_err(Error::io("list", &tmp))? {
            let entry = entry.map_err(Error::io("list", &tmp))?;
            let _ = std::fs::remove_file(entry.path());
        }
        // Probe now that files can be created and synced here, rather than at the first request.
        let probe = tmp.join("probe");
        File::create(&probe)
            .and_then(|f| f.sync_all())
            .map_err(Error::io("write into the store", root))?;
        let _ = std::fs::remove_file(&probe);
        Ok(Store {
            root: root.to_path_buf(),
            seq: AtomicU64::new(0),
            bucket: None,
        })
    }

    /// Stores `gzip` (a gzip stream of one OTLP request, as a client sent it) durably.
    pub fn put_gzip(&self, signal: Signal, gzip: &[u8], now: i64) -> Result<PathBuf, Error> {
        self.put(signal, gzip, true, now)
    }

    /// Stores `raw` (protobuf) durably, as it is: compressing at request rate would cost the
    /// receiver more CPU than checking the request, and every reader an inflate.
    pub fn put_raw(&self, signal: Signal, raw: &[u8], now: i64) -> Result<PathBuf, Error> {
        self.put(signal, raw, false, now)
    }

    /// Writes `bytes` under `.tmp/`, syncs it, renames it into place and syncs the directory.
    fn put(
        &self,
        signal: Signal,
        bytes: &[u8],
        gzip: bool,
        now_unix_nanos: i64,
    ) -> Result<PathBuf, Error> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        if let Some((bucket, writer)) = &self.bucket {
            let name = layout::file_name_by(signal, now_unix_nanos, writer, seq, gzip);
            let key = format!(
                "{}/{}/{name}",
                signal.dir(),
                layout::day_dir(now_unix_nanos)
            );
            bucket.put(&key, bytes.to_vec())?;
            return Ok(self.root.join(key));
        }
        let dir = self
            .root
            .join(signal.dir())
            .join(layout::day_dir(now_unix_nanos));
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
            // The new directory entries must be durable too.
            sync_dir(&self.root.join(signal.dir()))?;
            sync_dir(&self.root)?;
        }
        let name = layout::file_name(signal, now_unix_nanos, std::process::id(), seq, gzip);
        let tmp = self.root.join(TMP).join(&name);
        let mut file = File::create(&tmp).map_err(Error::io("create", &tmp))?;
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("write", &tmp)(e));
        }
        drop(file);
        let path = dir.join(&name);
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("move into", &dir)(e));
        }
        sync_dir(&dir)?;
        Ok(path)
    }
}

/// 64 random bits, the writer id of a store in object storage.
fn writer_id() -> Result<u64, Error> {
    let mut bytes = [0u8; 8];
    let path = Path::new("/dev/urandom");
    std::io::Read::read_exact(
        &mut File::open(path).map_err(Error::io("read", path))?,
        &mut bytes,
    )
    .map_err(Error::io("read", path))?;
    Ok(u64::from_le_bytes(bytes))
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io("sync", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_land_atomically_and_leftovers_are_removed() {
        let root = std::env::temp_dir().join(format!("otelprof-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(TMP)).unwrap();
        std::fs::write(root.join(TMP).join("half-written"), b"x").unwrap();
        let store = Store::open(&root).unwrap();
        assert_eq!(std::fs::read_dir(root.join(TMP)).unwrap().count(), 0);
        let p = store
            .put_raw(Signal::Profiles, b"hello", 1_738_324_800_000_000_000)
            .unwrap();
        assert!(p.starts_with(root.join("profiles/2025-01-31")));
        assert!(p.to_string_lossy().ends_with(".otlp.pb"));
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        let g = store.put_gzip(Signal::Profiles, &[0x1f, 0x8b], 1).unwrap();
        assert!(g.to_string_lossy().ends_with(".otlp.pb.gz"));
        let m = store
            .put_raw(Signal::Metrics, b"m", 1_738_324_800_000_000_001)
            .unwrap();
        assert!(layout::is_metrics_file(m.file_name().unwrap()));
        assert_eq!(std::fs::read_dir(root.join(TMP)).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_unusable_directory_is_named() {
        let file = std::env::temp_dir().join(format!("otelprof-notadir-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let err = Store::open(&file).unwrap_err().to_string();
        assert_eq!(err, format!("cannot create the store {}", file.display()));
        let _ = std::fs::remove_file(&file);
    }
}
