//! `otelprof flame`: a flame graph of the selection, as interactive HTML or SVG.

use std::process::ExitCode;

use crate::cli::FlameArgs;
use crate::flame;
use crate::table::render_header;
use otelprof_primitives::escape;

pub fn run(args: &FlameArgs) -> anyhow::Result<ExitCode> {
    flame::format_of(&args.output)?;
    let selector = args.select.selector()?;
    // By thread state: a wall profile's page can colour its frames by state.
    let by = Some(otelprof_store::query::states::STATE_KEY);
    let (merged, ty) = super::merge_selection(&args.paths, &args.select, &selector, by)?;
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
