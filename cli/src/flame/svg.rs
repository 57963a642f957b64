//! SVG flame graphs, drawn by inferno from the folded stacks of a [`Tree`].

use anyhow::Context as _;

use super::Tree;
use otelprof_primitives::escape::escape;

pub fn render(tree: &Tree, subtitle: &str) -> anyhow::Result<Vec<u8>> {
    // XML 1.0 has no way to carry most control characters, not even as character references:
    // one ESC in a function name would make the whole file unreadable. They are shown escaped,
    // as on the terminal (inferno escapes `<`, `&` and quotes itself).
    let lines: Vec<String> = tree
        .folded()
        .iter()
        .map(|l| escape(l).into_owned())
        .collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = escape(&tree.title).into_owned();
    options.subtitle = Some(escape(subtitle).into_owned());
    options.count_name = match tree.unit.as_str() {
        "nanoseconds" => "ns".to_owned(),
        "" => "samples".to_owned(),
        other => escape(other).into_owned(),
    };
    options.colors =
        inferno::flamegraph::color::Palette::Multi(inferno::flamegraph::color::MultiPalette::Java);
    if tree.differential {
        // Folded lines carry the base already scaled to the head's total.
        options.negate_differentials = false;
    }
    let mut out = Vec::new();
    if lines.is_empty() {
        anyhow::bail!("nothing to draw: the selection has no samples");
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut out)
        .context("inferno could not draw the flame graph")?;
    Ok(out)
}
