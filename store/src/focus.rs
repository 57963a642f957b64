//! Focus: which stacks and frames a reading keeps, by frame name. `include` keeps the stacks
//! with a frame that matches, `exclude` drops the stacks with one, `hide` removes the
//! matching frames from the stacks (a stack left with none is dropped), as `go tool pprof`'s
//! `-focus`, `-ignore` and `-hide` and async-profiler's `--include`, `--exclude` do.
//!
//! A pattern is matched against the whole frame name, `pkg.Class.method` (with source lines,
//! also the name without its ` (File.java:123)`), `*` standing for any run of characters,
//! dots included: `com.mycompany.*`, `*.lambda$*`, `java.*`. Matching is exact otherwise.
//!
//! The merger applies it once per distinct stack ([`crate::merge::Merger`]), so every answer
//! built on merges (top, flame graphs, diff and its noise estimate, traces, drilldown) sees
//! the same focused data.

/// One pattern: its literal pieces between the `*`s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    text: String,
    pieces: Vec<String>,
}

impl Glob {
    /// A pattern; empty patterns are refused (they would match nothing or, read generously,
    /// everything: neither is what anyone means).
    pub fn parse(text: &str) -> Result<Glob, String> {
        if text.trim().is_empty() {
            return Err("an empty pattern".to_owned());
        }
        Ok(Glob {
            text: text.to_owned(),
            pieces: text.split('*').map(str::to_owned).collect(),
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let Some((first, rest)) = self.pieces.split_first() else {
            return false;
        };
        let Some(mut tail) = name.strip_prefix(first.as_str()) else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            // No `*`: the prefix must have been all of it.
            return tail.is_empty();
        };
        for piece in middle {
            match tail.find(piece.as_str()) {
                Some(i) => tail = &tail[i + piece.len()..],
                None => return false,
            }
        }
        tail.len() >= last.len() && tail.ends_with(last.as_str())
    }
}

/// The three lists; the default keeps everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Focus {
    pub include: Vec<Glob>,
    pub exclude: Vec<Glob>,
    pub hide: Vec<Glob>,
}

/// What the focus says of one frame name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameVerdict {
    pub included: bool,
    pub excluded: bool,
    pub hidden: bool,
}

impl Focus {
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty() && self.hide.is_empty()
    }

    pub fn frame(&self, name: &str) -> FrameVerdict {
        // With source lines a frame is `name (File.java:123)`: the name alone matches too.
        let bare = name.split_once(" (").map_or(name, |(n, _)| n);
        let any = |globs: &[Glob]| globs.iter().any(|g| g.matches(name) || g.matches(bare));
        FrameVerdict {
            included: any(&self.include),
            excluded: any(&self.exclude),
            hidden: any(&self.hide),
        }
    }

    /// Applies the focus to one stack's frames (any order), given each frame's verdict:
    /// `false` when the stack is dropped; otherwise the hidden frames are removed.
    pub fn keep(&self, frames: &mut Vec<u32>, verdict: impl Fn(u32) -> FrameVerdict) -> bool {
        if !self.include.is_empty() && !frames.iter().any(|&f| verdict(f).included) {
            return false;
        }
        if frames.iter().any(|&f| verdict(f).excluded) {
            return false;
        }
        if !self.hide.is_empty() {
            frames.retain(|&f| !verdict(f).hidden);
        }
        !frames.is_empty()
    }

    /// `--include a --exclude b --hide c`, for headers and explanations.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (flag, globs) in [
            ("--include", &self.include),
            ("--exclude", &self.exclude),
            ("--hide", &self.hide),
        ] {
            for g in globs {
                parts.push(format!("{flag} {}", g.text()));
            }
        }
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(t: &str) -> Glob {
        Glob::parse(t).unwrap()
    }

    #[test]
    fn stars_match_any_run_and_the_rest_is_exact() {
        assert!(g("com.shop.*").matches("com.shop.Cart.add"));
        assert!(!g("com.shop.*").matches("com.shopping.Cart.add"));
        assert!(g("*.add").matches("com.shop.Cart.add"));
        assert!(!g("*.add").matches("com.shop.Cart.address"));
        assert!(g("*Cart*").matches("com.shop.Cart.add"));
        assert!(g("com.*.Cart.*").matches("com.shop.Cart.add"));
        assert!(g("Cart.add").matches("Cart.add"));
        assert!(!g("Cart.add").matches("com.Cart.add"));
        assert!(g("*").matches("anything"));
        assert!(g("a*a").matches("aa") && !g("a*a").matches("a"));
        assert!(g("java.*").matches("java.lang.Thread.run"));
        assert!(Glob::parse(" ").is_err());
    }

    #[test]
    fn lines_match_by_their_name_too() {
        let f = Focus {
            hide: vec![g("java.*")],
            ..Focus::default()
        };
        assert!(f.frame("java.lang.Thread.run (Thread.java:840)").hidden);
        assert!(!f.frame("com.x.Y.z (Y.java:1)").hidden);
    }

    #[test]
    fn include_exclude_hide_on_a_stack() {
        let names = [
            "java.lang.Thread.run",
            "com.shop.Cart.add",
            "java.util.HashMap.get",
        ];
        let focus = |i: &[&str], e: &[&str], h: &[&str]| Focus {
            include: i.iter().map(|t| g(t)).collect(),
            exclude: e.iter().map(|t| g(t)).collect(),
            hide: h.iter().map(|t| g(t)).collect(),
        };
        let run = |f: &Focus| {
            let mut frames = vec![0, 1, 2];
            let kept = f.keep(&mut frames, |i| f.frame(names[i as usize]));
            kept.then_some(frames)
        };
        assert_eq!(run(&Focus::default()), Some(vec![0, 1, 2]));
        assert_eq!(run(&focus(&["com.shop.*"], &[], &[])), Some(vec![0, 1, 2]));
        assert_eq!(run(&focus(&["org.*"], &[], &[])), None);
        assert_eq!(run(&focus(&[], &["*.HashMap.*"], &[])), None);
        assert_eq!(run(&focus(&[], &[], &["java.*"])), Some(vec![1]));
        assert_eq!(run(&focus(&[], &[], &["*"])), None);
        assert_eq!(
            focus(&["a"], &["b"], &["c"]).describe(),
            "--include a --exclude b --hide c"
        );
    }
}
