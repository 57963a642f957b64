//! `otelprof flame`: a flame graph of the selection, as interactive HTML or SVG.

use std::process::ExitCode;

use anyhow::bail;

use crate::cli::FlameArgs;
use crate::flame;
use crate::table::render_header;
use otelprof_primitives::escape;
use otelprof_store::query;

pub fn run(args: &FlameArgs) -> anyhow::Result<ExitCode> {
    flame::format_of(&args.output)?;
    let selector = args.select.selector()?;
    let source = super::open_source(&args.paths)?
        .narrow_to(&selector)
        .use_rollups(false, None);
    let (merged, ty) = query::merge(&source, args.select.spec(&selector)?)?;
    if merged.stacks.is_empty() {
        bail!("{}", query::explain_empty(&source, &merged, ty, &selector));
    }
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| format!("otelprof: {}", super::describe(&selector, ty)));
    let subtitle = render_header(&merged, merged.total(), merged.total_count());
    let tree = flame::Tree::of(&merged, &title);
    let path = flame::write(&tree, &subtitle, &args.output)?;
    outln!("wrote {}", escape::path(&path))?;
    Ok(ExitCode::SUCCESS)
}
