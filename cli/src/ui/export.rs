//! What each view exports: the merged profile as pprof (gzip, `go tool pprof` reads it), the
//! call tree as collapsed stacks, or the flame graph as SVG (inferno, as `otelprof flame`).

use std::path::Path;

use otel_bridge::{FrameKind, ProfileBuilder};
use otelprof_store::merge::Merged;
use otelprof_store::query::tree::Tree;

use super::params::{self, Params};
use crate::cli::Cmd;
use crate::commands::{self, diff, drilldown, top};
use crate::flame;

/// One file to download.
pub struct Download {
    pub name: String,
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

/// pprof of a merge: one function per frame (with its file), one sample per stack, values in
/// the merge's unit.
pub fn pprof(m: &Merged) -> Vec<u8> {
    let mut b = ProfileBuilder::new(
        &[(m.sample_type.as_str(), m.unit.as_str())],
        (m.sample_type.as_str(), m.unit.as_str()),
        1,
    );
    let locations: Vec<_> = (0..m.frames.len())
        .map(|i| {
            let id = u32::try_from(i).unwrap_or(u32::MAX);
            let f = b.function(m.frame(id), m.file(id), 0);
            b.location(f, 0, FrameKind::Jvm)
        })
        .collect();
    // A merge by thread state keeps each sample's state as its label.
    let mut state_labels = vec![None; m.groups.len()];
    for (name, group) in otelprof_store::query::states::states_of(m) {
        if let Some(l) = state_labels.get_mut(group as usize) {
            *l = Some(b.str_label(otelprof_store::query::states::STATE_KEY, &name));
        }
    }
    let mut stack = Vec::new();
    for s in &m.stacks {
        stack.clear();
        // Stacks are root first in a merge, leaf first in a profile.
        stack.extend(
            s.frames
                .iter()
                .rev()
                .filter_map(|&f| locations.get(f as usize).copied()),
        );
        let labels = state_labels.get(s.group as usize).and_then(Option::as_ref);
        let labels = labels.map(std::slice::from_ref).unwrap_or(&[]);
        b.add_sample(&stack, labels, &[s.value.round() as i64]);
    }
    let (start, end) = m.window.unwrap_or((0, 0));
    otel_bridge::pprof::encode_gzip(&b.build(start, end.saturating_sub(start)))
}

/// The export `format` of `tree` (and of `merged` for pprof).
fn render(format: &str, tree: &Tree, merged: &Merged, stem: &str) -> Result<Download, String> {
    match format {
        "pprof" => Ok(Download {
            name: format!("{stem}.pb.gz"),
            content_type: "application/octet-stream",
            bytes: pprof(merged),
        }),
        "collapsed" => Ok(Download {
            name: format!("{stem}.folded.txt"),
            content_type: "text/plain; charset=utf-8",
            bytes: (tree.folded().join("\n") + "\n").into_bytes(),
        }),
        "svg" => Ok(Download {
            name: format!("{stem}.svg"),
            content_type: "image/svg+xml",
            bytes: flame::svg::render(tree, &tree.title).map_err(|e| format!("{e:#}"))?,
        }),
        other => Err(format!(
            "format {}: pprof, collapsed or svg",
            otelprof_primitives::escape::quote(other)
        )),
    }
}

/// `view` is `explore`, `trace` or `diff`; the other parameters are the view's.
pub fn export(store: &Path, view: &str, p: &Params) -> Result<Download, String> {
    let format = p.get("format").unwrap_or("pprof");
    let err = |e: anyhow::Error| format!("{e:#}");
    match view {
        "explore" => {
            let Cmd::Top(args) = params::command("top", p, store)? else {
                return Err("not a selection".into());
            };
            let a = top::answer(&args).map_err(err)?;
            let selector = args.select.selector().map_err(err)?;
            let tree = Tree::of(
                &a.merged,
                &format!("otelprof: {}", commands::describe(&selector, a.ty)),
            );
            render(format, &tree, &a.merged, "otelprof")
        }
        "trace" => {
            let Cmd::Drilldown(args) = params::command("drilldown", p, store)? else {
                return Err("not a drilldown".into());
            };
            let a = drilldown::answer(&args).map_err(err)?;
            let Some(shown) = a.shown() else {
                return Err("nothing to export".into());
            };
            let tree = Tree::of(
                shown,
                &format!(
                    "otelprof drilldown: {}",
                    commands::describe(&a.selector, a.ty)
                ),
            );
            render(format, &tree, shown, "otelprof-trace")
        }
        "diff" => {
            let Cmd::Diff(args) = params::command("diff", p, store)? else {
                return Err("not a diff".into());
            };
            let a = diff::answer(&args).map_err(err)?;
            let tree = Tree::diff(
                &a.base,
                &a.head,
                &format!("otelprof diff: {}", diff::title(&args)),
            );
            // pprof of one side (`side=base`, else the head): `go tool pprof -diff_base`
            // compares the two files.
            let (merged, stem) = if p.get("side") == Some("base") {
                (&a.base, "otelprof-base")
            } else {
                (&a.head, "otelprof-head")
            };
            render(format, &tree, merged, stem)
        }
        other => Err(format!(
            "no view {} to export",
            otelprof_primitives::escape::quote(other)
        )),
    }
}
