//! The native stack walk: from the registers of an interrupted thread, up through the frames
//! of native code, to the first frame of Java code (or the thread's first frame).
//!
//! Each step finds the code the pc is in ([`CodeMap`]), the unwind rule at that instruction
//! ([`UnwindTable::lookup`]), and from the rule the caller's stack pointer (the CFA), its
//! frame pointer and the return address, read from the stack ([`StackMemory`]). Every
//! value read is checked before it is used: the CFA must lie above the current stack pointer
//! and within [`MAX_FRAME`] of it, aligned, and each read must be one the stack view allows.
//! The pc itself is only ever a search key, never dereferenced. A check that fails ends the
//! walk with the frames found so far and the reason ([`End`]).
//!
//! # Signal safety
//! [`walk`] allocates nothing, takes no lock, and cannot panic (no indexing, no unchecked
//! arithmetic): the agent calls it in its signal handler, with a [`StackMemory`] that reads
//! only inside the interrupted thread's stack.
#![forbid(unsafe_code)]
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use crate::unwind_table::{Cfa, Rule, UnwindTable};

/// The largest frame a step accepts (CFA minus stack pointer): beyond it the rule or the
/// registers are taken to be wrong.
pub const MAX_FRAME: u64 = 256 * 1024;

/// The registers a walk follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
}

/// Reads the interrupted thread's stack.
pub trait StackMemory {
    /// The 8-byte word at `address`, or `None` if it may not be read.
    ///
    /// # Signal safety
    /// Implementations used in a signal handler must be async-signal-safe.
    fn read(&self, address: u64) -> Option<u64>;
}

/// What is at a code address.
#[derive(Clone, Copy, Debug)]
pub enum Code<'a> {
    /// A library with its unwind table, loaded at `bias` (run-time address minus the
    /// library's own address).
    Module { table: &'a UnwindTable, bias: u64 },
    /// Java code: the JVM's code cache (interpreter, compiled methods, stubs). A native walk
    /// ends here; the Java frames are another walker's.
    Java,
    /// A library whose unwind table is not built yet (tables are built for the libraries
    /// walks meet, off the walker's thread): the walk ends here.
    Pending,
    /// Nothing known.
    Unknown,
}

/// Where code is.
pub trait CodeMap {
    /// # Signal safety
    /// Implementations used in a signal handler must be async-signal-safe.
    fn find(&self, pc: u64) -> Code<'_>;
}

/// Why a walk ended. `ReachedJava` and `StackBottom` are the two normal ends.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum End {
    /// No walk was made.
    #[default]
    NotWalked = 0,
    /// The next frame is Java code.
    ReachedJava = 1,
    /// The thread's first frame (its return address is undefined, or zero).
    StackBottom = 2,
    /// A pc in no known library and not in Java code.
    NoModule = 3,
    /// An unwind rule this walker does not follow (a DWARF expression).
    Unsupported = 4,
    /// The rule or the registers gave a CFA or a saved word outside the stack.
    BadFrame = 5,
    /// The frame array is full.
    DepthLimit = 6,
    /// The stack's bounds were not known: only the interrupted pc was recorded.
    NoStack = 7,
    /// The pc is in a library whose unwind table is not built yet.
    TablePending = 8,
}

impl End {
    pub const ALL: [End; 9] = [
        End::NotWalked,
        End::ReachedJava,
        End::StackBottom,
        End::NoModule,
        End::Unsupported,
        End::BadFrame,
        End::DepthLimit,
        End::NoStack,
        End::TablePending,
    ];

    /// # Signal safety
    /// A comparison chain.
    pub fn from_u8(v: u8) -> End {
        match v {
            1 => End::ReachedJava,
            2 => End::StackBottom,
            3 => End::NoModule,
            4 => End::Unsupported,
            5 => End::BadFrame,
            6 => End::DepthLimit,
            7 => End::NoStack,
            8 => End::TablePending,
            _ => End::NotWalked,
        }
    }

    /// Whether the walk ended where it should (not cut short).
    pub fn is_complete(self) -> bool {
        matches!(self, End::ReachedJava | End::StackBottom)
    }

    /// A short name, for counters and the frame that marks a broken walk.
    pub fn name(self) -> &'static str {
        match self {
            End::NotWalked => "not_walked",
            End::ReachedJava => "reached_java",
            End::StackBottom => "stack_bottom",
            End::NoModule => "no_module",
            End::Unsupported => "unsupported_rule",
            End::BadFrame => "bad_frame",
            End::DepthLimit => "depth_limit",
            End::NoStack => "no_stack",
            End::TablePending => "table_pending",
        }
    }
}

/// What a walk found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walked {
    /// Frames written to the output, leaf first: the interrupted pc, then return addresses.
    pub frames: usize,
    pub end: End,
    /// The registers of the frame where the walk ended: for [`End::ReachedJava`], those of
    /// the first Java frame (its pc, stack and frame pointer), from which a Java walker can
    /// start.
    pub at: Regs,
    /// Steps that assumed a frame pointer where no unwind information was found.
    pub guessed: u32,
}

/// Walks from `start` (the interrupted registers), writing each native frame's pc to `out`
/// (the interrupted pc first, then return addresses), until Java code, the thread's first
/// frame, a full `out` or a step that fails its checks.
///
/// # Signal safety
/// See the module docs.
pub fn walk(start: Regs, code: &impl CodeMap, stack: &impl StackMemory, out: &mut [u64]) -> Walked {
    let mut regs = start;
    let mut walked = Walked {
        frames: 0,
        end: End::NotWalked,
        at: start,
        guessed: 0,
    };
    for depth in 0..=out.len() {
        walked.at = regs;
        // The leaf's pc is the interrupted instruction; a caller's is a return address, whose
        // call instruction is the byte before it (a call can be a function's last instruction).
        let lookup = if depth == 0 {
            regs.pc
        } else {
            regs.pc.wrapping_sub(1)
        };
        let found = code.find(regs.pc);
        if let Code::Java = found {
            walked.end = End::ReachedJava;
            return walked;
        }
        let Some(slot) = out.get_mut(depth) else {
            walked.end = End::DepthLimit;
            return walked;
        };
        *slot = regs.pc;
        walked.frames = depth.wrapping_add(1);
        let (table, bias) = match found {
            Code::Module { table, bias } => (table, bias),
            Code::Pending => {
                walked.end = End::TablePending;
                return walked;
            }
            _ => {
                walked.end = End::NoModule;
                return walked;
            }
        };
        let rule = match table.lookup(lookup.wrapping_sub(bias)) {
            Some(rule) => rule,
            None => {
                walked.guessed = walked.guessed.wrapping_add(1);
                Rule::FRAME_POINTER
            }
        };
        match step(regs, rule, stack) {
            Ok(next) => regs = next,
            Err(end) => {
                walked.end = end;
                return walked;
            }
        }
    }
    walked.end = End::DepthLimit;
    walked
}

/// One step from a frame to its caller.
fn step(regs: Regs, rule: Rule, stack: &impl StackMemory) -> Result<Regs, End> {
    let (cfa, rbp, ra) = match rule {
        Rule::Frame { cfa, rbp, ra } => (cfa, rbp, ra),
        Rule::Outermost => return Err(End::StackBottom),
        Rule::Unsupported => return Err(End::Unsupported),
    };
    let cfa = match cfa {
        Cfa::Sp(off) => regs.sp.checked_add_signed(i64::from(off)),
        Cfa::Fp(off) => regs.fp.checked_add_signed(i64::from(off)),
        Cfa::Plt => {
            let pushed = if regs.pc & 15 >= 11 { 16 } else { 8 };
            regs.sp.checked_add(pushed)
        }
    }
    .ok_or(End::BadFrame)?;
    // The caller's stack pointer lies above ours (the call pushed at least the return
    // address), within one frame's reach, and aligned.
    if cfa <= regs.sp || cfa.wrapping_sub(regs.sp) > MAX_FRAME || cfa & 7 != 0 {
        return Err(End::BadFrame);
    }
    let at = |off: i32| cfa.checked_add_signed(i64::from(off)).ok_or(End::BadFrame);
    let pc = stack.read(at(ra)?).ok_or(End::BadFrame)?;
    let fp = match rbp {
        Some(off) => stack.read(at(off)?).ok_or(End::BadFrame)?,
        None => regs.fp,
    };
    if pc == 0 {
        return Err(End::StackBottom);
    }
    Ok(Regs { pc, sp: cfa, fp })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    //! The walker over synthetic stacks, with a memory view that records every address it is
    //! asked for: corrupted frame pointers, unmapped pcs, loops and a smashed stack end the
    //! walk with a reason, and no read ever leaves the stack.
    use super::*;
    use std::cell::RefCell;

    /// A stack of words at `base`, and the addresses read.
    struct Stack {
        base: u64,
        words: Vec<u64>,
        reads: RefCell<Vec<u64>>,
    }

    impl StackMemory for Stack {
        fn read(&self, address: u64) -> Option<u64> {
            self.reads.borrow_mut().push(address);
            if address < self.base || !address.is_multiple_of(8) {
                return None;
            }
            self.words
                .get(((address - self.base) / 8) as usize)
                .copied()
        }
    }

    impl Stack {
        fn new(base: u64, words: Vec<u64>) -> Stack {
            Stack {
                base,
                words,
                reads: RefCell::new(Vec::new()),
            }
        }

        fn at(&self, i: usize) -> u64 {
            self.base + 8 * i as u64
        }

        /// Reads the view refused (outside the stack, or unaligned).
        fn refused(&self) -> usize {
            let end = self.base + 8 * self.words.len() as u64;
            self.reads
                .borrow()
                .iter()
                .filter(|&&a| a < self.base || a >= end || !a.is_multiple_of(8))
                .count()
        }
    }

    /// Two libraries at 0x10000 (frame-pointer code) and 0x20000 (leaf-ish code that keeps
    /// no frame pointer), a library without its table yet at 0x30000; Java code at 0x90000.
    struct Map {
        fp_lib: UnwindTable,
        sp_lib: UnwindTable,
    }

    impl CodeMap for Map {
        fn find(&self, pc: u64) -> Code<'_> {
            match pc {
                0x10000..=0x1ffff => Code::Module {
                    table: &self.fp_lib,
                    bias: 0x10000,
                },
                0x20000..=0x2ffff => Code::Module {
                    table: &self.sp_lib,
                    bias: 0x20000,
                },
                0x30000..=0x3ffff => Code::Pending,
                0x90000..=0x9ffff => Code::Java,
                _ => Code::Unknown,
            }
        }
    }

    fn map() -> Map {
        // fp_lib: no FDEs at all (every step assumes a frame pointer); sp_lib: one function
        // at 0..0x1000 whose frame is rsp+24 (it pushed two words), rbp untouched, plus an
        // outermost function at 0x1000..0x1100.
        let sp_rows = UnwindTable::from_ranges(&[
            (
                0,
                Some(Rule::Frame {
                    cfa: Cfa::Sp(24),
                    rbp: None,
                    ra: -8,
                }),
            ),
            (0x1000, Some(Rule::Outermost)),
            (0x1100, None),
        ])
        .unwrap();
        Map {
            fp_lib: UnwindTable::default(),
            sp_lib: sp_rows,
        }
    }

    #[test]
    fn frames_up_to_java_code_with_the_java_frame_registers() {
        let map = map();
        // Stack (grows down; index 0 is the lowest address = sp at the leaf):
        // leaf in sp_lib: [0]=x [1]=y [2]=ret into fp_lib 0x10010
        // fp_lib frame: rbp -> [4]; [4]=saved rbp -> [8], [5]=ret 0x10100
        // fp_lib frame 2: [8]=saved rbp -> [12], [9]=ret into Java 0x90000
        let base = 0x7000_0000;
        let mut words = vec![0u64; 16];
        words[2] = 0x10010;
        words[4] = base + 8 * 8;
        words[5] = 0x10100;
        words[8] = base + 12 * 8;
        words[9] = 0x90040;
        let stack = Stack::new(base, words);
        let start = Regs {
            pc: 0x20050,
            sp: stack.at(0),
            fp: stack.at(4),
        };
        let mut out = [0u64; 8];
        let w = walk(start, &map, &stack, &mut out);
        assert_eq!(w.end, End::ReachedJava);
        assert_eq!(&out[..w.frames], &[0x20050, 0x10010, 0x10100]);
        assert_eq!(
            w.at,
            Regs {
                pc: 0x90040,
                sp: stack.at(10),
                fp: stack.at(12)
            }
        );
        assert_eq!(w.guessed, 2);
        assert_eq!(stack.refused(), 0);
        // Interrupted in Java code: no native frame at all.
        let w = walk(
            Regs {
                pc: 0x90000,
                ..start
            },
            &map,
            &stack,
            &mut out,
        );
        assert_eq!((w.frames, w.end), (0, End::ReachedJava));
    }

    #[test]
    fn a_library_without_its_table_ends_the_walk_with_its_frame() {
        let map = map();
        let base = 0x7000_0000;
        let mut words = vec![0u64; 8];
        words[2] = 0x30400; // the leaf's caller is in the pending library
        let stack = Stack::new(base, words);
        let mut out = [0u64; 8];
        let start = Regs {
            pc: 0x20050,
            sp: base,
            fp: 0,
        };
        let w = walk(start, &map, &stack, &mut out);
        assert_eq!(w.end, End::TablePending);
        // The frame in that library is kept (it can be named); nothing above it is guessed.
        assert_eq!(&out[..w.frames], &[0x20050, 0x30400]);
        assert_eq!(w.guessed, 0);
        assert_eq!(End::from_u8(End::TablePending as u8), End::TablePending);
        assert_eq!(stack.refused(), 0);
    }

    #[test]
    fn a_thread_start_ends_the_walk_at_its_bottom() {
        let map = map();
        let base = 0x7000_0000;
        let mut words = vec![0u64; 8];
        words[2] = 0x21010; // returns into the outermost function
        let stack = Stack::new(base, words);
        let mut out = [0u64; 8];
        let w = walk(
            Regs {
                pc: 0x20000,
                sp: base,
                fp: 0,
            },
            &map,
            &stack,
            &mut out,
        );
        assert_eq!(w.end, End::StackBottom);
        assert_eq!(&out[..w.frames], &[0x20000, 0x21010]);
        // A zero return address ends it too.
        let stack = Stack::new(base, vec![0; 8]);
        let w = walk(
            Regs {
                pc: 0x20000,
                sp: base,
                fp: 0,
            },
            &map,
            &stack,
            &mut out,
        );
        assert_eq!((w.frames, w.end), (1, End::StackBottom));
    }

    #[test]
    fn corrupt_frame_pointers_unknown_pcs_and_smashed_stacks_end_the_walk_inside_the_stack() {
        let map = map();
        let base = 0x7000_0000u64;
        let mut out = [0u64; 16];
        // Frame pointer pointing below the stack pointer, far above the stack, unaligned,
        // at the stack's last word (the return address would be past the end), and to
        // itself (a loop).
        for fp in [
            base - 64,
            base + (1 << 40),
            base + 12,
            base + 8 * 15,
            u64::MAX - 7,
            0,
        ] {
            let stack = Stack::new(base, vec![0x10000; 16]);
            let w = walk(
                Regs {
                    pc: 0x10000,
                    sp: base,
                    fp,
                },
                &map,
                &stack,
                &mut out,
            );
            assert_eq!((w.frames, w.end), (1, End::BadFrame), "{fp:#x}");
            // Only the word past the end was asked for, and refused.
            assert!(stack.refused() <= 1, "{fp:#x}");
        }
        // A frame pointer chain that loops: each step must climb, so it ends.
        let mut words = vec![0u64; 8];
        words[0] = base; // saved rbp = itself
        words[1] = 0x10020;
        let stack = Stack::new(base, words);
        let w = walk(
            Regs {
                pc: 0x10000,
                sp: base,
                fp: base,
            },
            &map,
            &stack,
            &mut out,
        );
        assert_eq!(w.end, End::BadFrame);
        assert_eq!(w.frames, 2);
        assert_eq!(stack.refused(), 0);
        // A pc in no library: recorded, and the walk ends there.
        let stack = Stack::new(base, vec![0; 8]);
        let w = walk(
            Regs {
                pc: 0xdead_0000,
                sp: base,
                fp: base,
            },
            &map,
            &stack,
            &mut out,
        );
        assert_eq!((w.frames, w.end), (1, End::NoModule));
        assert_eq!(out[0], 0xdead_0000);
        assert!(
            stack.reads.borrow().is_empty(),
            "an unknown pc reads nothing"
        );
        // A return address into no library, from a smashed stack.
        let mut words = vec![0x4141_4141_4141_4141u64; 8];
        words[2] = 0x4141_4141_4141_4141;
        let stack = Stack::new(base, words);
        let w = walk(
            Regs {
                pc: 0x20000,
                sp: base,
                fp: 0x4141_4141_4141_4141,
            },
            &map,
            &stack,
            &mut out,
        );
        assert_eq!(w.end, End::NoModule);
        assert_eq!(&out[..w.frames], &[0x20000, 0x4141_4141_4141_4141]);
        assert_eq!(stack.refused(), 0);
    }

    #[test]
    fn random_stacks_never_read_outside_and_always_end() {
        // A small deterministic generator: thousands of random stacks and registers.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let map = map();
        let base = 0x7000_0000u64;
        let mut out = [0u64; 32];
        for _ in 0..20_000 {
            let words: Vec<u64> = (0..64)
                .map(|_| match next() % 4 {
                    // Pointers into the stack, code addresses, and noise.
                    0 => base + (next() % 70) * 8,
                    1 => 0x10000 + next() % 0x20000,
                    2 => 0x90000 + next() % 0x100,
                    _ => next(),
                })
                .collect();
            let stack = Stack::new(base, words);
            let start = Regs {
                pc: 0x10000 + next() % 0x20000,
                sp: base + (next() % 8) * 8,
                fp: if next() % 2 == 0 {
                    base + (next() % 80) * 8
                } else {
                    next()
                },
            };
            let w = walk(start, &map, &stack, &mut out);
            assert!(w.frames <= out.len());
            assert_ne!(w.end, End::NotWalked);
            // A refused read ends the walk at once: at most one per walk.
            assert!(stack.refused() <= 1, "{start:?}");
            if stack.refused() == 1 {
                assert_eq!(w.end, End::BadFrame);
            }
        }
    }

    #[test]
    fn a_full_frame_array_ends_with_depth_limit() {
        let map = map();
        let base = 0x7000_0000u64;
        // An endless, well-formed frame-pointer chain (each frame 16 bytes higher).
        let words: Vec<u64> = (0..64)
            .map(|i| {
                if i % 2 == 0 {
                    base + 8 * (i + 2)
                } else {
                    0x10040
                }
            })
            .collect();
        let stack = Stack::new(base, words);
        let mut out = [0u64; 4];
        let w = walk(
            Regs {
                pc: 0x10000,
                sp: base,
                fp: base,
            },
            &map,
            &stack,
            &mut out,
        );
        assert_eq!((w.frames, w.end), (4, End::DepthLimit));
        let mut none: [u64; 0] = [];
        let w = walk(
            Regs {
                pc: 0x10000,
                sp: base,
                fp: base,
            },
            &map,
            &stack,
            &mut none,
        );
        assert_eq!((w.frames, w.end), (0, End::DepthLimit));
    }
}
