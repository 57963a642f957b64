//! Native and kernel frames, as safe code the agent's signal handler and aggregator share:
//!
//! - [`unwind_table`]: how to find a function's caller at any of its instructions, read once
//!   from a library's `.eh_frame` into a compact table (one 8-byte row per change of rule);
//! - [`walk`]: the stack walk over those tables, given the interrupted registers, a view of
//!   the thread's stack and a map of where code is. It allocates nothing, locks nothing and
//!   cannot panic, so the agent runs it inside its signal handler; every read of the stack
//!   goes through [`walk::StackMemory`], which the caller bounds;
//! - [`maps`]: `/proc/PID/maps`, parsed;
//! - [`elf`]: what a loaded ELF file says about itself (build id, load segments);
//! - [`symbols`]: function names from `.symtab` or `.dynsym` (or a separate debug file), with
//!   sizes, so that an address past a function's end is never given its name;
//! - [`kallsyms`]: kernel function names from `/proc/kallsyms`;
//! - [`demangle`]: C++ and Rust names as people read them.
//!
//! No global state, no threads; I/O only where a function says it reads a file. x86_64 only
//! for the unwinding (its register numbers and PLT rule); the symbols are portable.
#![forbid(unsafe_code)]

pub mod demangle;
pub mod elf;
pub mod kallsyms;
pub mod maps;
pub mod symbols;
pub mod unwind_table;
pub mod walk;
