//! `otelprof callers GLOB PATHS…` and `otelprof callees GLOB PATHS…`: how the functions a
//! pattern names are reached, and what they spend their time in, as indented trees with each
//! path's share of its function's total ([`otelprof_store::query::butterfly`]).

use std::process::ExitCode;

use anyhow::bail;

use crate::cli::ButterflyArgs;
use crate::flame;
use crate::table::{format_value, render_header};
use otelprof_primitives::escape;
use otelprof_store::focus::Glob;
use otelprof_store::query::butterfly::{butterfly, Direction};
use otelprof_store::query::tree::Tree;

pub fn run(args: &ButterflyArgs, direction: Direction) -> anyhow::Result<ExitCode> {
    let glob = Glob::parse(&args.function)
        .map_err(|why| anyhow::anyhow!("{}: {why}", escape::quote(&args.function)))?;
    if !(0.0..100.0).contains(&args.min) {
        bail!(
            "--min takes a percentage from 0 up to 100, got {}",
            args.min
        );
    }
    if let Some(o) = &args.output {
        flame::format_of(o)?;
    }
    let selector = args.select.selector()?;
    let (merged, ty) = super::merge_selection(&args.paths, &args.select, &selector, None)?;
    let half = butterfly(&merged, &glob, direction);
    if half.stacks.is_empty() {
        bail!(
            "no function matches {} in the {} samples selected (the whole pkg.Class.method is \
             matched, `*` for any run: e.g. '*.{}')",
            escape::quote(&args.function),
            ty.name(),
            args.function.rsplit('.').next().unwrap_or("method")
        );
    }
    let word = match direction {
        Direction::Callers => "callers",
        Direction::Callees => "callees",
    };
    let title = format!("otelprof {word} of {}", args.function);
    let tree = Tree::of(&half, &title);
    outln!(
        "{}",
        render_header(&merged, merged.total(), merged.total_count())
    )?;
    let all = merged.total();
    let mut functions: Vec<usize> = tree
        .nodes
        .first()
        .map(|n| n.children.clone())
        .unwrap_or_default();
    functions.sort_by(|&a, &b| tree.nodes[b].value.total_cmp(&tree.nodes[a].value));
    for f in functions {
        let node = &tree.nodes[f];
        outln!(
            "\n{}  {} ({:.2}% of all), its {word}:",
            escape::escape(&tree.names[node.frame as usize]),
            format_value(node.value.round() as i64, &merged.unit),
            percent(node.value, all)
        )?;
        print_below(&tree, f, node.value, args, 1)?;
    }
    if let Some(o) = &args.output {
        let subtitle = format!("{word} of {}", args.function);
        let path = flame::write(&tree, &subtitle, o)?;
        outln!("\nwrote {}", escape::path(&path))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// The children of `node`, largest first, indented by `level`, each with its share of the
/// function's total; paths under `--min` are summed into one line.
fn print_below(
    tree: &Tree,
    node: usize,
    function_total: f64,
    args: &ButterflyArgs,
    level: u32,
) -> anyhow::Result<()> {
    let mut children = tree.nodes[node].children.clone();
    children.sort_by(|&a, &b| tree.nodes[b].value.total_cmp(&tree.nodes[a].value));
    let mut left_out = (0usize, 0.0f64);
    for c in children {
        let child = &tree.nodes[c];
        let share = percent(child.value, function_total);
        if share < args.min {
            left_out = (left_out.0 + 1, left_out.1 + share);
            continue;
        }
        outln!(
            "{:indent$}{share:6.2}%  {}",
            "",
            escape::escape(&tree.names[child.frame as usize]),
            indent = 2 * level as usize
        )?;
        if level < args.depth {
            print_below(tree, c, function_total, args, level + 1)?;
        }
    }
    if left_out.0 > 0 {
        outln!(
            "{:indent$}{:6.2}%  ({} more under {}%)",
            "",
            left_out.1,
            left_out.0,
            args.min,
            indent = 2 * level as usize
        )?;
    }
    Ok(())
}
