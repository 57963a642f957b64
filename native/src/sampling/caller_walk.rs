//! Walking again from the caller of the interrupted code, for the signal handler
//! ([`crate::sampling::signal_handler`]), when AsyncGetCallTrace cannot place the top frame.
//!
//! # Signal safety
//! Runs inside the SIGPROF handler: volatile reads of the top [`TOP_OF_STACK`] bytes of the
//! interrupted thread's own stack, writes to the signal's ucontext (restored before
//! returning), and calls of AsyncGetCallTrace. It never allocates, never blocks and cannot
//! panic: indexing and unchecked arithmetic are denied in this module.
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use crate::sys::{AsgctCallTrace, AsyncGetCallTraceFn};

/// Bytes at the top of an interrupted thread's stack that [`walk_from_caller`] may read.
const TOP_OF_STACK: u64 = 256;

/// Walks again from the caller of the interrupted code, when AsyncGetCallTrace could not place
/// the top frame (`unknown_Java`, `not_walkable_Java`). Returns whether a walk succeeded; if
/// none did, `trace` keeps the first walk's failure code.
///
/// HotSpot gives up on the top frame when the signal lands where that frame is not (yet, or
/// any more) a frame it can describe: a compiled method's prologue or epilogue, or a stub
/// (itable and vtable dispatch, array copies, intrinsics, adapters). The caller's frame is
/// intact there, and its return address is near the top of the stack. Each guess below points
/// the context's pc/sp/fp at the caller and walks again; HotSpot validates the frame it is
/// given (the pc must be in its code cache, the frame safe for its sender), so a wrong guess
/// fails like any other walk. In order:
/// 1. the return address at sp (before `push rbp`, after `pop rbp`, frameless stubs);
/// 2. the saved frame pointer at sp, the return address above it (just after `push rbp`);
/// 3. the frame pointer, if it points just above sp (stubs that set up `rbp` and then save
///    registers);
/// 4. the first two words further up that lie within 2 GiB of the pc (the code cache is one
///    reservation of at most 2 GiB): the return address above whatever the code pushed.
///
/// The recovered stack has no frame for the interrupted code: its time goes to the calling
/// Java method, which for stubs and intrinsics is the method that called them. The context is
/// restored before returning, because the kernel resumes the thread from it.
///
/// Only the [`TOP_OF_STACK`] bytes at the stack pointer are read: the top of the interrupted
/// thread's own stack, which is mapped well beyond that (a Java thread running Java code has
/// the JVM's entry frames above it, several kilobytes).
///
/// # Safety
/// `ucontext` is the context of the signal being handled on this thread; `trace.frames` has
/// room for `depth` frames.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) unsafe fn walk_from_caller(
    walk: AsyncGetCallTraceFn,
    trace: &mut AsgctCallTrace,
    depth: i32,
    ucontext: *mut libc::c_void,
) -> bool {
    const WORDS: usize = (TOP_OF_STACK / 8) as usize;
    let uc = ucontext.cast::<libc::ucontext_t>();
    if uc.is_null() {
        return false;
    }
    let (rip, rsp, rbp) = (
        libc::REG_RIP as usize,
        libc::REG_RSP as usize,
        libc::REG_RBP as usize,
    );
    // SAFETY: the kernel's ucontext for this signal, valid for the handler's duration.
    let regs = |uc: *mut libc::ucontext_t| unsafe { &mut (*uc).uc_mcontext.gregs };
    let set = |pc: i64, sp: i64, fp: i64| {
        let g = regs(uc);
        for (i, v) in [(rip, pc), (rsp, sp), (rbp, fp)] {
            if let Some(r) = g.get_mut(i) {
                *r = v;
            }
        }
    };
    let (pc, sp, fp) = {
        let g = regs(uc);
        match (g.get(rip), g.get(rsp), g.get(rbp)) {
            (Some(&pc), Some(&sp), Some(&fp)) => (pc, sp, fp),
            _ => return false,
        }
    };
    let top = sp as u64;
    if top == 0 || !top.is_multiple_of(8) || top.checked_add(TOP_OF_STACK).is_none() {
        return false;
    }
    let mut words = [0i64; WORDS];
    let mut address = top;
    for w in &mut words {
        // SAFETY: within TOP_OF_STACK bytes of the interrupted stack pointer (see above),
        // aligned; the sum cannot overflow (checked above).
        *w = unsafe { std::ptr::read_volatile(address as *const i64) };
        address = address.wrapping_add(8);
    }
    let word = |i: usize| words.get(i).copied().unwrap_or(0);
    // The stack pointer just above word `i`.
    let above = |i: usize| top.wrapping_add((i as u64).wrapping_add(1).wrapping_mul(8)) as i64;

    let mut guesses: [Option<(i64, i64, i64)>; 5] = [None; 5];
    guesses[0] = Some((word(0), above(0), fp));
    guesses[1] = Some((word(1), above(1), word(0)));
    let fp_offset = (fp as u64).wrapping_sub(top);
    if fp_offset > 0 && fp_offset.is_multiple_of(8) && fp_offset < TOP_OF_STACK - 8 {
        let i = (fp_offset / 8) as usize;
        guesses[2] = Some((word(i.wrapping_add(1)), above(i.wrapping_add(1)), word(i)));
    }
    let near = |w: i64| w.wrapping_sub(pc).unsigned_abs() < 1 << 31;
    let mut slot = 3;
    for i in 2..WORDS {
        if slot == guesses.len() {
            break;
        }
        if near(word(i)) {
            if let Some(g) = guesses.get_mut(slot) {
                *g = Some((word(i), above(i), word(i.wrapping_sub(1))));
            }
            slot = slot.wrapping_add(1);
        }
    }

    let failure = trace.num_frames;
    let mut recovered = false;
    for (caller_pc, caller_sp, caller_fp) in guesses.into_iter().flatten() {
        set(caller_pc, caller_sp, caller_fp);
        trace.num_frames = 0;
        // SAFETY: per this function's contract; the context now describes the caller.
        unsafe { walk(trace, depth, ucontext) };
        if trace.num_frames > 0 {
            recovered = true;
            break;
        }
    }
    set(pc, sp, fp);
    if !recovered {
        trace.num_frames = failure;
    }
    recovered
}

/// Walks again from the frame at `regs` (the first Java frame, as the native walk recovered
/// it: [`crate::sampling::native_walk`]). Returns whether the walk succeeded; if not, `trace`
/// keeps the first walk's failure code. Exact where [`walk_from_caller`] guesses: the native
/// walk followed the unwind rules to the return address into Java code, with the caller's
/// stack and frame pointers.
///
/// # Safety
/// `ucontext` is the context of the signal being handled on this thread; `trace.frames` has
/// room for `depth` frames.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) unsafe fn walk_from_frame(
    walk: AsyncGetCallTraceFn,
    trace: &mut AsgctCallTrace,
    depth: i32,
    ucontext: *mut libc::c_void,
    regs: otelprof_native_frames::walk::Regs,
) -> bool {
    let uc = ucontext.cast::<libc::ucontext_t>();
    if uc.is_null() {
        return false;
    }
    let index = |r: libc::c_int| r as usize;
    let (rip, rsp, rbp) = (
        index(libc::REG_RIP),
        index(libc::REG_RSP),
        index(libc::REG_RBP),
    );
    // SAFETY: the kernel's ucontext for this signal, valid for the handler's duration; each
    // borrow ends before AsyncGetCallTrace reads the context.
    let regs_of = |uc: *mut libc::ucontext_t| unsafe { &mut (*uc).uc_mcontext.gregs };
    let saved = {
        let g = regs_of(uc);
        match (g.get(rip), g.get(rsp), g.get(rbp)) {
            (Some(&pc), Some(&sp), Some(&fp)) => (pc, sp, fp),
            _ => return false,
        }
    };
    let set = |pc: i64, sp: i64, fp: i64| {
        let g = regs_of(uc);
        for (i, v) in [(rip, pc), (rsp, sp), (rbp, fp)] {
            if let Some(r) = g.get_mut(i) {
                *r = v;
            }
        }
    };
    set(regs.pc as i64, regs.sp as i64, regs.fp as i64);
    let failure = trace.num_frames;
    trace.num_frames = 0;
    // SAFETY: per this function's contract; the context now describes the Java frame.
    unsafe { walk(trace, depth, ucontext) };
    set(saved.0, saved.1, saved.2);
    if trace.num_frames > 0 {
        return true;
    }
    trace.num_frames = failure;
    false
}

/// Elsewhere the first walk's failure stands.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(crate) unsafe fn walk_from_frame(
    _walk: AsyncGetCallTraceFn,
    _trace: &mut AsgctCallTrace,
    _depth: i32,
    _ucontext: *mut libc::c_void,
    _regs: otelprof_native_frames::walk::Regs,
) -> bool {
    false
}

/// Elsewhere the first walk's failure stands.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(crate) unsafe fn walk_from_caller(
    _walk: AsyncGetCallTraceFn,
    _trace: &mut AsgctCallTrace,
    _depth: i32,
    _ucontext: *mut libc::c_void,
) -> bool {
    false
}
