//! Native code for the mixed-stack tests: C sources of `tests/c` built with the system's
//! `gcc` into shared libraries (once per test process), and `go tool pprof -raw`, which shows
//! what `-top` hides: each location's mapping, so kernel, native and Java frames can be told
//! apart by an independent reader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::environment::{repo_root, scratch_dir, which};
use crate::jdks::jdk17;
use crate::process::Tied as _;

/// Builds `tests/c/<name>.c` into `lib<lib>.so` (JNI headers of JDK 17, `-O2
/// -fomit-frame-pointer`: walking out of it needs its unwind tables) and returns the
/// directory holding it, for `-Djava.library.path`.
pub fn jni_library(name: &str, lib: &str) -> PathBuf {
    let dir = scratch_dir(&format!("jni-{lib}"));
    let gcc = which("gcc")
        .unwrap_or_else(|| panic!("`gcc` not found: install Debian gcc (scripts/test.sh does)"));
    let include = jdk17().home.join("include");
    let out = Command::new(gcc)
        .args(["-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-o"])
        .arg(dir.join(format!("lib{lib}.so")))
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(include.join("linux"))
        .arg(repo_root().join("tests/c").join(format!("{name}.c")))
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// `libnativemix.so`, the C half of `otelprof.tests.NativeMix`, built once.
pub fn native_mix_library() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| jni_library("native_mix", "nativemix"))
}

/// `seccomp_no_perf`, a launcher that refuses perf_event_open to what it runs (EPERM, or
/// killing the process: `tests/c/seccomp_no_perf.c`), built once.
pub fn seccomp_no_perf() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = scratch_dir("seccomp").join("seccomp_no_perf");
        let gcc = which("gcc").unwrap_or_else(|| panic!("`gcc` not found: install Debian gcc"));
        let out = Command::new(gcc)
            .args(["-O2", "-o"])
            .arg(&bin)
            .arg(repo_root().join("tests/c/seccomp_no_perf.c"))
            .output_tied()
            .unwrap();
        assert!(
            out.status.success(),
            "gcc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bin
    })
}

/// A binary a location is in, as `go tool pprof -raw` lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawMapping {
    pub file: String,
    pub build_id: String,
}

/// A location: its function name (the innermost, for inlined frames) and mapping id (0:
/// none, as Java frames).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawLocation {
    pub name: String,
    pub mapping: u64,
}

/// One sample: its first value, all its values (in the order of [`Raw::sample_types`]),
/// labels, and locations leaf first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawSample {
    pub value: i64,
    pub values: Vec<i64>,
    pub labels: BTreeMap<String, String>,
    pub locations: Vec<u64>,
}

/// What `go tool pprof -raw` printed.
#[derive(Clone, Debug, Default)]
pub struct Raw {
    /// The sample types, `type/unit` (`cpu/nanoseconds`).
    pub sample_types: Vec<String>,
    pub samples: Vec<RawSample>,
    pub locations: BTreeMap<u64, RawLocation>,
    pub mappings: BTreeMap<u64, RawMapping>,
}

impl Raw {
    /// The file of location `id`'s mapping (empty when it has none).
    pub fn file_of(&self, id: u64) -> &str {
        self.locations
            .get(&id)
            .and_then(|l| self.mappings.get(&l.mapping))
            .map_or("", |m| m.file.as_str())
    }

    /// The sum of the values of type `ty` (`cpu`) of the samples `keep` selects.
    pub fn total(&self, ty: &str, keep: impl Fn(&RawSample) -> bool) -> i64 {
        let Some(at) = self
            .sample_types
            .iter()
            .position(|t| t.split('/').next() == Some(ty))
        else {
            panic!("no sample type {ty} in {:?}", self.sample_types);
        };
        self.samples
            .iter()
            .filter(|s| keep(s))
            .map(|s| s.values[at])
            .sum()
    }

    pub fn name_of(&self, id: u64) -> &str {
        self.locations.get(&id).map_or("", |l| l.name.as_str())
    }

    /// Whether `s` has a kernel frame (a location mapped to `[kernel.kallsyms]`).
    pub fn has_kernel_frame(&self, s: &RawSample) -> bool {
        s.locations
            .iter()
            .any(|&l| self.file_of(l) == "[kernel.kallsyms]")
    }

    /// The frame names of `s`, leaf first.
    pub fn names(&self, s: &RawSample) -> Vec<&str> {
        s.locations.iter().map(|&l| self.name_of(l)).collect()
    }
}

/// `go tool pprof -raw` over `files`.
pub fn pprof_raw(files: &[PathBuf]) -> Raw {
    assert!(!files.is_empty(), "no profiles to read");
    let go = which("go").unwrap_or_else(|| panic!("`go` not found: install Debian golang-go"));
    let out = Command::new(go)
        .args(["tool", "pprof", "-raw"])
        .args(files)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof -raw failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_pprof_raw(&String::from_utf8_lossy(&out.stdout))
}

/// Parses `go tool pprof -raw`: `Samples:` (a values line `v1 v2: loc loc …`, then a labels
/// line `key:[value] …`), `Locations` (`id: 0xaddr M=m name :line s=…`, inlined lines on
/// continuation lines) and `Mappings` (`id: start/limit/offset file buildid [FN]`).
pub fn parse_pprof_raw(text: &str) -> Raw {
    let mut raw = Raw::default();
    let mut section = "";
    for line in text.lines() {
        match line.trim_end() {
            "Samples:" | "Locations" | "Mappings" => {
                section = line.trim_end();
                continue;
            }
            _ => {}
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        match section {
            "Samples:" if raw.sample_types.is_empty() => {
                raw.sample_types = trimmed
                    .split_whitespace()
                    .map(|t| t.trim_end_matches("[dflt]").to_owned())
                    .collect();
            }
            "Samples:" => parse_sample_line(trimmed, &mut raw.samples),
            "Locations" => {
                if let Some((id, loc)) = parse_location_line(trimmed) {
                    raw.locations.insert(id, loc);
                }
            }
            "Mappings" => {
                let Some((id, rest)) = trimmed.split_once(": ") else {
                    continue;
                };
                let mut f = rest.split_whitespace().skip(1);
                if let Ok(id) = id.parse() {
                    raw.mappings.insert(
                        id,
                        RawMapping {
                            file: f.next().unwrap_or("").to_owned(),
                            build_id: f
                                .next()
                                .filter(|b| !b.starts_with('['))
                                .unwrap_or("")
                                .to_owned(),
                        },
                    );
                }
            }
            _ => {}
        }
    }
    raw
}

fn parse_sample_line(line: &str, samples: &mut Vec<RawSample>) {
    if let Some((values, locations)) = line.split_once(": ") {
        let parsed: Result<Vec<i64>, _> = values.split_whitespace().map(str::parse).collect();
        if let Some(&value) = parsed.as_ref().ok().and_then(|v| v.first()) {
            samples.push(RawSample {
                value,
                values: parsed.unwrap_or_default(),
                labels: BTreeMap::new(),
                locations: locations
                    .split_whitespace()
                    .filter_map(|l| l.parse().ok())
                    .collect(),
            });
            return;
        }
    }
    // A labels line: `key:[value] key:[value]` (values may hold spaces).
    let Some(sample) = samples.last_mut() else {
        return;
    };
    let mut rest = line;
    while let Some((key, after)) = rest.split_once(":[") {
        let Some((value, next)) = after.split_once(']') else {
            break;
        };
        sample
            .labels
            .insert(key.trim().to_owned(), value.to_owned());
        rest = next;
    }
}

fn parse_location_line(line: &str) -> Option<(u64, RawLocation)> {
    let (id, rest) = line.split_once(": ")?;
    let id = id.trim().parse().ok()?;
    let mut tokens = rest.split_whitespace().peekable();
    tokens.next(); // the address
    let mapping = match tokens.peek() {
        Some(t) if t.starts_with("M=") => {
            let m = t[2..].parse().unwrap_or(0);
            tokens.next();
            m
        }
        _ => 0,
    };
    // `name [file]:line s=…`: the name ends before the token that ends in `:line`.
    let rest: Vec<&str> = tokens.collect();
    let line_at = rest
        .iter()
        .position(|t| {
            t.rsplit_once(':')
                .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .unwrap_or(rest.len());
    let name = &rest[..line_at];
    Some((
        id,
        RawLocation {
            name: name.join(" "),
            mapping,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pprof_raw() {
        let text = "PeriodType: cpu nanoseconds\nSamples:\nsamples/count cpu/nanoseconds[dflt]\n          2    2000000: 1 2 3 \n                thread_id:[7] thread_name:[C2 CompilerThre]\n          1    1000000: 3 \nLocations\n     1: 0xffffffff821dd1c0 M=1 ksys_write :0 s=0\n     2: 0x7f00 M=2 operator new :0 s=0\n     3: 0x0 a.B.c B.java:12 s=0\nMappings\n1: 0xffff800000000000/0xffffffffffffffff/0x0 [kernel.kallsyms] e4f1 [FN]\n2: 0x7ff2/0x7ff3/0x251000 /usr/lib/libjvm.so [FN]\n";
        let raw = parse_pprof_raw(text);
        assert_eq!(raw.samples.len(), 2);
        assert_eq!(raw.samples[0].value, 2);
        assert_eq!(raw.sample_types, ["samples/count", "cpu/nanoseconds"]);
        assert_eq!(raw.total("cpu", |_| true), 3_000_000);
        assert_eq!(raw.samples[0].locations, vec![1, 2, 3]);
        assert_eq!(raw.samples[0].labels["thread_name"], "C2 CompilerThre");
        assert!(raw.has_kernel_frame(&raw.samples[0]));
        assert!(!raw.has_kernel_frame(&raw.samples[1]));
        assert_eq!(
            raw.names(&raw.samples[0]),
            vec!["ksys_write", "operator new", "a.B.c"]
        );
        assert_eq!(raw.mappings[&1].build_id, "e4f1");
        assert_eq!(raw.mappings[&2].build_id, "");
        assert_eq!(raw.file_of(2), "/usr/lib/libjvm.so");
        assert_eq!(raw.file_of(3), "");
    }
}
