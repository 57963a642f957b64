//! Callers and callees of the functions a pattern names: the two halves of a butterfly view.
//!
//! Every stack through a matching function is cut at that function's outermost frame (the
//! first from the root, so a recursive function counts each sample once, as its total does)
//! and turned so the function is the stack's root: its callers follow it, innermost first
//! ([`Direction::Callers`]), or its callees, as in the stack ([`Direction::Callees`]). The
//! result is a [`Merged`] like any other, so the call tree, its flame graph and its text come
//! from the usual places; each node's value over its function's value is the share of that
//! function's total that went through the path.

use crate::focus::Glob;
use crate::merge::{Merged, MergedStack};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Callers,
    Callees,
}

/// The stacks of `merged` through a function whose name matches `glob` (the whole
/// `pkg.Class.method`, `*` for any run; with source lines the name before ` (`), rooted at it.
pub fn butterfly(merged: &Merged, glob: &Glob, direction: Direction) -> Merged {
    let matching: Vec<bool> = merged
        .frames
        .iter()
        .map(|name| {
            let bare = name.split_once(" (").map_or(name.as_str(), |(n, _)| n);
            glob.matches(name) || glob.matches(bare)
        })
        .collect();
    let matches = |f: u32| matching.get(f as usize).copied().unwrap_or(false);
    let stacks = merged
        .stacks
        .iter()
        .filter_map(|s| {
            let at = s.frames.iter().position(|&f| matches(f))?;
            let frames = match direction {
                Direction::Callees => s.frames[at..].to_vec(),
                Direction::Callers => s.frames[..=at].iter().rev().copied().collect(),
            };
            Some(MergedStack {
                group: s.group,
                frames,
                value: s.value,
                count: s.count,
            })
        })
        .collect();
    Merged {
        sample_type: merged.sample_type.clone(),
        unit: merged.unit.clone(),
        frames: merged.frames.clone(),
        files: merged.files.clone(),
        lines: merged.lines,
        groups: merged.groups.clone(),
        group_key: merged.group_key.clone(),
        stacks,
        profiles_used: merged.profiles_used,
        profiles_seen: merged.profiles_seen,
        other_type: merged.other_type,
        window: merged.window,
        spans: Default::default(),
        instances: merged.instances.clone(),
        snapshots_window: merged.snapshots_window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged() -> Merged {
        // Frames: 0 main, 1 handle, 2 find, 3 hash, 4 other.
        let frames = ["main", "app.handle", "app.find", "util.hash", "app.other"];
        let stack = |f: &[u32], v: f64| MergedStack {
            group: 0,
            frames: f.to_vec(),
            value: v,
            count: v,
        };
        Merged {
            frames: frames.iter().map(|s| (*s).to_owned()).collect(),
            files: vec![String::new(); frames.len()],
            groups: vec![String::new()],
            stacks: vec![
                stack(&[0, 1, 2, 3], 5.0),
                stack(&[0, 4, 2], 3.0),
                // Recursion: counted once, from the outermost frame.
                stack(&[0, 1, 2, 2, 3], 2.0),
                stack(&[0, 4], 7.0),
            ],
            ..Merged::default()
        }
    }

    fn paths(m: &Merged) -> Vec<(Vec<&str>, f64)> {
        m.stacks
            .iter()
            .map(|s| (s.frames.iter().map(|&f| m.frame(f)).collect(), s.value))
            .collect()
    }

    #[test]
    fn callers_are_turned_and_callees_cut() {
        let m = merged();
        let glob = Glob::parse("*.find").unwrap();
        let callers = butterfly(&m, &glob, Direction::Callers);
        assert_eq!(
            paths(&callers),
            vec![
                (vec!["app.find", "app.handle", "main"], 5.0),
                (vec!["app.find", "app.other", "main"], 3.0),
                (vec!["app.find", "app.handle", "main"], 2.0),
            ]
        );
        let callees = butterfly(&m, &glob, Direction::Callees);
        assert_eq!(
            paths(&callees),
            vec![
                (vec!["app.find", "util.hash"], 5.0),
                (vec!["app.find"], 3.0),
                (vec!["app.find", "app.find", "util.hash"], 2.0),
            ]
        );
        // The function's total is the same from both sides: each sample once.
        assert_eq!(callers.total(), 10.0);
        assert_eq!(callees.total(), 10.0);
        assert!(
            butterfly(&m, &Glob::parse("nothing").unwrap(), Direction::Callers)
                .stacks
                .is_empty()
        );
    }
}
