//! SVG flame graphs, drawn by inferno from the folded stacks of a [`Tree`].

use anyhow::Context as _;

use super::Tree;

pub fn render(tree: &Tree, subtitle: &str) -> anyhow::Result<Vec<u8>> {
    let lines = tree.folded();
    let mut options = inferno::flamegraph::Options::default();
    options.title = tree.title.clone();
    options.subtitle = Some(subtitle.to_owned());
    options.count_name = match tree.unit.as_str() {
        "nanoseconds" => "ns".to_owned(),
        "" => "samples".to_owned(),
        other => other.to_owned(),
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
