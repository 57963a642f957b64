//! The libraries of this process as the signal handler's native walk sees them: a sorted
//! list of executable mappings, each with its library's unwind table and load bias, and the
//! ranges of the JVM's code cache (Java code, where a native walk ends).
//!
//! A [`ModuleSet`] is built off the handler ([`super::module_scan`]) and published with one
//! atomic pointer swap; the handler reads the current one with one atomic load and never
//! waits. A large library's unwind table may be built only once a walk has met its code:
//! until then the walk ends at that library's frame and marks it wanted (one atomic store),
//! and the module watch builds it and sets it in place (one atomic release). Sets and
//! libraries are never freed: a handler that loaded the old pointer may still be searching
//! it, and what a set holds is small (the tables, the large part, are shared by every later
//! set and live as long as the process). A new set is published only when the
//! libraries changed, so their number bounds the memory kept.
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::OnceLock;

use otelprof_native_frames::unwind_table::UnwindTable;
use otelprof_native_frames::walk::{Code, CodeMap};

/// A library (or the vDSO), shared by every module set that holds it.
#[derive(Debug)]
pub(crate) struct Library {
    /// The file as the maps name it (`[vdso]` for the vDSO).
    pub(crate) path: String,
    /// Its GNU build id in hex, or empty.
    pub(crate) build_id: String,
    /// Its unwind table, once built.
    pub(crate) table: OnceLock<UnwindTable>,
    /// Set by a walk that met this library's code before its table was built.
    pub(crate) wanted: AtomicBool,
    /// Where its bytes are read from when the table is built: the file, or the mapping's
    /// link in `/proc/self/map_files` for a file deleted since it was mapped.
    pub(crate) source: String,
    /// Its bytes, when they do not come from a file (the vDSO): for its symbols and table.
    pub(crate) image: Option<Vec<u8>>,
    /// Its loadable segments, to place each of its mappings.
    pub(crate) segments: Vec<otelprof_native_frames::elf::Segment>,
}

impl Library {
    /// A library whose file could not be read: no segments (no mapping is placed in it) and
    /// an empty table.
    pub(crate) fn unread(path: String, source: String) -> Library {
        Library {
            path,
            build_id: String::new(),
            table: OnceLock::from(UnwindTable::default()),
            wanted: AtomicBool::new(false),
            source,
            image: None,
            segments: Vec::new(),
        }
    }

    /// The file name without directories: `libjvm.so`.
    pub(crate) fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// One executable mapping of a library.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Module {
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// File offset of `start`.
    pub(crate) offset: u64,
    /// Run-time address minus the library's own virtual address.
    pub(crate) bias: u64,
    pub(crate) library: &'static Library,
}

/// Where code is, at one moment.
#[derive(Debug, Default)]
pub(crate) struct ModuleSet {
    /// Sorted by start, not overlapping.
    modules: Box<[Module]>,
    /// The code cache's ranges, sorted.
    java: Box<[(u64, u64)]>,
}

impl ModuleSet {
    pub(crate) fn new(mut modules: Vec<Module>, mut java: Vec<(u64, u64)>) -> ModuleSet {
        modules.sort_by_key(|m| m.start);
        java.sort_unstable();
        ModuleSet {
            modules: modules.into_boxed_slice(),
            java: java.into_boxed_slice(),
        }
    }

    /// The module holding `pc`.
    ///
    /// # Signal safety
    /// A binary search.
    #[inline]
    pub(crate) fn module_of(&self, pc: u64) -> Option<&Module> {
        let after = self.modules.partition_point(|m| m.start <= pc);
        let m = self.modules.get(after.checked_sub(1)?)?;
        (pc < m.end).then_some(m)
    }

    /// Whether `pc` is in the JVM's code cache.
    ///
    /// # Signal safety
    /// A binary search.
    #[inline]
    pub(crate) fn is_java(&self, pc: u64) -> bool {
        let after = self.java.partition_point(|&(start, _)| start <= pc);
        after
            .checked_sub(1)
            .and_then(|i| self.java.get(i))
            .is_some_and(|&(_, end)| pc < end)
    }
}

impl CodeMap for ModuleSet {
    /// # Signal safety
    /// Two binary searches, an atomic load (`OnceLock::get`) and an atomic store.
    fn find(&self, pc: u64) -> Code<'_> {
        if self.is_java(pc) {
            return Code::Java;
        }
        let Some(m) = self.module_of(pc) else {
            return Code::Unknown;
        };
        match m.library.table.get() {
            Some(table) => Code::Module {
                table,
                bias: m.bias,
            },
            None => {
                m.library.wanted.store(true, Ordering::Relaxed);
                Code::Pending
            }
        }
    }
}

static CURRENT: AtomicPtr<ModuleSet> = AtomicPtr::new(std::ptr::null_mut());

/// The module set in force, if one was published.
///
/// # Signal safety
/// One atomic load.
#[inline]
pub(crate) fn current() -> Option<&'static ModuleSet> {
    let p = CURRENT.load(Ordering::Acquire);
    // SAFETY: only `publish` stores here, a leaked (never freed) Box.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Makes `set` the current set. The previous one is left allocated (see the module docs).
pub(crate) fn publish(set: ModuleSet) {
    let p = Box::into_raw(Box::new(set));
    CURRENT.store(p, Ordering::Release);
}
