//! Flame graphs of a call tree ([`Tree`], computed by the store's query engine): the
//! interactive HTML page ([`html`]) and SVG ([`svg`], drawn by inferno). The page's viewer
//! ([`VIEWER`]) is also the web UI's.

pub mod html;
pub mod svg;

use std::path::{Path, PathBuf};

use anyhow::Context as _;

pub use otelprof_store::query::tree::Tree;

/// The flame graph viewer (JavaScript): `OtelprofFlame.page(data)` draws a self-contained
/// page, `OtelprofFlame.mount(element, data, options)` the web UI's flame graph, both from
/// [`html::data`].
pub const VIEWER: &str = include_str!("flame.js");

/// Output format, from the file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Svg,
}

pub fn format_of(path: &Path) -> anyhow::Result<Format> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html" | "htm") => Ok(Format::Html),
        Some("svg") => Ok(Format::Svg),
        _ => anyhow::bail!(
            "{}: name the output *.html (interactive) or *.svg",
            path.display()
        ),
    }
}

/// Writes `tree` to `path` in the format its name asks for, atomically (a reader never sees
/// half a page).
pub fn write(tree: &Tree, subtitle: &str, path: &Path) -> anyhow::Result<PathBuf> {
    let bytes = match format_of(path)? {
        Format::Html => html::render(tree, subtitle).into_bytes(),
        Format::Svg => svg::render(tree, subtitle)?,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("part");
    std::fs::write(&tmp, &bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path.to_path_buf())
}
