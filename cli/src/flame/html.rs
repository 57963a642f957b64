//! The self-contained HTML flame graph: data, script and style in one file, nothing fetched
//! from anywhere, so it opens offline, from a CI artifact or an email attachment.

use std::fmt::Write as _;

use super::{Tree, VIEWER};
const STYLE: &str = include_str!("flame.css");

/// Text for an HTML text node.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// A JSON string literal that is also safe inside `<script>` (no `</script>`, no `<!--`).
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_numbers(values: impl Iterator<Item = f64>, out: &mut String) {
    out.push('[');
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", v.round() as i64);
    }
    out.push(']');
}

/// The tree's nodes in preorder (the viewer rebuilds positions from depths).
fn preorder(tree: &Tree) -> Vec<(usize, u32)> {
    let mut order = Vec::with_capacity(tree.nodes.len());
    let mut stack = vec![(0usize, 0u32)];
    while let Some((node, depth)) = stack.pop() {
        let Some(n) = tree.nodes.get(node) else {
            continue;
        };
        // Nodes that add nothing to the picture (a base-only node in a diff has no width).
        if node != 0 && n.value <= 0.0 {
            continue;
        }
        order.push((node, depth));
        for &c in n.children.iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    order
}

/// The tree as the viewer reads it (a JSON object, safe inside `<script>`): frame names, and
/// the nodes in preorder as parallel arrays. `otelprof serve`'s UI gets the same object.
pub fn data(tree: &Tree) -> String {
    let order = preorder(tree);
    let mut data = String::with_capacity(order.len() * 24 + tree.names.len() * 40);
    data.push_str("{\"unit\":");
    json_string(&tree.unit, &mut data);
    data.push_str(",\"names\":[");
    for (i, name) in tree.names.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        json_string(name, &mut data);
    }
    data.push_str("],\"name\":");
    let node = |i: usize| tree.nodes.get(i);
    json_numbers(
        order
            .iter()
            .map(|&(i, _)| node(i).map_or(0.0, |n| f64::from(n.frame))),
        &mut data,
    );
    data.push_str(",\"depth\":");
    json_numbers(order.iter().map(|&(_, d)| f64::from(d)), &mut data);
    data.push_str(",\"value\":");
    json_numbers(
        order.iter().map(|&(i, _)| node(i).map_or(0.0, |n| n.value)),
        &mut data,
    );
    data.push_str(",\"self\":");
    json_numbers(
        order
            .iter()
            .map(|&(i, _)| node(i).map_or(0.0, |n| n.self_value)),
        &mut data,
    );
    if tree.differential {
        data.push_str(",\"base\":");
        json_numbers(
            order.iter().map(|&(i, _)| node(i).map_or(0.0, |n| n.base)),
            &mut data,
        );
    }
    if !tree.states.is_empty() {
        // Each node's value per state: `states.length` numbers a node, in preorder.
        data.push_str(",\"states\":[");
        for (i, name) in tree.states.iter().enumerate() {
            if i > 0 {
                data.push(',');
            }
            json_string(name, &mut data);
        }
        data.push_str("],\"state\":");
        let k = tree.states.len();
        json_numbers(
            order.iter().flat_map(|&(i, _)| {
                (0..k).map(move |s| {
                    node(i)
                        .and_then(|n| n.by_state.get(s))
                        .copied()
                        .unwrap_or(0.0)
                })
            }),
            &mut data,
        );
    }
    data.push('}');
    data
}

/// The whole page. `subtitle` says what was selected.
pub fn render(tree: &Tree, subtitle: &str) -> String {
    let data = data(tree);
    let legend = if tree.differential {
        "red: larger share than in the base, blue: smaller; width: the head"
    } else if !tree.states.is_empty() {
        "orange: application, yellow: JDK, pink: native, teal: kernel (or by thread state); width: share of the total"
    } else {
        "orange: application, yellow: JDK, pink: native, teal: kernel; width: share of the total"
    };
    let title = escape_html(&tree.title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>\n{STYLE}</style></head>\n<body>\n\
         <header><h1>{title}</h1><span class=\"meta\">{}</span>\n\
         <input id=\"search\" type=\"search\" placeholder=\"search (text or /regex/), Ctrl-F\" autocomplete=\"off\">\n\
         <button id=\"reset\" type=\"button\">reset zoom</button>\n\
         <span id=\"status\"></span><span id=\"legend\">{legend}; click to zoom, Esc to reset</span></header>\n\
         <div id=\"chart\"></div><div id=\"tip\"></div>\n\
         <script>window.OTELPROF_FLAME = {data};</script>\n\
         <script>\n{VIEWER}OtelprofFlame.page(window.OTELPROF_FLAME);\n</script>\n</body></html>\n",
        escape_html(subtitle)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn strings_cannot_break_out_of_the_script() {
        let mut s = String::new();
        json_string("</script><b>\"x\"\\\n", &mut s);
        assert_eq!(
            s,
            "\"\\u003c/script\\u003e\\u003cb\\u003e\\\"x\\\"\\\\\\u000a\""
        );
        assert_eq!(escape_html("<a&\">"), "&lt;a&amp;&quot;&gt;");
    }
}
