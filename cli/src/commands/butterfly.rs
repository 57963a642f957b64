//! `otelprof callers GLOB PATHS…` and `otelprof callees GLOB PATHS…`: how the functions a
//! pattern names are reached, and what they spend their time in, as indented trees with each
//! path's share of its function's total ([`otelprof_store::query::butterfly`]).
//!
//! [`trees`] cuts the call tree into what is shown (depth, the `--min` share); the CLI prints
//! it and `otelprof serve`'s butterfly view serialises the same [`Branch`]es, so both show
//! the same paths with the same shares.

use std::process::ExitCode;

use anyhow::bail;

use crate::cli::ButterflyArgs;
use crate::flame;
use crate::table::{format_value, render_header};
use otelprof_primitives::escape;
use otelprof_store::focus::Glob;
use otelprof_store::merge::Merged;
use otelprof_store::query::butterfly::{butterfly, Direction};
use otelprof_store::query::tree::Tree;
use otelprof_store::select::ProfileType;

/// One node of a shown tree: a function (at the top) or a path below it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Branch {
    pub name: String,
    pub value: f64,
    /// Percent: of the function's total for a path, of everything selected for a function.
    pub share: f64,
    pub children: Vec<Branch>,
    /// Children under `--min`, left out: how many, and their summed share (percent).
    pub left_out: (usize, f64),
}

/// The word for a direction, as the commands are named.
pub fn word(direction: Direction) -> &'static str {
    match direction {
        Direction::Callers => "callers",
        Direction::Callees => "callees",
    }
}

/// The pattern of `args`, checked; `--min` in range.
pub fn glob(args: &ButterflyArgs) -> anyhow::Result<Glob> {
    let glob = Glob::parse(&args.function)
        .map_err(|why| anyhow::anyhow!("{}: {why}", escape::quote(&args.function)))?;
    if !(0.0..100.0).contains(&args.min) {
        bail!(
            "--min takes a percentage from 0 up to 100, got {}",
            args.min
        );
    }
    Ok(glob)
}

/// The matching functions of one half, largest first, each with the paths shown below it, and
/// the call tree they come from (for a flame graph).
pub fn trees(
    merged: &Merged,
    ty: ProfileType,
    glob: &Glob,
    direction: Direction,
    args: &ButterflyArgs,
) -> anyhow::Result<(Vec<Branch>, Tree)> {
    let half = butterfly(merged, glob, direction);
    if half.stacks.is_empty() {
        bail!(
            "no function matches {} in the {} samples selected (the whole pkg.Class.method is \
             matched, `*` for any run: e.g. '*.{}')",
            escape::quote(&args.function),
            ty.name(),
            args.function.rsplit('.').next().unwrap_or("method")
        );
    }
    let title = format!("otelprof {} of {}", word(direction), args.function);
    let tree = Tree::of(&half, &title);
    let all = merged.total();
    let functions = tree
        .nodes
        .first()
        .map(|n| sorted(&tree, &n.children))
        .unwrap_or_default()
        .into_iter()
        .map(|f| {
            let node = &tree.nodes[f];
            let mut branch = Branch {
                name: tree.names[node.frame as usize].clone(),
                value: node.value,
                share: percent(node.value, all),
                ..Branch::default()
            };
            below(&tree, f, node.value, args, 1, &mut branch);
            branch
        })
        .collect();
    Ok((functions, tree))
}

/// `children`, largest first.
fn sorted(tree: &Tree, children: &[usize]) -> Vec<usize> {
    let mut children = children.to_vec();
    children.sort_by(|&a, &b| tree.nodes[b].value.total_cmp(&tree.nodes[a].value));
    children
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// The children of `node` into `into`, each with its share of the function's total, down to
/// `--depth` levels; paths under `--min` are counted in `left_out`.
fn below(
    tree: &Tree,
    node: usize,
    function_total: f64,
    args: &ButterflyArgs,
    level: u32,
    into: &mut Branch,
) {
    for c in sorted(tree, &tree.nodes[node].children) {
        let child = &tree.nodes[c];
        let share = percent(child.value, function_total);
        if share < args.min {
            into.left_out = (into.left_out.0 + 1, into.left_out.1 + share);
            continue;
        }
        let mut branch = Branch {
            name: tree.names[child.frame as usize].clone(),
            value: child.value,
            share,
            ..Branch::default()
        };
        if level < args.depth {
            below(tree, c, function_total, args, level + 1, &mut branch);
        }
        into.children.push(branch);
    }
}

pub fn run(args: &ButterflyArgs, direction: Direction) -> anyhow::Result<ExitCode> {
    let glob = glob(args)?;
    if let Some(o) = &args.output {
        flame::format_of(o)?;
    }
    let selector = args.select.selector()?;
    let (merged, ty) = super::merge_selection(&args.paths, &args.select, &selector, None)?;
    let (functions, tree) = trees(&merged, ty, &glob, direction, args)?;
    let word = word(direction);
    outln!(
        "{}",
        render_header(&merged, merged.total(), merged.total_count())
    )?;
    for f in &functions {
        outln!(
            "\n{}  {} ({:.2}% of all), its {word}:",
            escape::escape(&f.name),
            format_value(f.value.round() as i64, &merged.unit),
            f.share
        )?;
        print_below(f, args.min, 1)?;
    }
    if let Some(o) = &args.output {
        let subtitle = format!("{word} of {}", args.function);
        let path = flame::write(&tree, &subtitle, o)?;
        outln!("\nwrote {}", escape::path(&path))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The paths below `branch`, indented by `level`; the ones left out as one line.
fn print_below(branch: &Branch, min: f64, level: u32) -> anyhow::Result<()> {
    let indent = 2 * level as usize;
    for child in &branch.children {
        outln!(
            "{:indent$}{:6.2}%  {}",
            "",
            child.share,
            escape::escape(&child.name)
        )?;
        print_below(child, min, level + 1)?;
    }
    if branch.left_out.0 > 0 {
        outln!(
            "{:indent$}{:6.2}%  ({} more under {}%)",
            "",
            branch.left_out.1,
            branch.left_out.0,
            min
        )?;
    }
    Ok(())
}
