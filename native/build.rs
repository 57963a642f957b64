//! Builds what is not Rust: the exported OTEP 4947 TLS symbol (C), and `otelprof.jar`, the
//! Java shim (`-javaagent`, OpenTelemetry extension), into the target profile directory beside
//! `libotelprof.so`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    println!("cargo:rerun-if-changed=c/otel_thread_ctx.c");
    println!("cargo:rerun-if-changed=c/otel_thread_ctx.map");
    cc::Build::new()
        .file("c/otel_thread_ctx.c")
        .flag("-mtls-dialect=gnu2")
        .flag("-ftls-model=global-dynamic")
        .compile("otel_thread_ctx");
    // rustc's own version script exports only Rust items; this second one (GNU ld merges
    // them) puts the C TLS symbol into .dynsym, where OTEP 4947 readers look for it.
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        dir.join("c/otel_thread_ctx.map").display()
    );

    let shim = dir.join("../java-shim");
    println!("cargo:rerun-if-changed={}", shim.display());
    if let Err(e) = build_jar(&shim) {
        println!("cargo:warning=otelprof.jar not built: {e}");
    }
}

fn java_tool(name: &str) -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if Path::new(&home).join("bin").join(name).is_file() => {
            Path::new(&home).join("bin").join(name)
        }
        _ => PathBuf::from(name),
    }
}

/// The `.java` files under `dir` (following symbolic links), each also a rerun trigger, as
/// every directory under it is.
fn java_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = walkdir::WalkDir::new(dir).min_depth(1).follow_links(true);
    for e in entries.into_iter().flatten() {
        let p = e.path();
        println!("cargo:rerun-if-changed={}", p.display());
        if !e.file_type().is_dir() && p.extension().is_some_and(|x| x == "java") {
            out.push(p.to_path_buf());
        }
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e} (is a JDK installed?)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn build_jar(shim: &Path) -> Result<(), String> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let stubs = out_dir.join("stubs");
    let classes = out_dir.join("classes");
    for d in [&stubs, &classes] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
    }
    // The OpenTelemetry API is compiled against declarations written for that purpose and
    // never packaged: the jar carries no OpenTelemetry classes; the application's are used.
    let mut stub_sources = Vec::new();
    java_sources(&shim.join("compile-stubs"), &mut stub_sources);
    run(Command::new(java_tool("javac"))
        .args(["--release", "11", "-nowarn", "-d"])
        .arg(&stubs)
        .args(&stub_sources))?;
    let mut sources = Vec::new();
    java_sources(&shim.join("src"), &mut sources);
    run(Command::new(java_tool("javac"))
        .args(["--release", "11", "-Xlint:all", "-Werror", "-cp"])
        .arg(&stubs)
        .arg("-d")
        .arg(&classes)
        .args(&sources))?;
    let jar = out_dir.join("otelprof.jar");
    run(Command::new(java_tool("jar"))
        .arg("--create")
        .arg("--file")
        .arg(&jar)
        .arg("--manifest")
        .arg(shim.join("MANIFEST.MF"))
        .arg("-C")
        .arg(&classes)
        .arg(".")
        .arg("-C")
        .arg(shim.join("resources"))
        .arg("."))?;
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out; the jar goes to <target>/<profile>/,
    // beside libotelprof.so, where the shim looks for the library.
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .ok_or_else(|| "unexpected OUT_DIR layout".to_string())?;
    std::fs::copy(&jar, profile_dir.join("otelprof.jar")).map_err(|e| e.to_string())?;
    Ok(())
}
