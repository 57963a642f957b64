//! The native frames of a sample, walked in the signal handler: from the interrupted
//! registers up to the first Java frame (or the thread's first frame), with the unwind tables
//! of [`crate::code_map::modules`] and the walker of `otelprof_native_frames::walk`.
//!
//! # Where the walk may read
//!
//! Only inside the interrupted thread's stack, between the interrupted stack pointer and the
//! stack's top:
//! - a thread created by the C library has its thread control block (what `pthread_self`
//!   returns, read from the thread pointer register) at the top of its stack mapping, so the
//!   top is `pthread_self()` when that lies above the stack pointer, within [`MAX_STACK`];
//! - a thread interrupted on its alternate signal stack (`uc_stack` says `SS_ONSTACK`) is
//!   bounded by that stack;
//! - anything else (the process's first thread, whose control block is not on its stack; a
//!   stack switched to by a native library) is not walked: the sample keeps its interrupted
//!   pc only, and the reason is counted ([`End::NoStack`]).
//!
//! Before the first read of a range, the kernel confirms it is mapped (`msync` fails with
//! `ENOMEM` on any hole, faults on nothing and writes nothing back for anonymous memory). The
//! range confirmed is kept in the thread's slot, so the check is one system call per thread
//! and stack depth reached, not per sample. Reads are then plain aligned loads inside it.
//!
//! # Signal safety
//! `pthread_self` (a load from the thread pointer), a raw `msync` system call, atomics of
//! the thread's slot, the module set's searches, and the walker (no allocation, no lock, no
//! panic). Indexing and unchecked arithmetic are denied.
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use otelprof_native_frames::walk::{self, End, Regs, StackMemory, Walked};

use crate::code_map::modules;
use crate::sampling::thread_table::ThreadSlot;

/// The deepest stack accepted between the stack pointer and the thread's control block.
const MAX_STACK: u64 = 1 << 30;

/// A stack range confirmed mapped: `[lo, hi)`.
struct ThreadStack {
    lo: u64,
    hi: u64,
}

impl StackMemory for ThreadStack {
    /// # Signal safety
    /// A bounds check and a volatile load inside the confirmed range.
    #[inline]
    fn read(&self, address: u64) -> Option<u64> {
        if address < self.lo || address & 7 != 0 || address > self.hi.checked_sub(8)? {
            return None;
        }
        // SAFETY: `address..address + 8` lies inside `[lo, hi)`, which the kernel confirmed
        // mapped and which is the live stack of the thread running this handler (or its
        // alternate signal stack): it stays mapped while the handler runs.
        Some(unsafe { std::ptr::read_volatile(address as *const u64) })
    }
}

/// The registers of the interrupted code.
///
/// # Safety
/// `ucontext` is null or the context the kernel passed to this handler.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) unsafe fn interrupted(ucontext: *const libc::c_void) -> Option<Regs> {
    let uc = ucontext.cast::<libc::ucontext_t>();
    if uc.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    let g = unsafe { &(*uc).uc_mcontext.gregs };
    let reg = |r: libc::c_int| g.get(usize::try_from(r).ok()?).map(|&v| v as u64);
    Some(Regs {
        pc: reg(libc::REG_RIP)?,
        sp: reg(libc::REG_RSP)?,
        fp: reg(libc::REG_RBP)?,
    })
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(crate) unsafe fn interrupted(_ucontext: *const libc::c_void) -> Option<Regs> {
    None
}

/// Whether the kernel has `[lo, hi)` fully mapped.
///
/// # Signal safety
/// One raw system call.
fn mapped(lo: u64, hi: u64) -> bool {
    let page_lo = lo & !0xfff;
    let Some(len) = hi.checked_sub(page_lo) else {
        return false;
    };
    // SAFETY: msync with MS_ASYNC only checks the range (ENOMEM for a hole) and schedules
    // nothing for anonymous memory; it never dereferences the range in user space.
    unsafe { libc::syscall(libc::SYS_msync, page_lo, len, libc::MS_ASYNC) == 0 }
}

/// The readable stack above `sp` (see the module docs), confirming and remembering it in
/// `slot`.
///
/// # Safety
/// `ucontext` is the context the kernel passed to this handler; `slot` is the calling
/// thread's.
unsafe fn stack_of(
    ucontext: *const libc::c_void,
    sp: u64,
    slot: &ThreadSlot,
) -> Option<ThreadStack> {
    let uc = ucontext.cast::<libc::ucontext_t>();
    // SAFETY: per this function's contract (non-null: checked by `interrupted`).
    let alt = unsafe { &(*uc).uc_stack };
    if alt.ss_flags & libc::SS_ONSTACK != 0 {
        let lo = alt.ss_sp as u64;
        let hi = lo.checked_add(alt.ss_size as u64)?;
        return (sp >= lo && sp < hi && mapped(sp, hi)).then_some(ThreadStack { lo: sp, hi });
    }
    // SAFETY: pthread_self reads the thread pointer; it has no preconditions.
    let tcb = unsafe { libc::pthread_self() } as u64;
    if sp >= tcb || tcb.wrapping_sub(sp) > MAX_STACK {
        return None;
    }
    let (lo, hi) = slot.stack_confirmed();
    if hi == tcb && sp >= lo {
        return Some(ThreadStack { lo: sp, hi });
    }
    // Confirm from `sp` up to what was confirmed before (or to the top).
    let upto = if hi == tcb && lo > sp { lo } else { tcb };
    if !mapped(sp, upto) {
        return None;
    }
    slot.confirm_stack(sp, tcb);
    Some(ThreadStack { lo: sp, hi: tcb })
}

/// The interrupted pc alone, unwalked: for the agent's own threads, whose callers would need
/// the agent's own unwind table (about 10 ms of CPU to build, and 1 MiB) to show what only
/// the agent's developers read.
///
/// # Safety
/// `ucontext` is null or the context the kernel passed to this handler.
///
/// # Signal safety
/// Reads the context.
pub(crate) unsafe fn leaf(ucontext: *const libc::c_void, out: &mut [u64]) -> Walked {
    let mut walked = Walked {
        frames: 0,
        end: End::NotWalked,
        at: Regs::default(),
        guessed: 0,
    };
    // SAFETY: per this function's contract.
    if let (Some(regs), Some(slot)) = (unsafe { interrupted(ucontext) }, out.first_mut()) {
        *slot = regs.pc;
        walked.frames = 1;
        walked.at = regs;
    }
    walked
}

/// Walks the native frames of the interrupted code into `out`.
///
/// # Safety
/// `ucontext` is null or the context the kernel passed to this handler; `slot` is the
/// calling thread's.
///
/// # Signal safety
/// See the module docs.
pub(crate) unsafe fn walk(
    ucontext: *const libc::c_void,
    slot: &ThreadSlot,
    out: &mut [u64],
) -> Walked {
    let not_walked = Walked {
        frames: 0,
        end: End::NotWalked,
        at: Regs::default(),
        guessed: 0,
    };
    let (Some(set), Some(regs)) = (
        modules::current(),
        // SAFETY: per this function's contract.
        unsafe { interrupted(ucontext) },
    ) else {
        return not_walked;
    };
    // SAFETY: per this function's contract.
    match unsafe { stack_of(ucontext, regs.sp, slot) } {
        Some(stack) => walk::walk(regs, set, &stack, out),
        None => {
            // No stack to read: the interrupted pc alone (unless it is Java code).
            let mut walked = Walked {
                end: End::NoStack,
                at: regs,
                ..not_walked
            };
            if set.is_java(regs.pc) {
                walked.end = End::ReachedJava;
            } else if let Some(slot) = out.first_mut() {
                *slot = regs.pc;
                walked.frames = 1;
            }
            walked
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::undocumented_unsafe_blocks
)]
mod tests {
    //! The real walk, with the real stack bounds, over garbage: registers and stack words
    //! drawn at random (pointers into the stack, into libraries, and noise), a stack pointer
    //! in unmapped memory, on another thread's stack, or far from this one. No read faults
    //! (the test would die), every walk ends, and only inside this thread's stack.
    use super::*;
    use crate::sampling::os::gettid;
    use crate::sampling::thread_table::ThreadTable;

    fn context(regs: Regs) -> libc::ucontext_t {
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = regs.pc as i64;
        uc.uc_mcontext.gregs[libc::REG_RSP as usize] = regs.sp as i64;
        uc.uc_mcontext.gregs[libc::REG_RBP as usize] = regs.fp as i64;
        uc
    }

    #[test]
    fn garbage_registers_and_smashed_stacks_never_fault() {
        static TABLE: ThreadTable = ThreadTable::new();
        crate::code_map::module_scan::ModuleScanner::new(None).scan_with_tables();
        TABLE.insert(gettid(), std::ptr::null_mut(), 1).unwrap();
        let slot = TABLE.lookup(gettid()).unwrap();
        let code = libc::qsort as *const () as u64;
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // A smashed stack: a frame of this thread's stack full of random words.
        let mut words = [0u64; 4096];
        let base = words.as_ptr() as u64;
        let mut out = [0u64; 64];
        let mut ends = [0usize; End::ALL.len()];
        for round in 0..50_000 {
            for w in words.iter_mut().step_by(1 + round % 7) {
                *w = match next() % 4 {
                    0 => base + (next() % 4200) * 8,
                    1 => code.wrapping_add(next() % 0x10000),
                    2 => next() % 0x1_0000_0000,
                    _ => next(),
                };
            }
            std::hint::black_box(&words);
            let sp = match round % 10 {
                // Unmapped, on another region, or unaligned.
                0 => 0x1000,
                1 => next(),
                2 => base + 3,
                _ => base + (next() % 4096) * 8,
            };
            let regs = Regs {
                pc: if next() % 2 == 0 {
                    code + next() % 0x1000
                } else {
                    next()
                },
                sp,
                fp: if next() % 2 == 0 {
                    base + (next() % 4200) * 8
                } else {
                    next()
                },
            };
            let uc = context(regs);
            let w = unsafe { walk(&uc as *const _ as *const libc::c_void, slot, &mut out) };
            assert!(w.frames <= out.len());
            ends[w.end as usize] += 1;
        }
        println!("ends: {ends:?}");
        // Walks that could read a stack did; the others recorded their pc only.
        assert!(ends[End::NoStack as usize] >= 5_000, "{ends:?}");
        assert!(
            ends[End::BadFrame as usize] + ends[End::NoModule as usize] >= 10_000,
            "{ends:?}"
        );
        assert_eq!(ends[End::NotWalked as usize], 0);
        TABLE.remove(gettid());
    }
}
