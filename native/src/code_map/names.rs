//! Names of native and kernel frames, given on the aggregator thread (never in the handler):
//! ELF symbols of the library a pc falls in (read from its file the first time one of its
//! frames is named, demangled), `/proc/kallsyms` for kernel addresses. An address without a
//! symbol is `libname+0xOFFSET` (the library's own address: what `addr2line -e libname`
//! takes), a kernel address without one `[kernel]`, an address in no library `[unknown]`:
//! never dropped.
//!
//! Each name comes with what the frame's location carries: the address (the function's start
//! when named, so that every sample of a function shares one location; the pc itself when
//! not) and the mapping (range, file, build id) a backend can symbolise it again with.

use std::collections::HashMap;
use std::path::Path;

use otelprof_native_frames::demangle::demangle;
use otelprof_native_frames::kallsyms::{kernel_build_id, KernelSymbols};
use otelprof_native_frames::symbols::{DebugSearch, SymbolTable};

use crate::code_map::module_scan;
use crate::code_map::modules::{self, Library, Module};

/// The binary a frame is in, as a location's mapping shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MappingOf {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) offset: u64,
    pub(crate) path: String,
    pub(crate) build_id: String,
}

/// A frame's name, address and mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Named {
    pub(crate) name: String,
    pub(crate) address: u64,
    pub(crate) mapping: Option<MappingOf>,
}

/// Where kernel code is mapped (the upper half of the address space on x86_64).
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// The kernel as a mapping.
struct Kernel {
    symbols: KernelSymbols,
    build_id: String,
}

/// The tables a stopped session read, for the next session of this process: libjvm's
/// symbols and the kernel's are tens of megabytes of names, read once per process rather than
/// once per session (a JVM started and stopped many times by attach would otherwise grow
/// with every session's copy, which the allocator does not always give back).
static KEPT: std::sync::Mutex<Option<NativeNames>> = std::sync::Mutex::new(None);

/// Symbol tables read so far, for the life of the process ([`NativeNames::take_kept`]).
#[derive(Default)]
pub(crate) struct NativeNames {
    /// By library (its address: libraries are never freed).
    symbols: HashMap<usize, SymbolTable>,
    /// Demangled names by library and function start.
    names: HashMap<(usize, u64), String>,
    kernel: Option<Kernel>,
}

impl NativeNames {
    /// What an earlier session of this process read, or nothing yet.
    pub(crate) fn take_kept() -> NativeNames {
        KEPT.lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default()
    }

    /// Leaves the tables for the next session ([`NativeNames::take_kept`]).
    pub(crate) fn keep(self) {
        *KEPT.lock().unwrap_or_else(|p| p.into_inner()) = Some(self);
    }

    /// The frame at `pc`: the interrupted pc when `leaf`, a return address otherwise (looked
    /// up at the call instruction, the byte before).
    pub(crate) fn native(&mut self, pc: u64, leaf: bool) -> Named {
        let at = if leaf { pc } else { pc.wrapping_sub(1) };
        let module_of = || modules::current().and_then(|s| s.module_of(at)).copied();
        // A library loaded since the last look at the maps: look again (rate-limited).
        let module = module_of().or_else(|| module_scan::rescan_now().then(module_of).flatten());
        let Some(module) = module else {
            return Named {
                name: "[unknown]".to_owned(),
                address: pc,
                mapping: None,
            };
        };
        let library = module.library;
        let key = library as *const Library as usize;
        let vaddr = at.wrapping_sub(module.bias);
        let symbols = self
            .symbols
            .entry(key)
            .or_insert_with(|| symbols_of(library));
        let mapping = Some(mapping_of(&module));
        match symbols.lookup(vaddr) {
            Some(found) => {
                let start = found.start;
                let name = self
                    .names
                    .entry((key, start))
                    .or_insert_with(|| demangle(found.name))
                    .clone();
                Named {
                    name,
                    address: start.wrapping_add(module.bias),
                    mapping,
                }
            }
            None => Named {
                name: format!("{}+{vaddr:#x}", library.file_name()),
                address: pc,
                mapping,
            },
        }
    }

    /// The kernel frame at `pc`.
    pub(crate) fn kernel(&mut self, pc: u64) -> Named {
        let kernel = self.kernel.get_or_insert_with(|| Kernel {
            symbols: KernelSymbols::read(),
            build_id: std::fs::read("/sys/kernel/notes")
                .ok()
                .and_then(|n| kernel_build_id(&n))
                .map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
                .unwrap_or_default(),
        });
        let mapping = Some(MappingOf {
            start: KERNEL_START,
            end: u64::MAX,
            offset: 0,
            path: otel_bridge::model::KERNEL_MAPPING.to_owned(),
            build_id: kernel.build_id.clone(),
        });
        match kernel.symbols.lookup(pc) {
            Some((name, start)) => Named {
                name: name.to_owned(),
                address: start,
                mapping,
            },
            None => Named {
                name: "[kernel]".to_owned(),
                address: pc,
                mapping,
            },
        }
    }
}

/// The symbols of a library: from its file (or, for the vDSO, its bytes), with a separate
/// debug file searched when the file has no `.symtab`.
fn symbols_of(library: &Library) -> SymbolTable {
    if let Some(image) = &library.image {
        return SymbolTable::from_elf(&image[..], None);
    }
    let path = Path::new(&library.path);
    // The symbol tables only, not the code or the debug information.
    match otelprof_native_frames::elf::read_sections(
        path,
        otelprof_native_frames::elf::SYMBOL_SECTIONS,
    ) {
        Ok(data) => SymbolTable::from_elf(&data, Some(&DebugSearch::new(path))),
        Err(_) => SymbolTable::empty(),
    }
}

fn mapping_of(m: &Module) -> MappingOf {
    MappingOf {
        start: m.start,
        end: m.end,
        offset: m.offset,
        path: m.library.path.clone(),
        build_id: m.library.build_id.clone(),
    }
}
