//! Turning jmethodIDs and bytecode indexes into function names, files and lines.
//!
//! Runs on the aggregator thread, never in the signal handler. A jmethodID of a class that
//! has been unloaded makes JVMTI return an error (HotSpot clears the id, it does not free it);
//! such frames are named `[unknown_method]` rather than dropped.
//!
//! The cache lives for one profile period: HotSpot may hand a freed jmethodID slot to a new
//! method after its class is unloaded, so a name cached forever could become wrong.

use std::collections::HashMap;

use jni::sys::{jmethodID, JNIEnv};
use otel_bridge::frame_name;

use crate::jvm::jvmti::{delete_local_ref, Jvmti};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MethodInfo {
    /// `pkg.Class.method`, with per-run parts of hidden and lambda class names removed.
    pub(crate) name: String,
    /// Source file from the class file (`Foo.java`), empty when the class has none.
    pub(crate) file: String,
    /// `(first bci, line)` sorted by bci.
    pub(crate) lines: Vec<(i64, i32)>,
}

impl MethodInfo {
    /// First line of the method, 0 when unknown.
    pub(crate) fn start_line(&self) -> i64 {
        self.lines.iter().map(|&(_, l)| l as i64).min().unwrap_or(0)
    }

    /// Source line of bytecode index `bci` (0 when unknown: bci < 0 or no line table).
    pub(crate) fn line_of(&self, bci: i32) -> i64 {
        line_for_bci(&self.lines, bci)
    }
}

/// The line of the last line-table entry starting at or before `bci`.
pub(crate) fn line_for_bci(sorted: &[(i64, i32)], bci: i32) -> i64 {
    if bci < 0 {
        return 0;
    }
    let idx = sorted.partition_point(|&(start, _)| start <= bci as i64);
    match idx.checked_sub(1).and_then(|i| sorted.get(i)) {
        Some(&(_, line)) => line as i64,
        None => sorted.first().map_or(0, |&(_, l)| l as i64),
    }
}

pub(crate) struct Symbols {
    jvmti: Jvmti,
    jni: *mut JNIEnv,
    methods: HashMap<usize, Option<MethodInfo>>,
    pub(crate) lookups: u64,
    pub(crate) failures: u64,
}

impl Symbols {
    /// `jni` is the aggregator thread's own JNIEnv (it deletes the local references JVMTI
    /// returns).
    pub(crate) fn new(jvmti: Jvmti, jni: *mut JNIEnv) -> Symbols {
        Symbols {
            jvmti,
            jni,
            methods: HashMap::new(),
            lookups: 0,
            failures: 0,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.methods.clear();
    }

    /// Name, file and lines of `id`.
    ///
    /// # Safety
    /// `id` is null or a jmethodID the VM handed out (AsyncGetCallTrace reports only those).
    pub(crate) unsafe fn method(&mut self, id: jmethodID) -> Option<&MethodInfo> {
        if id.is_null() {
            return None;
        }
        let key = id as usize;
        if !self.methods.contains_key(&key) {
            self.lookups += 1;
            // SAFETY: per this function's contract.
            let info = unsafe { self.resolve(id) };
            if info.is_none() {
                self.failures += 1;
            }
            self.methods.insert(key, info);
        }
        self.methods.get(&key).and_then(Option::as_ref)
    }

    /// # Safety
    /// `id` is a jmethodID that AsyncGetCallTrace reported (one the VM handed out; if its class
    /// has been unloaded since, JVMTI returns an error and the frame stays unnamed).
    unsafe fn resolve(&self, id: jmethodID) -> Option<MethodInfo> {
        // SAFETY: per this function's contract; `class` is a local reference of this thread
        // (whose JNIEnv is `self.jni`), deleted once after its last use.
        let (method, signature, file, mut lines) = unsafe {
            let method = self.jvmti.method_name(id).ok()?;
            let class = self.jvmti.method_declaring_class(id).ok()?;
            let signature = self.jvmti.class_signature(class);
            // Classes without a SourceFile attribute (generated code) give ABSENT_INFORMATION.
            let file = self.jvmti.source_file_name(class).unwrap_or_default();
            delete_local_ref(self.jni, class);
            // Abstract and native methods have no line table; that is not an error.
            let lines = self.jvmti.line_number_table(id).unwrap_or_default();
            (method, signature.ok()?, file, lines)
        };
        lines.sort_unstable();
        Some(MethodInfo {
            name: frame_name::function_name(&signature, &method),
            file,
            lines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bci_to_line() {
        let lines = vec![(0, 10), (4, 11), (9, 13)];
        assert_eq!(line_for_bci(&lines, 0), 10);
        assert_eq!(line_for_bci(&lines, 3), 10);
        assert_eq!(line_for_bci(&lines, 4), 11);
        assert_eq!(line_for_bci(&lines, 100), 13);
        assert_eq!(line_for_bci(&lines, -1), 0);
        assert_eq!(line_for_bci(&[], 5), 0);
        // A table that does not start at bci 0 (rare, but legal).
        assert_eq!(line_for_bci(&[(2, 7)], 0), 7);
        let m = MethodInfo {
            name: "a.B.c".into(),
            file: "B.java".into(),
            lines,
        };
        assert_eq!(m.start_line(), 10);
        assert_eq!(m.line_of(5), 11);
    }
}
