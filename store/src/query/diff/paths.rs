//! Where in the call tree a change lives: both sides merged into one call tree (a node per
//! distinct path from a root, so a method called from two places is two nodes), and for each
//! function the node whose inclusive share grew most, with its callers. A function's row says
//! *that* its total grew; this node says *through which callers*, e.g. `renderHtml ← handle ←
//! run` for a shared helper that grew only where `renderHtml` calls it.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::merge::Merged;

/// The call-tree node of a function whose inclusive share grew most.
#[derive(Clone, Debug, PartialEq)]
pub struct Carrier {
    /// The function, then its callers up to the root.
    pub path: Vec<String>,
    /// Change of the node's inclusive share (head − base, fractions of each side's total).
    pub delta: f64,
}

impl Carrier {
    /// Whether `name` is one of the callers on the path (not the function itself).
    pub fn called_from(&self, name: &str) -> bool {
        self.path.iter().skip(1).any(|f| f == name)
    }
}

const NO_PARENT: u32 = u32::MAX;

struct Node {
    parent: u32,
    name: u32,
    base: f64,
    head: f64,
}

/// Both sides' stacks as one call tree, inclusive values per node and side.
pub struct CallTree {
    names: Vec<String>,
    nodes: Vec<Node>,
    base_total: f64,
    head_total: f64,
}

impl CallTree {
    pub fn new<'a>(base: &'a Merged, head: &'a Merged) -> CallTree {
        let mut index: HashMap<&'a str, u32> = HashMap::new();
        let mut names: Vec<String> = Vec::new();
        let mut unify = |frames: &'a [String]| -> Vec<u32> {
            let mut ids = Vec::with_capacity(frames.len());
            for name in frames {
                let next = u32::try_from(names.len()).unwrap_or(u32::MAX);
                let id = *index.entry(name).or_insert_with(|| {
                    names.push(name.clone());
                    next
                });
                ids.push(id);
            }
            ids
        };
        let (base_ids, head_ids) = (unify(&base.frames), unify(&head.frames));
        let mut tree = CallTree {
            names,
            nodes: Vec::new(),
            base_total: base.total(),
            head_total: head.total(),
        };
        let mut children: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        for (m, ids, is_head) in [(base, &base_ids, false), (head, &head_ids, true)] {
            for s in &m.stacks {
                let mut parent = NO_PARENT;
                for &f in &s.frames {
                    let name = ids.get(f as usize).copied().unwrap_or(u32::MAX);
                    let next = u32::try_from(tree.nodes.len()).unwrap_or(u32::MAX);
                    let node = *children.entry((parent, name)).or_insert_with(|| {
                        tree.nodes.push(Node {
                            parent,
                            name,
                            base: 0.0,
                            head: 0.0,
                        });
                        next
                    });
                    if let Some(n) = tree.nodes.get_mut(node as usize) {
                        if is_head {
                            n.head += s.value;
                        } else {
                            n.base += s.value;
                        }
                    }
                    parent = node;
                }
            }
        }
        tree
    }

    fn share_delta(&self, n: &Node) -> f64 {
        let share = |v: f64, total: f64| if total > 0.0 { v / total } else { 0.0 };
        share(n.head, self.head_total) - share(n.base, self.base_total)
    }

    fn name(&self, id: u32) -> &str {
        self.names
            .get(id as usize)
            .map_or(crate::merge::UNKNOWN_FRAME, String::as_str)
    }

    /// Every function's node whose inclusive share grew most (for a function that only
    /// shrank: the one that shrank least), keyed by function name.
    pub fn carriers(&self) -> HashMap<String, Carrier> {
        let mut best: FxHashMap<u32, (usize, f64)> = FxHashMap::default();
        for (i, n) in self.nodes.iter().enumerate() {
            let d = self.share_delta(n);
            let e = best.entry(n.name).or_insert((i, d));
            if d > e.1 {
                *e = (i, d);
            }
        }
        best.into_iter()
            .map(|(name, (node, delta))| {
                (
                    self.name(name).to_owned(),
                    Carrier {
                        path: self.path_of(node),
                        delta,
                    },
                )
            })
            .collect()
    }

    /// Names from `node` up to its root.
    fn path_of(&self, node: usize) -> Vec<String> {
        let mut path = Vec::new();
        let mut at = self.nodes.get(node);
        // A path is never longer than the tree has nodes; the bound only guards the loop.
        while let Some(n) = at {
            if path.len() > self.nodes.len() {
                break;
            }
            path.push(self.name(n.name).to_owned());
            at = if n.parent == NO_PARENT {
                None
            } else {
                self.nodes.get(n.parent as usize)
            };
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::MergedStack;

    fn side(frames: &[&str], stacks: &[(&[u32], f64)]) -> Merged {
        Merged {
            unit: "nanoseconds".into(),
            frames: frames.iter().map(|f| (*f).to_owned()).collect(),
            groups: vec![String::new()],
            stacks: stacks
                .iter()
                .map(|(f, n)| MergedStack {
                    group: 0,
                    frames: f.to_vec(),
                    value: *n,
                    count: *n,
                })
                .collect(),
            ..Merged::default()
        }
    }

    #[test]
    fn a_shared_helper_is_carried_by_the_caller_that_grew() {
        // run → handle → {html, json} → escape. Head: html calls escape three times as often.
        let f = ["run", "handle", "html", "json", "escape"];
        let base = side(&f, &[(&[0, 1, 2, 4], 10.0), (&[0, 1, 3, 4], 10.0)]);
        // The head's frame table is numbered differently: names, not ids, join the sides.
        let g = ["escape", "json", "html", "handle", "run"];
        let head = side(&g, &[(&[4, 3, 2, 0], 30.0), (&[4, 3, 1, 0], 10.0)]);
        let c = CallTree::new(&base, &head).carriers();
        let escape = &c["escape"];
        assert_eq!(escape.path, ["escape", "html", "handle", "run"]);
        assert!((escape.delta - 0.25).abs() < 1e-12, "{}", escape.delta);
        assert!(escape.called_from("html") && !escape.called_from("escape"));
        assert_eq!(c["html"].path, ["html", "handle", "run"]);
        assert!((c["json"].delta + 0.25).abs() < 1e-12);
        // Roots at 100% on both sides did not change.
        assert_eq!(c["run"].delta, 0.0);
        assert_eq!(c["run"].path, ["run"]);
    }

    #[test]
    fn recursion_is_one_node_per_depth() {
        let f = ["a", "b"];
        let base = side(&f, &[(&[0, 1, 0], 1.0), (&[0], 1.0)]);
        let head = side(&f, &[(&[0, 1, 0], 3.0), (&[0], 1.0)]);
        let c = CallTree::new(&base, &head).carriers();
        // The inner `a` (under b) grew from 50% to 75%; the outer stayed at 100%.
        assert_eq!(c["a"].path, ["a", "b", "a"]);
        assert!((c["a"].delta - 0.25).abs() < 1e-12);
        assert!(CallTree::new(&Merged::default(), &head).carriers()["b"].delta > 0.0);
    }
}
