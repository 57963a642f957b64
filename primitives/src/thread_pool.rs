//! Thread pools from thread names: the threads of one pool differ only by a number
//! (`http-nio-8080-exec-1` … `-exec-19`), so folding the last number of a name into `N` gives
//! the pool (`http-nio-8080-exec-N`), and a pool reads as one row however many threads it had
//! this hour. Only the last number: `ForkJoinPool-1-worker-3` is worker 3 of pool 1, and pool 1
//! stays apart from pool 2. A leading token of one capital letter and digits (`C2 `, `G1 `) is
//! HotSpot's name of a component (a compiler, a collector), not a thread's number: the kernel
//! keeps 15 bytes of a name, so `C2 CompilerThread0` reads `C2 CompilerThre` when the agent
//! finds the thread in `/proc`, and folding its `2` would give `CN CompilerThre`.

use std::borrow::Cow;

/// The pool of a thread name: its last run of ASCII digits replaced by `N`; the name itself
/// when it has no digits.
pub fn pool_of(thread_name: &str) -> Cow<'_, str> {
    let bytes = thread_name.as_bytes();
    let Some(end) = bytes.iter().rposition(u8::is_ascii_digit) else {
        return Cow::Borrowed(thread_name);
    };
    if end < component_prefix(bytes) {
        return Cow::Borrowed(thread_name);
    }
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    // Digits are ASCII, so both ends are char boundaries.
    let (head, rest) = thread_name.split_at(start);
    let tail = rest.get(end + 1 - start..).unwrap_or("");
    Cow::Owned(format!("{head}N{tail}"))
}

/// The length of a leading `C2 `-like token (a capital letter, digits, a space), 0 if none.
fn component_prefix(bytes: &[u8]) -> usize {
    let digits = bytes
        .iter()
        .skip(1)
        .take_while(|b| b.is_ascii_digit())
        .count();
    match (bytes.first(), bytes.get(1 + digits)) {
        (Some(b), Some(b' ')) if b.is_ascii_uppercase() && digits > 0 => 1 + digits + 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_number_folds() {
        for (name, pool) in [
            ("exec-1", "exec-N"),
            ("exec-19", "exec-N"),
            ("http-nio-8080-exec-10", "http-nio-8080-exec-N"),
            ("ForkJoinPool-1-worker-3", "ForkJoinPool-1-worker-N"),
            ("pool-2-thread-7", "pool-2-thread-N"),
            ("GC Thread#3", "GC Thread#N"),
            ("C2 CompilerThread0", "C2 CompilerThreadN"),
            // As the kernel names them (15 bytes): the component's number stays.
            ("C2 CompilerThre", "C2 CompilerThre"),
            ("C1 CompilerThre", "C1 CompilerThre"),
            ("G1 Refine#0", "G1 Refine#N"),
            ("G1 Conc#1", "G1 Conc#N"),
            ("G1", "GN"),
            ("T1 x", "T1 x"),
            ("t1 x", "tN x"),
            ("worker-3-io", "worker-N-io"),
            ("42", "N"),
            ("main", "main"),
            ("", ""),
            ("pool-é-7", "pool-é-N"),
        ] {
            assert_eq!(pool_of(name), pool, "{name}");
        }
        assert!(matches!(pool_of("main"), Cow::Borrowed(_)));
    }
}
