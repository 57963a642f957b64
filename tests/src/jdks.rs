//! The JDKs the tests run on (OpenJDK 17 and Temurin 25), and the Java workloads compiled for
//! them: `examples/workloads` and `tests/java`, and `tests/java-otel` against the real
//! OpenTelemetry Java SDK.

use crate::process::Tied as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::environment::{jar_path, repo_root, scratch_dir};

/// The real OpenTelemetry Java SDK 1.30.1 (scripts/fetch-otel-java.sh fetches and caches it).
pub fn otel_sdk_jar() -> &'static Path {
    static JAR: OnceLock<PathBuf> = OnceLock::new();
    JAR.get_or_init(|| {
        if let Some(p) = std::env::var_os("OTELPROF_OTEL_JAR") {
            return PathBuf::from(p);
        }
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/fetch-otel-java.sh"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn_tied()
            .and_then(|child| child.wait_with_output())
            .unwrap();
        assert!(out.status.success(), "scripts/fetch-otel-java.sh failed");
        let p = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        assert!(p.is_file(), "{} missing", p.display());
        p
    })
}

/// Compiles `tests/java-otel` against the real OpenTelemetry SDK and otelprof.jar (for the
/// direct API), once per test process.
pub fn otel_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = scratch_dir("otel-classes");
        let mut sources = Vec::new();
        collect_java(&repo_root().join("tests/java-otel"), &mut sources);
        let cp = std::env::join_paths([otel_sdk_jar().to_path_buf(), jar_path()]).unwrap();
        let status = Command::new(jdk17().home.join("bin/javac"))
            .args(["--release", "17", "-g", "-cp"])
            .arg(cp)
            .arg("-d")
            .arg(&out)
            .args(&sources)
            .status_tied()
            .unwrap();
        assert!(status.success(), "javac of tests/java-otel failed");
        out
    })
}

/// A JDK the tests run on.
#[derive(Clone, Debug)]
pub struct Jdk {
    pub name: &'static str,
    pub home: PathBuf,
}

impl Jdk {
    pub fn java(&self) -> PathBuf {
        self.home.join("bin/java")
    }

    pub fn feature(&self) -> u32 {
        let out = Command::new(self.java())
            .arg("-version")
            .output_tied()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        let v = text.split('"').nth(1).unwrap_or("0");
        v.split('.').next().unwrap().parse().unwrap()
    }
}

fn jdk_at(name: &'static str, env: &str, candidates: &[&str]) -> Jdk {
    let home = std::env::var_os(env)
        .map(PathBuf::from)
        .or_else(|| {
            candidates
                .iter()
                .map(PathBuf::from)
                .find(|p| p.join("bin/java").is_file())
        })
        .unwrap_or_else(|| {
            panic!("{name} not found: set {env} to its home (looked in {candidates:?})")
        });
    assert!(
        home.join("bin/java").is_file(),
        "{}: no bin/java",
        home.display()
    );
    Jdk { name, home }
}

pub fn jdk17() -> Jdk {
    jdk_at(
        "OpenJDK 17",
        "OTELPROF_JDK17",
        &[
            "/usr/lib/jvm/java-17-openjdk-amd64",
            "/usr/lib/jvm/temurin-17-jdk-amd64",
        ],
    )
}

pub fn jdk25() -> Jdk {
    jdk_at(
        "Temurin 25",
        "OTELPROF_JDK25",
        &["/usr/lib/jvm/temurin-25-jdk-amd64"],
    )
}

/// Both JDKs the product supports and the tests must pass on.
pub fn all_jdks() -> Vec<Jdk> {
    vec![jdk17(), jdk25()]
}

/// Compiles `examples/workloads` and `tests/java` once per test process (with JDK 17's javac,
/// `--release 17`, so the classes run on every supported JDK) and returns the class directory.
pub fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = scratch_dir("classes");
        let mut sources = Vec::new();
        for dir in ["examples/workloads", "tests/java"] {
            collect_java(&repo_root().join(dir), &mut sources);
        }
        assert!(!sources.is_empty(), "no Java sources found");
        let javac = jdk17().home.join("bin/javac");
        let status = Command::new(javac)
            .args(["--release", "17", "-g", "-d"])
            .arg(&out)
            .args(&sources)
            .status_tied()
            .unwrap();
        assert!(status.success(), "javac failed");
        out
    })
}

fn collect_java(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_java(&p, out);
        } else if p.extension().is_some_and(|x| x == "java") {
            out.push(p);
        }
    }
}
