//! The names the live heap keeps for its objects: the frames of their allocation stacks and
//! the names of their threads and endpoints, interned.
//!
//! A tracked object can outlive the period it was sampled in, the jmethodIDs of its stack
//! (an unloaded class invalidates them) and its thread, so everything is named when the
//! sample is taken in ([`super::LiveHeap`]) and kept as text. Stacks repeat a great deal (a
//! live set is held by few sites), so frames and whole stacks are interned once: an entry
//! holds a stack id.
//!
//! Nothing is removed one by one: the store only grows, and [`LiveStacks::compact`] rebuilds
//! it from the entries still tracked, which drops the names of every dead object at once.
//! [`LiveStacks::bytes`] estimates what it holds, for the bound ([`super::STACK_BYTES`]).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::Arc;

use otel_bridge::FrameKind;

/// One frame, by the ids of its names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    pub(crate) function: u32,
    pub(crate) file: u32,
    pub(crate) start_line: i64,
    pub(crate) line: i64,
    pub(crate) kind: FrameKind,
}

/// Estimated bytes per interned item beyond its own data: the map entry, the list entry and
/// the shared allocation's header (measured orders of magnitude, not exact figures).
const STRING_OVERHEAD: usize = 64;
const FRAME_OVERHEAD: usize = 80;
const STACK_OVERHEAD: usize = 64;

#[derive(Default)]
pub(crate) struct LiveStacks {
    string_ids: HashMap<Arc<str>, u32>,
    strings: Vec<Arc<str>>,
    frame_ids: HashMap<Frame, u32>,
    frames: Vec<Frame>,
    stack_ids: HashMap<Arc<[u32]>, u32>,
    stacks: Vec<Arc<[u32]>>,
    bytes: usize,
}

impl LiveStacks {
    pub(crate) fn new() -> LiveStacks {
        let mut s = LiveStacks::default();
        // Id 0 of each table is "none": the empty name, the empty stack.
        s.string("");
        s.stack(&[]);
        s
    }

    /// The id of `text`, interned.
    pub(crate) fn string(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(text) {
            return id;
        }
        let id = self.strings.len() as u32;
        let text: Arc<str> = Arc::from(text);
        self.bytes += text.len() + STRING_OVERHEAD;
        self.strings.push(text.clone());
        self.string_ids.insert(text, id);
        id
    }

    /// The id of a frame, its names interned.
    pub(crate) fn frame(
        &mut self,
        function: &str,
        file: &str,
        start_line: i64,
        line: i64,
        kind: FrameKind,
    ) -> u32 {
        let frame = Frame {
            function: self.string(function),
            file: self.string(file),
            start_line,
            line,
            kind,
        };
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.bytes += std::mem::size_of::<Frame>() + FRAME_OVERHEAD;
        self.frames.push(frame);
        self.frame_ids.insert(frame, id);
        id
    }

    /// The id of a stack of frame ids (leaf first), interned.
    pub(crate) fn stack(&mut self, frames: &[u32]) -> u32 {
        if let Some(&id) = self.stack_ids.get(frames) {
            return id;
        }
        let id = self.stacks.len() as u32;
        let frames: Arc<[u32]> = Arc::from(frames);
        self.bytes += 4 * frames.len() + STACK_OVERHEAD;
        self.stacks.push(frames.clone());
        self.stack_ids.insert(frames, id);
        id
    }

    pub(crate) fn str(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    pub(crate) fn frame_of(&self, id: u32) -> Option<&Frame> {
        self.frames.get(id as usize)
    }

    pub(crate) fn stack_of(&self, id: u32) -> &[u32] {
        self.stacks.get(id as usize).map_or(&[], |s| s)
    }

    /// Estimated bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// A store holding only what `uses` still refers to: each `(stack, names)` given is
    /// re-interned, and `renumber` receives the new ids in the same order.
    pub(crate) fn compact<'a>(
        &self,
        uses: impl Iterator<Item = (u32, &'a [u32])>,
        mut renumber: impl FnMut(u32, Vec<u32>),
    ) -> LiveStacks {
        let mut fresh = LiveStacks::new();
        for (stack, names) in uses {
            let frames: Vec<u32> = self
                .stack_of(stack)
                .iter()
                .filter_map(|&f| self.frame_of(f))
                .map(|f| {
                    let (function, file) = (self.str(f.function), self.str(f.file));
                    fresh.frame(function, file, f.start_line, f.line, f.kind)
                })
                .collect();
            let names = names.iter().map(|&n| fresh.string(self.str(n))).collect();
            renumber(fresh.stack(&frames), names);
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_stacks_are_interned_and_compaction_keeps_what_is_used() {
        let mut s = LiveStacks::new();
        let a = s.frame("a.B.c", "B.java", 3, 7, FrameKind::Jvm);
        let b = s.frame("a.B.d", "B.java", 10, 12, FrameKind::Jvm);
        assert_eq!(s.frame("a.B.c", "B.java", 3, 7, FrameKind::Jvm), a);
        let one = s.stack(&[a, b]);
        let two = s.stack(&[b]);
        assert_eq!(s.stack(&[a, b]), one);
        assert_ne!(one, two);
        assert_eq!(s.stack(&[]), 0);
        let name = s.string("worker-1");
        let gone = s.string("worker-2");
        let before = s.bytes();
        for i in 0..100 {
            let f = s.frame(&format!("dead.M{i}.run"), "M.java", 1, 1, FrameKind::Jvm);
            s.stack(&[f, a]);
        }
        assert!(s.bytes() > before);
        // Only stack `one` and the name "worker-1" are still used.
        let mut seen = Vec::new();
        let uses: Vec<(u32, Vec<u32>)> = vec![(one, vec![name, 0])];
        let fresh = s.compact(uses.iter().map(|(st, n)| (*st, n.as_slice())), |st, n| {
            seen.push((st, n))
        });
        assert!(fresh.bytes() < before, "{} vs {before}", fresh.bytes());
        let (st, names) = &seen[0];
        let frames: Vec<&str> = fresh
            .stack_of(*st)
            .iter()
            .map(|&f| fresh.str(fresh.frame_of(f).unwrap().function))
            .collect();
        assert_eq!(frames, ["a.B.c", "a.B.d"]);
        assert_eq!(fresh.str(names[0]), "worker-1");
        assert_eq!(names[1], 0);
        assert!(!fresh.strings.iter().any(|x| &**x == s.str(gone)));
    }
}
