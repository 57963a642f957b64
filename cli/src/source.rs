//! Finding and decoding the profiles named on the command line: `otelprof receive` store
//! directories, directories of agent output, OTLP files (`*.otlp.pb`, `*.otlp.pb.gz`) and
//! pprof files (`*.pb.gz`, `*.pb`, `*.pprof`).
//!
//! Files are decoded on all cores. A file that cannot be read or decoded is reported with
//! its reason and the others are still used: one corrupt file must not hide an hour of data.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::Context as _;
use opentelemetry::KeyValue;
use otelprof_profile::Profile;

use crate::store;

/// One decoded profile and the resource it came with (empty for pprof, which has none).
#[derive(Debug)]
pub struct Decoded {
    pub resource: Vec<KeyValue>,
    pub profile: Profile,
}

/// What the paths held (tests).
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Loaded {
    pub profiles: Vec<Decoded>,
    /// Files read (that held profiles or were empty requests).
    pub files: usize,
    pub pprof_files: usize,
    pub failures: Vec<(PathBuf, anyhow::Error)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Otlp,
    Pprof,
    /// Not known from the name: try OTLP, then pprof.
    Unknown,
}

fn format_of(path: &Path) -> Option<Format> {
    let name = path.file_name()?.to_str()?;
    if name.starts_with('.') || store::is_metrics_file(name) {
        return None;
    }
    if name.ends_with(".otlp.pb") || name.ends_with(".otlp.pb.gz") || name.ends_with(".otlp") {
        Some(Format::Otlp)
    } else if name.ends_with(".pb.gz") || name.ends_with(".pb") || name.ends_with(".pprof") {
        Some(Format::Pprof)
    } else {
        None
    }
}

/// Every profile file under `paths`: files as given (any name), directories searched
/// recursively for profile file names (hidden entries, such as the store's `.tmp`, skipped).
pub fn discover(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, anyhow::Error)>) {
    let mut files = Vec::new();
    let mut failures = Vec::new();
    for path in paths {
        if path.is_dir() {
            let before = files.len();
            if let Err(e) = walk(path, &mut files) {
                failures.push((path.clone(), e));
            } else if files.len() == before {
                failures.push((
                    path.clone(),
                    anyhow::anyhow!(
                        "no profiles here (looked for *.otlp.pb.gz, *.otlp.pb, *.pb.gz, *.pb)"
                    ),
                ));
            }
        } else if path.exists() {
            files.push(path.clone());
        } else {
            failures.push((path.clone(), anyhow::anyhow!("no such file or directory")));
        }
    }
    (files, failures)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    // Sorted, so that output never depends on the order the file system lists entries in.
    entries.sort();
    for path in entries {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else if format_of(&path).is_some() {
            out.push(path);
        }
    }
    Ok(())
}

/// A file's profiles, and whether it was pprof.
type FileResult = anyhow::Result<(Vec<Decoded>, bool)>;

/// Decodes one file into its profiles, reading it into `buf`: a worker that reuses one buffer
/// for every file does not fault in fresh pages for each (the decoded profiles own copies of
/// what they keep).
pub fn decode_file(path: &Path, buf: &mut Vec<u8>) -> FileResult {
    use std::io::Read as _;
    buf.clear();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(buf))
        .context("cannot read")?;
    let bytes = &buf[..];
    let format = format_of(path).unwrap_or(Format::Unknown);
    let otlp = |bytes: &[u8]| -> anyhow::Result<Vec<Decoded>> {
        let raw = inflate(bytes)?;
        Ok(otelprof_profile::otlp::decode(&raw)?
            .into_iter()
            .map(|(resource, profile)| Decoded { resource, profile })
            .collect())
    };
    let pprof = |bytes: &[u8]| -> anyhow::Result<Vec<Decoded>> {
        Ok(vec![Decoded {
            resource: Vec::new(),
            profile: otelprof_profile::pprof::decode(bytes)?,
        }])
    };
    match format {
        Format::Otlp => otlp(bytes).map(|d| (d, false)).context("not OTLP profiles"),
        Format::Pprof => pprof(bytes)
            .map(|d| (d, true))
            .context("not a pprof profile"),
        Format::Unknown => match otlp(bytes) {
            Ok(d) if !d.is_empty() => Ok((d, false)),
            _ => pprof(bytes)
                .map(|d| (d, true))
                .context("neither OTLP profiles nor pprof"),
        },
    }
}

/// Largest inflated file read.
const MAX_INFLATED: u64 = 512 << 20;

/// The bytes of a gzip file, or the bytes as they are.
fn inflate(bytes: &[u8]) -> anyhow::Result<std::borrow::Cow<'_, [u8]>> {
    use std::io::Read as _;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    }
    let mut raw = Vec::with_capacity(bytes.len() * 4);
    flate2::read::MultiGzDecoder::new(bytes)
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut raw)
        .context("bad gzip stream")?;
    if raw.len() as u64 > MAX_INFLATED {
        anyhow::bail!("inflates to more than {MAX_INFLATED} bytes");
    }
    Ok(std::borrow::Cow::Owned(raw))
}

/// Discovers and decodes everything under `paths`, on all cores, keeping it all in memory.
/// For small inputs and tests; the reading commands stream with [`scan`].
#[cfg(test)]
pub fn load(paths: &[PathBuf]) -> Loaded {
    let (files, failures) = discover(paths);
    let mut loaded = Loaded {
        failures,
        ..Loaded::default()
    };
    for path in files {
        match decode_file(&path, &mut Vec::new()) {
            Ok((profiles, is_pprof)) => {
                loaded.files += 1;
                if is_pprof {
                    loaded.pprof_files += 1;
                }
                loaded.profiles.extend(profiles);
            }
            Err(e) => loaded.failures.push((path, e)),
        }
    }
    loaded
}

/// What a [`scan`] went through.
#[derive(Debug, Default)]
pub struct ScanStats {
    pub files: usize,
    pub pprof_files: usize,
    pub profiles: usize,
    pub failures: Vec<(PathBuf, anyhow::Error)>,
}

/// Decodes every file on all cores and hands each profile to `visit` with the worker's own
/// state (made by `init`); returns the states, to be combined by the caller. Profiles are
/// dropped as soon as they are visited, so memory does not grow with the store.
pub fn scan<S: Send>(
    files: &[PathBuf],
    init: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, &Decoded) + Sync,
) -> (Vec<S>, ScanStats) {
    let next = AtomicUsize::new(0);
    let stats = Mutex::new(ScanStats::default());
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.len().max(1));
    let states = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut state = init();
                    let mut local = ScanStats::default();
                    let mut buf = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(i) else { break };
                        match decode_file(path, &mut buf) {
                            Ok((profiles, is_pprof)) => {
                                local.files += 1;
                                local.pprof_files += usize::from(is_pprof);
                                local.profiles += profiles.len();
                                for d in &profiles {
                                    visit(&mut state, d);
                                }
                            }
                            Err(e) => local.failures.push((path.clone(), e)),
                        }
                    }
                    if let Ok(mut s) = stats.lock() {
                        s.files += local.files;
                        s.pprof_files += local.pprof_files;
                        s.profiles += local.profiles;
                        s.failures.extend(local.failures);
                    }
                    state
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect::<Vec<S>>()
    });
    let mut stats = stats.into_inner().unwrap_or_default();
    stats.failures.sort_by(|a, b| a.0.cmp(&b.0));
    (states, stats)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use otelprof_profile::otlp::{EncodeOptions, ProfileId};
    use otelprof_profile::{FrameKind, ProfileBuilder};

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("otelprof-src-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn profile() -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10,
        );
        let f = b.function("a.B.c", "B.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        b.add_sample(&[l], &[], &[7, 70]);
        b.build(0, 10)
    }

    #[test]
    fn reads_otlp_and_pprof_and_reports_bad_files() {
        let dir = scratch_dir("mixed");
        let sub = dir.join("profiles/2025-01-01");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(dir.join(".tmp")).unwrap();
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_attribute(KeyValue::new("service.name", "shop"))
            .build();
        let otlp = otelprof_profile::otlp::encode_to_vec(
            &profile(),
            &resource,
            ProfileId::from_random([1; 16]),
            &EncodeOptions::default(),
        )
        .unwrap();
        std::fs::write(sub.join("1-1.otlp.pb"), &otlp).unwrap();
        std::fs::write(dir.join(".tmp/2-2.otlp.pb"), &otlp).unwrap();
        std::fs::write(
            dir.join("cpu.pb.gz"),
            otelprof_profile::pprof::encode_gzip(&profile()),
        )
        .unwrap();
        std::fs::write(dir.join("broken.otlp.pb.gz"), [0x1f, 0x8b, 0, 1]).unwrap();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        let unnamed = dir.join("unnamed.bin");
        std::fs::write(&unnamed, &otlp).unwrap();

        let loaded = load(&[dir.clone(), unnamed, dir.join("missing")]);
        assert_eq!(loaded.files, 3);
        assert_eq!(loaded.pprof_files, 1);
        assert_eq!(loaded.profiles.len(), 3);
        let with_resource = loaded
            .profiles
            .iter()
            .filter(|d| !d.resource.is_empty())
            .count();
        assert_eq!(with_resource, 2);
        let failed: Vec<String> = loaded
            .failures
            .iter()
            .map(|(p, e)| format!("{}: {e:#}", p.file_name().unwrap().to_string_lossy()))
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].starts_with("missing: no such file"), "{failed:?}");
        assert!(
            failed[1].starts_with("broken.otlp.pb.gz: not OTLP profiles"),
            "{failed:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
