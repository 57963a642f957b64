//! Stores in object storage: `s3://bucket/prefix`, `gs://bucket/prefix` and
//! `az://container/prefix`, through Apache Arrow's `object_store` crate, configured from the
//! environment the way each cloud's own tools are (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP` for a plain-HTTP endpoint;
//! `GOOGLE_*`; `AZURE_*`). `file:///dir` is the local store at `/dir`, written and read as
//! any directory.
//!
//! The layout inside the prefix is the directory layout ([`crate::layout`],
//! [`crate::columnar`]), object for file: the Hive partitions that DuckDB, Spark and Trino
//! read are the same key prefixes. An object store has no rename and needs none: a PUT is
//! atomic (the object is whole or absent) and durable when it answers, so a request is
//! written straight to its final name, and acknowledged after that PUT succeeds.
//!
//! Readers ([`Bucket::mirror_needed`]) copy the objects a question reads (the `cache`
//! module) into a local directory and answer from it with the same engine as a local store: objects
//! are immutable under their names, so a copy whose size matches is current and only new
//! objects are fetched; names that change in place (the conversion marker, hidden names) are
//! fetched every time; local copies of objects gone from the bucket (compacted away,
//! expired) are removed, so nothing is counted twice.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::aws::AmazonS3ConfigKey as Aws;
use object_store::azure::AzureConfigKey as Azure;
use object_store::gcp::GoogleConfigKey as Gcp;
use object_store::path::Path as Key;
use object_store::ClientConfigKey as Client;
use object_store::{ObjectStore, ObjectStoreExt as _};

use crate::error::Error;

/// The URL schemes of object stores, and what each is.
const SCHEMES: [&str; 4] = ["s3://", "s3a://", "gs://", "az://"];
const FILE_SCHEME: &str = "file://";
/// The lease object's key in a store ([`crate::shared`]): who maintains it, until when.
pub const LEASE: &str = ".maintain-lease";
/// What the name of a holder's working directory ([`work_dir`]) has after the readers' copy's.
pub const WORK_DIR_MARK: &str = "-maintain-";
/// Objects fetched at once by a mirror.
const FETCHES_AT_ONCE: usize = 16;

/// Where a store lives.
#[derive(Debug)]
pub enum Location {
    /// A local directory (a path, or a `file://` URL).
    Dir(PathBuf),
    /// A prefix in a bucket.
    Bucket(Bucket),
}

impl Location {
    /// What a store argument names: an object store URL, a `file://` URL, or a directory.
    pub fn parse(arg: &Path) -> Result<Location, Error> {
        let Some(text) = arg.to_str() else {
            return Ok(Location::Dir(arg.to_path_buf()));
        };
        if let Some(path) = text.strip_prefix(FILE_SCHEME) {
            if !path.starts_with('/') {
                return Err(Error::BadUrl {
                    url: text.to_owned(),
                    why: "a file:// URL names an absolute path (file:///var/otelprof)".into(),
                });
            }
            return Ok(Location::Dir(PathBuf::from(path)));
        }
        if is_bucket_url(arg) {
            return Ok(Location::Bucket(Bucket::open(text)?));
        }
        Ok(Location::Dir(arg.to_path_buf()))
    }
}

/// Whether a store argument is an object store URL (`s3://`, `gs://`, `az://`).
pub fn is_bucket_url(arg: &Path) -> bool {
    arg.to_str()
        .is_some_and(|t| SCHEMES.iter().any(|s| t.starts_with(s)))
}

/// A store's prefix in a bucket, and a client for it.
#[derive(Clone)]
pub struct Bucket {
    url: String,
    client: Arc<dyn ObjectStore>,
    prefix: Key,
    /// Where the client's requests run ([`runtime`]).
    runtime: &'static tokio::runtime::Runtime,
}

/// Retries end within a minute: a request is acknowledged (or refused, and the client sends it
/// again) well within [`crate::maintain::LAG`] of its receipt time, so a conversion, which
/// takes the requests received up to `LAG` before it lists the store, never misses one whose
/// write was still under way.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 4,
        retry_timeout: std::time::Duration::from_secs(30),
        ..object_store::RetryConfig::default()
    }
}

/// Each request within 30 s (30 s of retries + 30 s: a minute at most); set over the
/// environment's client settings (AWS_ALLOW_HTTP and the like), which stay.
const REQUEST_TIMEOUT: &str = "30s";
const CONNECT_TIMEOUT: &str = "5s";

/// The runtime of every bucket's requests, made at the first and never dropped: callers block
/// on it from threads of their own (or tasks moved off an async runtime's workers), and a
/// runtime dropped inside another's task would stop the process.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Error> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(r) = RUNTIME.get() {
        return Ok(r);
    }
    let made = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("otelprof-bucket")
        .enable_all()
        .build()
        .map_err(Error::io("start the object store client", Path::new("")))?;
    Ok(RUNTIME.get_or_init(|| made))
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket").field("url", &self.url).finish()
    }
}

/// An object of a store, by its key below the store's prefix.
#[derive(Clone, Debug)]
pub struct Object {
    pub key: String,
    pub size: u64,
}

/// An object's bytes and its ETag (when the store gives one).
pub type Versioned = (Vec<u8>, Option<String>);

/// Whether a copy in the directory (first argument) needs the object of a key (second).
pub type Needed<'a> = dyn Fn(&Path, &str) -> bool + 'a;

/// What a mirror did.
#[derive(Clone, Debug, Default)]
pub struct Mirrored {
    /// The objects the copy holds, by key: the store as the mirror saw it.
    pub objects: Vec<Object>,
    /// Objects listed, fetched, and local copies removed.
    pub listed: usize,
    pub fetched: usize,
    pub removed: usize,
    /// Bytes fetched.
    pub bytes: u64,
    /// The local copies of the objects the copy was made for (all of them for a whole
    /// mirror): what a reader reads.
    pub in_use: Vec<PathBuf>,
}

impl Bucket {
    /// A client for the store at `url`, configured from the environment.
    pub fn open(url: &str) -> Result<Bucket, Error> {
        let bad = |why: String| Error::BadUrl {
            url: url.to_owned(),
            why,
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("no scheme".into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket name".into()));
        }
        let prefix = Key::parse(prefix.trim_matches('/')).map_err(|e| bad(e.to_string()))?;
        // reqwest's TLS is built without a provider of its own: ring, as the receiver's. A
        // provider installed already (by the receiver) is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let root = format!("{scheme}://{bucket}");
        let client: Arc<dyn ObjectStore> = match scheme {
            "s3" | "s3a" => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(&root)
                    .with_retry(retry())
                    .with_config(Aws::Client(Client::Timeout), REQUEST_TIMEOUT)
                    .with_config(Aws::Client(Client::ConnectTimeout), CONNECT_TIMEOUT)
                    .build()
                    .map_err(|e| bad(e.to_string()))?,
            ),
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(&root)
                    .with_retry(retry())
                    .with_config(Gcp::Client(Client::Timeout), REQUEST_TIMEOUT)
                    .with_config(Gcp::Client(Client::ConnectTimeout), CONNECT_TIMEOUT)
                    .build()
                    .map_err(|e| bad(e.to_string()))?,
            ),
            "az" => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(&root)
                    .with_retry(retry())
                    .with_config(Azure::Client(Client::Timeout), REQUEST_TIMEOUT)
                    .with_config(Azure::Client(Client::ConnectTimeout), CONNECT_TIMEOUT)
                    .build()
                    .map_err(|e| bad(e.to_string()))?,
            ),
            other => return Err(bad(format!("unknown scheme {other}://"))),
        };
        Ok(Bucket {
            url: url.to_owned(),
            client,
            prefix,
            runtime: runtime()?,
        })
    }

    /// Checks that the bucket answers (it exists, the credentials may list it): one listing of
    /// the prefix's first level, so that a receiver fails at its start rather than at its
    /// first request.
    pub fn probe(&self) -> Result<(), Error> {
        self.runtime
            .block_on(self.client.list_with_delimiter(Some(&self.prefix)))
            .map(|_| ())
            .map_err(self.fail("list", ""))
    }

    /// The store's URL, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn key(&self, key: &str) -> Key {
        let mut parts: Vec<_> = self.prefix.parts().collect();
        parts.extend(key.split('/').filter(|p| !p.is_empty()).map(Into::into));
        Key::from_iter(parts)
    }

    fn fail(&self, what: &'static str, key: &str) -> impl FnOnce(object_store::Error) -> Error {
        let object = format!("{}/{key}", self.url.trim_end_matches('/'));
        move |source| Error::Bucket {
            what,
            object,
            source,
        }
    }

    /// Writes `bytes` as the object `key`; returns once the store has it.
    pub fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), Error> {
        let path = self.key(key);
        self.runtime
            .block_on(self.client.put(&path, bytes.into()))
            .map(|_| ())
            .map_err(self.fail("write", key))
    }

    /// The object `key` and its ETag, or `None` when there is none.
    pub fn get(&self, key: &str) -> Result<Option<Versioned>, Error> {
        let path = self.key(key);
        let got = self.runtime.block_on(async {
            let got = self.client.get(&path).await?;
            let etag = got.meta.e_tag.clone();
            got.bytes().await.map(|b| (b.to_vec(), etag))
        });
        match got {
            Ok(g) => Ok(Some(g)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.fail("read", key)(e)),
        }
    }

    /// Writes `key` only if no object has that name (`If-None-Match: *`): its ETag, or `None`
    /// when one exists already.
    pub fn put_new(&self, key: &str, bytes: Vec<u8>) -> Result<Option<String>, Error> {
        self.put_if(key, bytes, object_store::PutMode::Create)
    }

    /// Replaces `key` only if it is still the version `etag` names (`If-Match`): the new ETag,
    /// or `None` when another writer changed it first.
    pub fn put_replacing(
        &self,
        key: &str,
        bytes: Vec<u8>,
        etag: &str,
    ) -> Result<Option<String>, Error> {
        let version = object_store::UpdateVersion {
            e_tag: Some(etag.to_owned()),
            version: None,
        };
        self.put_if(key, bytes, object_store::PutMode::Update(version))
    }

    fn put_if(
        &self,
        key: &str,
        bytes: Vec<u8>,
        mode: object_store::PutMode,
    ) -> Result<Option<String>, Error> {
        let path = self.key(key);
        let options = object_store::PutOptions {
            mode,
            ..Default::default()
        };
        let put = self
            .runtime
            .block_on(self.client.put_opts(&path, bytes.into(), options));
        match put {
            // A store that gives no ETag cannot take part in a lease: nothing can be replaced
            // conditionally after it.
            Ok(done) => Ok(Some(done.e_tag.unwrap_or_default())),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(None),
            Err(e) => Err(self.fail("write", key)(e)),
        }
    }

    /// Deletes `key` (an object already gone is no error).
    pub fn delete(&self, key: &str) -> Result<(), Error> {
        let path = self.key(key);
        match self.runtime.block_on(self.client.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.fail("delete", key)(e)),
        }
    }

    /// Every object of the store (keys below its prefix).
    pub fn list(&self) -> Result<Vec<Object>, Error> {
        let strip = self.prefix.parts().count();
        let listed = self
            .runtime
            .block_on(self.client.list(Some(&self.prefix)).try_collect::<Vec<_>>());
        let listed = listed.map_err(self.fail("list", ""))?;
        Ok(listed
            .into_iter()
            .map(|m| Object {
                key: m
                    .location
                    .parts()
                    .skip(strip)
                    .map(|p| p.as_ref().to_owned())
                    .collect::<Vec<_>>()
                    .join("/"),
                size: m.size,
            })
            .collect())
    }

    /// Copies the whole store into `dir` (see the module's doc): fetches the objects that are
    /// new or changed, removes the copies of objects that are gone. What a holder of the
    /// lease maintains.
    pub fn mirror(&self, dir: &Path) -> Result<Mirrored, Error> {
        self.mirror_where(dir, None)
    }

    /// Copies into `dir` the objects for which `needed(dir, key)` holds (called once the
    /// objects whose names change in place, the conversion marker, are fetched), as
    /// [`Bucket::mirror`] does; local copies of other objects still in the bucket stay (a
    /// cache), and those of objects gone are removed. What a reader copies (the store's
    /// `cache` module).
    pub fn mirror_needed(&self, dir: &Path, needed: &Needed<'_>) -> Result<Mirrored, Error> {
        self.mirror_where(dir, Some(needed))
    }

    fn mirror_where(&self, dir: &Path, needed: Option<&Needed<'_>>) -> Result<Mirrored, Error> {
        let objects = self.list()?;
        let tmp = dir.join(crate::layout::TMP);
        std::fs::create_dir_all(&tmp).map_err(Error::io("create", &tmp))?;
        let mut done = Mirrored {
            listed: objects.len(),
            ..Mirrored::default()
        };
        let mut kept = HashSet::new();
        // Writes in progress of a local store copied up, anything outside the layout, and
        // the maintenance lease (no data).
        let objects = objects.into_iter().filter(|o| {
            o.key != LEASE
                && !o.key.split('/').any(|p| p.is_empty() || p == "..")
                && !o.key.split('/').rev().skip(1).any(crate::layout::is_hidden)
        });
        // Names that change in place (the conversion marker) first: what else is needed may
        // depend on them.
        let (changing, rest): (Vec<Object>, Vec<Object>) = objects.partition(|o| {
            o.key
                .rsplit('/')
                .next()
                .is_some_and(crate::layout::is_hidden)
        });
        for o in &changing {
            kept.insert(dir.join(&o.key));
        }
        let changing = changing
            .into_iter()
            .map(|o| (dir.join(&o.key), o))
            .collect();
        self.fetch(changing, &tmp, &mut kept, &mut done)?;
        let mut wanted = Vec::new();
        for o in rest {
            let local = dir.join(&o.key);
            kept.insert(local.clone());
            if needed.is_some_and(|n| !n(dir, &o.key)) {
                continue;
            }
            let current = std::fs::metadata(&local).is_ok_and(|m| m.len() == o.size);
            done.objects.push(o.clone());
            done.in_use.push(local.clone());
            if !current {
                wanted.push((local, o));
            }
        }
        self.fetch(wanted, &tmp, &mut kept, &mut done)?;
        done.removed = remove_others(dir, &kept)?;
        Ok(done)
    }

    /// Fetches `wanted` (local path, object) into place through `tmp`; an object gone since
    /// the listing is no part of the store any more.
    fn fetch(
        &self,
        wanted: Vec<(PathBuf, Object)>,
        tmp: &Path,
        kept: &mut HashSet<PathBuf>,
        done: &mut Mirrored,
    ) -> Result<(), Error> {
        let fetches =
            futures_util::stream::iter(wanted.into_iter().enumerate().map(|(i, (local, o))| {
                let client = Arc::clone(&self.client);
                let path = self.key(&o.key);
                let tmp = tmp.join(format!("fetch-{}-{i}", std::process::id()));
                async move {
                    let got = client.get(&path).await;
                    let bytes = match got {
                        Ok(g) => g.bytes().await,
                        Err(e) => Err(e),
                    };
                    (o, local, tmp, bytes)
                }
            }))
            .buffer_unordered(FETCHES_AT_ONCE)
            .collect::<Vec<_>>();
        for (o, local, tmp, bytes) in self.runtime.block_on(fetches) {
            let bytes = match bytes {
                Ok(b) => b,
                Err(object_store::Error::NotFound { .. }) => {
                    kept.remove(&local);
                    done.objects.retain(|k| k.key != o.key);
                    done.in_use.retain(|p| *p != local);
                    continue;
                }
                Err(e) => return Err(self.fail("read", &o.key)(e)),
            };
            if let Some(parent) = local.parent() {
                std::fs::create_dir_all(parent).map_err(Error::io("create", parent))?;
            }
            std::fs::write(&tmp, &bytes).map_err(Error::io("write", &tmp))?;
            std::fs::rename(&tmp, &local).map_err(Error::io("write", &local))?;
            done.fetched += 1;
            done.bytes += bytes.len() as u64;
        }
        Ok(())
    }
}

/// Removes the files under `dir` (hidden directories aside) that are not in `kept`.
fn remove_others(dir: &Path, kept: &HashSet<PathBuf>) -> Result<usize, Error> {
    let mut removed = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                if !crate::layout::is_hidden(&entry.file_name()) {
                    stack.push(path);
                }
            } else if !kept.contains(&path) {
                std::fs::remove_file(&path).map_err(Error::io("remove", &path))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// The working directory in which `writer` maintains the bucket store at `url` when it holds
/// its lease ([`crate::shared`]): beside the readers' copy, its own.
pub fn work_dir(url: &str, base: Option<&Path>, writer: &str) -> PathBuf {
    let mut dir = cache_dir(url, base).into_os_string();
    dir.push(format!("{WORK_DIR_MARK}{writer}"));
    PathBuf::from(dir)
}

/// The local directory a bucket store is mirrored into: [`cache_base`], then the URL with every
/// byte outside `[A-Za-z0-9.-]` as `_` and a hash of the URL, so that two stores never share
/// a copy.
pub fn cache_dir(url: &str, base: Option<&Path>) -> PathBuf {
    let base = cache_base(base);
    let name: String = url
        .trim_end_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // FNV-1a: names that the replacement above made alike stay apart.
    let hash = url
        .trim_end_matches('/')
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    base.join(format!("{name}-{:08x}", hash >> 32))
}

/// The directory of every store's local copy: `base` (`--cache`), or the user's cache
/// directory (`$XDG_CACHE_HOME` or `~/.cache`) under `otelprof/`.
pub fn cache_base(base: Option<&Path>) -> PathBuf {
    base.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("otelprof")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_arguments_are_told_apart() {
        assert!(is_bucket_url(Path::new("s3://b/p")));
        assert!(is_bucket_url(Path::new("gs://b")));
        assert!(!is_bucket_url(Path::new("/var/otelprof")));
        assert!(!is_bucket_url(Path::new("file:///var/otelprof")));
        match Location::parse(Path::new("file:///var/otelprof")).unwrap() {
            Location::Dir(d) => assert_eq!(d, Path::new("/var/otelprof")),
            Location::Bucket(_) => panic!("a file:// URL is a directory"),
        }
        assert!(Location::parse(Path::new("file://relative")).is_err());
        assert!(Location::parse(Path::new("s3:///prefix")).is_err());
        let dir = cache_dir("s3://b/fleet/", Some(Path::new("/c")));
        assert!(dir.starts_with("/c") && dir.to_string_lossy().contains("/s3___b_fleet-"));
        assert_ne!(dir, cache_dir("s3://b_fleet", Some(Path::new("/c"))));
    }
}
