//! Native and kernel frames as locations of one profile being built: each pc named once per
//! profile ([`super::names`]), each binary one mapping, and the frames of a sample put in
//! order (leaf first: kernel, native, then a frame marking a native walk that broke off).
//!
//! The frames every thread starts with (`clone3`, `start_thread`, HotSpot's
//! `thread_native_entry`, `Thread::call_run`) say nothing about what a thread does; at the
//! root of a stack without Java frames they are left out, so that a GC worker's stack starts
//! at its role frame and then what it works on (`[GC]` → `G1ParScanThreadState::…`).

use std::collections::{HashMap, HashSet};

use otel_bridge::{FrameKind, LocationId, MappingId, ProfileBuilder};
use otelprof_native_frames::walk::End;

use crate::code_map::names::{MappingOf, Named, NativeNames};

/// Functions that start threads, left out at the root of stacks without Java frames.
const THREAD_ENTRIES: &[&str] = &[
    "clone3",
    "__clone3",
    "clone",
    "__clone",
    "start_thread",
    "thread_native_entry",
    "Thread::call_run",
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
];

/// What a profile being built knows of native frames.
#[derive(Default)]
pub(crate) struct NativeLocations {
    /// By kind of lookup (0: leaf pc, 1: return address, 2: kernel) and pc.
    by_pc: HashMap<(u8, u64), LocationId>,
    mappings: HashMap<(u64, u64), MappingId>,
    thread_entries: HashSet<LocationId>,
    ends: HashMap<u8, LocationId>,
}

/// One sample's native part, as the buffer's record holds it.
pub(crate) struct NativeStack<'a> {
    /// Kernel frame addresses, leaf first.
    pub(crate) kernel: &'a [u64],
    /// Native frame addresses, leaf first: the interrupted pc, then return addresses.
    pub(crate) native: &'a [u64],
    /// How the native walk ended.
    pub(crate) end: End,
    /// Whether Java frames follow (else the thread-start frames at the root are left out).
    pub(crate) java_follows: bool,
}

impl NativeLocations {
    /// Appends the locations of `stack` to `out`, leaf first.
    pub(crate) fn extend(
        &mut self,
        b: &mut ProfileBuilder,
        names: &mut NativeNames,
        stack: &NativeStack<'_>,
        out: &mut Vec<LocationId>,
    ) {
        for &pc in stack.kernel {
            out.push(self.location(b, names, 2, pc));
        }
        let first_native = out.len();
        for (i, &pc) in stack.native.iter().enumerate() {
            out.push(self.location(b, names, u8::from(i > 0), pc));
        }
        if !stack.java_follows {
            while out.len() > first_native
                && out.last().is_some_and(|l| self.thread_entries.contains(l))
            {
                out.pop();
            }
        }
        if !stack.end.is_complete() && stack.end != End::NotWalked {
            out.push(self.walk_end(b, stack.end));
        }
    }

    /// Forgets every location (the profile they belong to was written).
    pub(crate) fn clear(&mut self) {
        self.by_pc.clear();
        self.mappings.clear();
        self.thread_entries.clear();
        self.ends.clear();
    }

    fn location(
        &mut self,
        b: &mut ProfileBuilder,
        names: &mut NativeNames,
        lookup: u8,
        pc: u64,
    ) -> LocationId {
        if let Some(&l) = self.by_pc.get(&(lookup, pc)) {
            return l;
        }
        let (named, kind) = match lookup {
            2 => (names.kernel(pc), FrameKind::Kernel),
            _ => (names.native(pc, lookup == 0), FrameKind::Native),
        };
        let l = self.intern(b, &named, kind);
        if kind == FrameKind::Native && THREAD_ENTRIES.contains(&named.name.as_str()) {
            self.thread_entries.insert(l);
        }
        // A native pc in no known library is named again next time: the library may have
        // been loaded since (the module set catches up within a second), and this name
        // would stick to every later sample of that pc in this profile.
        if kind == FrameKind::Kernel || named.mapping.is_some() {
            self.by_pc.insert((lookup, pc), l);
        }
        l
    }

    fn intern(&mut self, b: &mut ProfileBuilder, named: &Named, kind: FrameKind) -> LocationId {
        let mapping = match &named.mapping {
            Some(m) => self.mapping(b, m),
            None => MappingId(0),
        };
        let f = b.function(&named.name, "", 0);
        b.code_location(f, kind, named.address, mapping)
    }

    fn mapping(&mut self, b: &mut ProfileBuilder, m: &MappingOf) -> MappingId {
        *self
            .mappings
            .entry((m.start, m.end))
            .or_insert_with(|| b.mapping(m.start..m.end, m.offset, &m.path, &m.build_id))
    }

    /// The frame that marks a native walk that broke off: `[native_walk_<reason>]`.
    fn walk_end(&mut self, b: &mut ProfileBuilder, end: End) -> LocationId {
        *self.ends.entry(end as u8).or_insert_with(|| {
            let f = b.function(&format!("[native_walk_{}]", end.name()), "", 0);
            b.location(f, 0, FrameKind::Pseudo)
        })
    }
}
