//! The call tree a flame graph draws: merged stacks folded into nodes, root first.

use std::collections::HashMap;

use crate::merge::Merged;

/// One node of the call tree. Children are sorted by name, as flame graphs draw them, so that
/// two graphs of the same code line up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    pub frame: u32,
    /// Value of the stacks through this node (head side in a diff).
    pub value: f64,
    /// Value of the stacks that end here.
    pub self_value: f64,
    /// Base side of a diff, already scaled to the head's total (see [`Tree::diff`]).
    pub base: f64,
    pub children: Vec<usize>,
    /// The value in each of [`Tree::states`] (empty without states).
    pub by_state: Vec<f64>,
}

#[derive(Clone, Debug, Default)]
pub struct Tree {
    /// Frame names; node 0 is the root, named `all`.
    pub names: Vec<String>,
    pub nodes: Vec<Node>,
    pub unit: String,
    pub title: String,
    pub differential: bool,
    /// The thread states the nodes' values are broken down by ([`Node::by_state`]): those of
    /// a wall profile merged grouped by state ([`super::states`]), else none.
    pub states: Vec<String>,
}

struct Builder {
    names: Vec<String>,
    name_index: HashMap<String, u32>,
    nodes: Vec<Node>,
    child_index: HashMap<(usize, u32), usize>,
}

impl Builder {
    fn new() -> Builder {
        let mut b = Builder {
            names: Vec::new(),
            name_index: HashMap::new(),
            nodes: Vec::new(),
            child_index: HashMap::new(),
        };
        let root = b.name("all");
        b.nodes.push(Node {
            frame: root,
            ..Node::default()
        });
        b
    }

    fn name(&mut self, n: &str) -> u32 {
        if let Some(&i) = self.name_index.get(n) {
            return i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(n.to_owned());
        self.name_index.insert(n.to_owned(), i);
        i
    }

    /// Adds a stack (root first): `value` to the head side, `base` to the base side.
    fn add(&mut self, frames: &[&str], value: f64, base: f64) {
        self.add_in(frames, value, base, None);
    }

    /// Adds a stack whose value is all in the state of column `state` (of `states` columns).
    fn add_in(&mut self, frames: &[&str], value: f64, base: f64, state: Option<(usize, usize)>) {
        let mut node = 0usize;
        let in_state = |n: &mut Node| {
            if let Some((column, states)) = state {
                n.by_state.resize(states, 0.0);
                if let Some(v) = n.by_state.get_mut(column) {
                    *v += value;
                }
            }
        };
        if let Some(root) = self.nodes.get_mut(0) {
            root.value += value;
            root.base += base;
            in_state(root);
        }
        for f in frames {
            let name = self.name(f);
            let child = match self.child_index.get(&(node, name)) {
                Some(&c) => c,
                None => {
                    let c = self.nodes.len();
                    self.nodes.push(Node {
                        frame: name,
                        ..Node::default()
                    });
                    if let Some(parent) = self.nodes.get_mut(node) {
                        parent.children.push(c);
                    }
                    self.child_index.insert((node, name), c);
                    c
                }
            };
            if let Some(n) = self.nodes.get_mut(child) {
                n.value += value;
                n.base += base;
                in_state(n);
            }
            node = child;
        }
        if let Some(n) = self.nodes.get_mut(node) {
            n.self_value += value;
        }
    }

    fn finish(mut self, unit: &str, title: &str, differential: bool) -> Tree {
        let names = std::mem::take(&mut self.names);
        for i in 0..self.nodes.len() {
            let mut children = std::mem::take(&mut self.nodes[i].children);
            children.sort_by(|&a, &b| {
                let name = |n: usize| {
                    self.nodes
                        .get(n)
                        .and_then(|n| names.get(n.frame as usize))
                        .map_or("", String::as_str)
                };
                name(a).cmp(name(b))
            });
            self.nodes[i].children = children;
        }
        Tree {
            names,
            nodes: self.nodes,
            unit: unit.to_owned(),
            title: title.to_owned(),
            differential,
            states: Vec::new(),
        }
    }
}

/// Every frame of `merged` as people read it, with its source file ([`Merged::frame_label`]).
fn labels(merged: &Merged) -> Vec<std::borrow::Cow<'_, str>> {
    (0..merged.frames.len())
        .map(|i| merged.frame_label(u32::try_from(i).unwrap_or(u32::MAX)))
        .collect()
}

fn label<'a>(labels: &'a [std::borrow::Cow<'_, str>], frame: u32) -> &'a str {
    labels
        .get(frame as usize)
        .map_or(crate::merge::UNKNOWN_FRAME, |l| l.as_ref())
}

impl Tree {
    /// The tree of `merged` (all groups); with each node's value per thread state when
    /// `merged` is grouped by state ([`super::states::states_of`]).
    pub fn of(merged: &Merged, title: &str) -> Tree {
        let mut b = Builder::new();
        let labels = labels(merged);
        let states = super::states::states_of(merged);
        // Group → state column.
        let mut column = vec![None; merged.groups.len()];
        for (i, (_, group)) in states.iter().enumerate() {
            if let Some(c) = column.get_mut(*group as usize) {
                *c = Some((i, states.len()));
            }
        }
        let mut frames: Vec<&str> = Vec::new();
        for s in &merged.stacks {
            frames.clear();
            frames.extend(s.frames.iter().map(|&f| label(&labels, f)));
            let state = column.get(s.group as usize).copied().flatten();
            b.add_in(&frames, s.value, 0.0, state);
        }
        let mut tree = b.finish(&merged.unit, title, false);
        tree.states = states.into_iter().map(|(name, _)| name).collect();
        tree
    }

    /// A differential tree: widths are the head's values; each node also carries the base's
    /// value scaled by head total / base total, so that colours compare shares of each side's
    /// own total (a release that serves more traffic is not "all red").
    pub fn diff(base: &Merged, head: &Merged, title: &str) -> Tree {
        let (bt, ht) = (base.total(), head.total());
        let scale = if bt > 0.0 { ht / bt } else { 0.0 };
        let mut b = Builder::new();
        let (head_labels, base_labels) = (labels(head), labels(base));
        let mut frames: Vec<&str> = Vec::new();
        for s in &head.stacks {
            frames.clear();
            frames.extend(s.frames.iter().map(|&f| label(&head_labels, f)));
            b.add(&frames, s.value, 0.0);
        }
        for s in &base.stacks {
            frames.clear();
            frames.extend(s.frames.iter().map(|&f| label(&base_labels, f)));
            b.add(&frames, 0.0, s.value * scale);
        }
        b.finish(&head.unit, title, true)
    }

    /// `frame;frame;frame value` lines (Brendan Gregg's folded format), root first, or
    /// `… base head` lines for a differential tree; what inferno reads.
    pub fn folded(&self) -> Vec<String> {
        // Depth first with a stack of its own: a tree is as deep as the deepest stack it was
        // made from, which the input decides, so recursion could exhaust the thread's stack.
        enum Step {
            Enter(usize),
            Leave,
        }
        let mut lines = Vec::new();
        let mut path: Vec<&str> = Vec::new();
        let mut todo = vec![Step::Enter(0)];
        while let Some(step) = todo.pop() {
            let node = match step {
                Step::Leave => {
                    path.pop();
                    continue;
                }
                Step::Enter(node) => node,
            };
            let Some(n) = self.nodes.get(node) else {
                continue;
            };
            if node != 0 {
                path.push(self.names.get(n.frame as usize).map_or("?", String::as_str));
                todo.push(Step::Leave);
                self.fold_line(n, &path, &mut lines);
            }
            todo.extend(n.children.iter().rev().map(|&c| Step::Enter(c)));
        }
        lines
    }

    /// The folded line of node `n` at `path`, if it has value of its own.
    fn fold_line(&self, n: &Node, path: &[&str], out: &mut Vec<String>) {
        let child_value: f64 = n
            .children
            .iter()
            .filter_map(|&c| self.nodes.get(c))
            .map(|c| c.value)
            .sum();
        let child_base: f64 = n
            .children
            .iter()
            .filter_map(|&c| self.nodes.get(c))
            .map(|c| c.base)
            .sum();
        let own = (n.value - child_value).max(0.0).round() as i64;
        let own_base = (n.base - child_base).max(0.0).round() as i64;
        if own > 0 || (self.differential && own_base > 0) {
            // Folded frame names must not contain the separator or the count's space.
            let stack: Vec<String> = path.iter().map(|p| p.replace(';', ":")).collect();
            let stack = stack.join(";");
            if self.differential {
                out.push(format!("{stack} {own_base} {own}"));
            } else {
                out.push(format!("{stack} {own}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;

    fn merged(stacks: &[(&[u32], f64)]) -> Merged {
        Merged {
            unit: "nanoseconds".into(),
            frames: vec!["main".into(), "a".into(), "b".into()],
            groups: vec![String::new()],
            stacks: stacks
                .iter()
                .map(|(f, v)| MergedStack {
                    group: 0,
                    frames: f.to_vec(),
                    value: *v,
                    count: 1.0,
                })
                .collect(),
            ..Merged::default()
        }
    }

    #[test]
    fn stacks_fold_into_a_tree_and_back() {
        let m = merged(&[(&[0, 1], 5.0), (&[0, 2], 3.0), (&[0], 1.0), (&[0, 1], 2.0)]);
        let t = Tree::of(&m, "t");
        assert_eq!(t.nodes[0].value, 11.0);
        assert_eq!(t.folded(), ["main 1", "main;a 7", "main;b 3"]);
        let main = &t.nodes[t.nodes[0].children[0]];
        assert_eq!((main.value, main.self_value), (11.0, 1.0));
    }

    #[test]
    fn diffs_scale_the_base_to_the_head() {
        let base = merged(&[(&[0, 1], 10.0), (&[0, 2], 10.0)]);
        let head = merged(&[(&[0, 1], 10.0), (&[0, 2], 30.0)]);
        let t = Tree::diff(&base, &head, "d");
        assert_eq!(t.folded(), ["main;a 20 10", "main;b 20 30"]);
    }

    #[test]
    fn nodes_carry_their_value_per_state_when_merged_by_state() {
        let mut m = merged(&[(&[0, 1], 5.0), (&[0, 2], 3.0), (&[0, 1], 2.0)]);
        m.group_key = Some("thread_state".into());
        m.groups = vec!["WAITING".into(), "RUNNABLE".into(), "<none>".into()];
        m.stacks[1].group = 1;
        m.stacks[2].group = 2;
        let t = Tree::of(&m, "t");
        // RUNNABLE first whatever the group order; the stateless stack in no column.
        assert_eq!(t.states, ["RUNNABLE", "WAITING"]);
        assert_eq!(t.nodes[0].by_state, [3.0, 5.0]);
        let main = &t.nodes[t.nodes[0].children[0]];
        let [a, b] = [0, 1].map(|i| &t.nodes[main.children[i]]);
        assert_eq!((a.value, &a.by_state[..]), (7.0, &[0.0, 5.0][..]));
        assert_eq!((b.value, &b.by_state[..]), (3.0, &[3.0, 0.0][..]));
        // Without the grouping, no states.
        m.group_key = None;
        assert!(Tree::of(&m, "t").states.is_empty());
    }
}
