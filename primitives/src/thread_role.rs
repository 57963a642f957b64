//! The frames that name a thread's role instead of its stack.
//!
//! The agent walks Java threads only. The CPU of the process's other threads (the garbage
//! collector's workers, the JIT compilers, the VM thread, the agent's own threads, a native
//! library's) is recorded as a stack of one frame naming the thread's role, with the thread's
//! name as its `thread_name` label. Those threads never run request code, so they carry no
//! span labels; readers that group by a span label show them under their role rather than
//! mixing them into "outside any span" (see `otelprof_store::merge`).

/// The role frames, as the agent writes them.
pub const ROLE_FRAMES: [&str; 5] = [
    "[GC]",
    "[JIT compiler]",
    "[VM]",
    "[otelprof]",
    "[native thread]",
];

/// Whether `name` is the frame of a thread that is not walked (one of [`ROLE_FRAMES`]).
pub fn is_role_frame(name: &str) -> bool {
    ROLE_FRAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_frames_are_recognised_and_nothing_else() {
        for f in ROLE_FRAMES {
            assert!(is_role_frame(f), "{f}");
        }
        for f in [
            "[gc_active]",
            "[unknown_Java]",
            "GC",
            "[gc]",
            "",
            "java.lang.Thread.run",
        ] {
            assert!(!is_role_frame(f), "{f}");
        }
    }
}
