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
use otel_bridge::Profile;

use crate::store;

/// One decoded profile and the resource it came with (empty for pprof, which has none).
#[derive(Debug)]
pub struct Decoded {
    pub resource: Vec<KeyValue>,
    pub profile: Profile,
}

/// What the paths held.
#[derive(Debug, Default)]
pub struct Loaded {
    pub profiles: Vec<Decoded>,
    /// Files read (that held profiles or were empty requests).
    pub files: usize,
    pub pprof_files: usize,
    pub failures: Vec<(PathBuf, anyhow::Error)>,
}

impl Loaded {
    /// Prints one line per unreadable file to stderr.
    pub fn report_failures(&self) {
        for (path, err) in &self.failures {
            eprintln!("otelprof: skipped {}: {err:#}", path.display());
        }
    }
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

/// Decodes one file into its profiles.
pub fn decode_file(path: &Path) -> FileResult {
    let bytes = std::fs::read(path).context("cannot read")?;
    let format = format_of(path).unwrap_or(Format::Unknown);
    let otlp = |bytes: &[u8]| -> anyhow::Result<Vec<Decoded>> {
        Ok(otel_bridge::otlp::decode(bytes)?
            .into_iter()
            .map(|d| Decoded {
                resource: d.resource,
                profile: d.profile,
            })
            .collect())
    };
    let pprof = |bytes: &[u8]| -> anyhow::Result<Vec<Decoded>> {
        Ok(vec![Decoded {
            resource: Vec::new(),
            profile: otel_bridge::pprof::decode(bytes)?,
        }])
    };
    match format {
        Format::Otlp => otlp(&bytes)
            .map(|d| (d, false))
            .context("not OTLP profiles"),
        Format::Pprof => pprof(&bytes)
            .map(|d| (d, true))
            .context("not a pprof profile"),
        Format::Unknown => match otlp(&bytes) {
            Ok(d) if !d.is_empty() => Ok((d, false)),
            _ => pprof(&bytes)
                .map(|d| (d, true))
                .context("neither OTLP profiles nor pprof"),
        },
    }
}

/// Discovers and decodes everything under `paths`, on all cores.
pub fn load(paths: &[PathBuf]) -> Loaded {
    let (files, failures) = discover(paths);
    let results: Vec<Mutex<Option<FileResult>>> = files.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let (Some(path), Some(slot)) = (files.get(i), results.get(i)) else {
                    break;
                };
                let result = decode_file(path);
                if let Ok(mut slot) = slot.lock() {
                    *slot = Some(result);
                }
            });
        }
    });
    let mut loaded = Loaded {
        failures,
        ..Loaded::default()
    };
    for (path, slot) in files.into_iter().zip(results) {
        let result = slot
            .into_inner()
            .ok()
            .flatten()
            .unwrap_or_else(|| Err(anyhow::anyhow!("not decoded")));
        match result {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use otel_bridge::otlp::{EncodeOptions, ProfileId};
    use otel_bridge::{FrameKind, ProfileBuilder};

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
        let otlp = otel_bridge::otlp::encode_to_vec(
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
            otel_bridge::pprof::encode_gzip(&profile()),
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
