//! How to find the caller of any instruction of a library: its `.eh_frame` call frame
//! information, evaluated once into a compact table that a signal handler can search.
//!
//! `.eh_frame` describes, for each function (an FDE), a program of rules that changes along
//! the function's instructions. Evaluating that program is what a stack walk needs, but it
//! is too much work (and too much third-party parsing) to do in a signal handler, on every
//! sample. So the table is built off the handler, with `gimli`, for the three registers an
//! x86_64 walk follows: the canonical frame address (CFA: the caller's stack pointer, found
//! from `rsp` or `rbp` plus an offset), where the caller's `rbp` was saved, and where the
//! return address is. A library's functions use few distinct rules (7 in JDK 17's libjvm, 59 in
//! JDK 25's, 301 in glibc), so a row is a 32-bit address and a 32-bit index into the
//! library's rule dictionary: one 8-byte row per change of rule, 1.2 MiB for libjvm.
//!
//! What the table cannot express (a CFA computed by a DWARF expression other than the PLT's,
//! or a saved register found by an expression: signal trampolines, a few hand-written
//! functions) becomes [`Rule::Unsupported`], and a walk that meets it ends there rather than
//! guess. Addresses no FDE covers get no rule ([`UnwindTable::lookup`] returns `None`); the
//! walk then assumes a frame-pointer frame, as most code without unwind information that
//! calls anything is (the result is checked like any other step).
#![forbid(unsafe_code)]

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, EhFrame, LittleEndian, RegisterRule, UnwindContext,
    UnwindSection, X86_64,
};
use object::{Object, ObjectSection};

/// Where the canonical frame address (the caller's stack pointer after the return) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cfa {
    /// `rsp` plus this offset.
    Sp(i32),
    /// `rbp` plus this offset.
    Fp(i32),
    /// A PLT entry: `rsp + 8`, and 8 more once the entry has pushed its relocation index
    /// (from byte 11 of each 16-byte entry on). Every x86_64 linker describes `.plt` with this
    /// one DWARF expression.
    Plt,
}

/// How to step from a frame to its caller at one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The caller's stack pointer is the CFA; its `rbp` was saved at `CFA + rbp` (or is
    /// unchanged when `None`); the return address is at `CFA + ra`.
    Frame { cfa: Cfa, rbp: Option<i32>, ra: i32 },
    /// The outermost frame of a thread (`_start`, `clone3`): its return address is
    /// undefined, there is no caller.
    Outermost,
    /// Described in a way this table does not express: a walk ends here.
    Unsupported,
}

impl Rule {
    /// The frame of a function that keeps a frame pointer (`push rbp; mov rbp, rsp`): what a
    /// walk assumes where no unwind information says otherwise.
    pub const FRAME_POINTER: Rule = Rule::Frame {
        cfa: Cfa::Fp(16),
        rbp: Some(-16),
        ra: -8,
    };
}

/// Row index value meaning "no FDE covers this address".
const NO_RULE: u32 = u32::MAX;

/// The rules of one library, by address (the library's own virtual addresses, before
/// relocation: what a pc minus the load bias gives).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindTable {
    /// Rows sorted by address: `(address - base) << 32 | rule index` ([`NO_RULE`] for a gap).
    rows: Box<[u64]>,
    rules: Box<[Rule]>,
    base: u64,
}

/// Why no table was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    /// Not an ELF file this crate reads.
    NotElf(String),
    /// The file has no `.eh_frame`.
    NoEhFrame,
    /// The code spans more than 4 GiB, beyond 32-bit row addresses.
    TooLarge,
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::NotElf(e) => write!(f, "not a readable ELF file: {e}"),
            TableError::NoEhFrame => f.write_str("no .eh_frame section"),
            TableError::TooLarge => f.write_str("code spans more than 4 GiB"),
        }
    }
}

impl std::error::Error for TableError {}

/// One rule change, before the table is packed: its address, whether it starts a rule (an
/// FDE's end marker sorts before a rule starting at the same address), its position among
/// the changes (so that changes at one address keep the order they were found in) and the
/// index of its rule in a [`Rules`] dictionary ([`NO_RULE`] for the end of an FDE), in one
/// integer whose order is the table's: sorting plain integers is several times faster than
/// sorting structs, and libjvm has about half a million changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Change(u128);

impl Change {
    fn new(address: u64, starts: bool, seq: usize, rule: u32) -> Change {
        // Positions beyond 31 bits would need a library with billions of rows; they share the
        // top position rather than wrap.
        let seq = u32::try_from(seq).unwrap_or(u32::MAX).min(0x7fff_ffff);
        Change(
            u128::from(address) << 64
                | u128::from(starts) << 63
                | u128::from(seq) << 32
                | u128::from(rule),
        )
    }

    fn address(self) -> u64 {
        (self.0 >> 64) as u64
    }

    fn rule(self) -> u32 {
        (self.0 & 0xffff_ffff) as u32
    }
}

/// The distinct rules met so far, each with its index: a library has a few hundred at most,
/// met hundreds of thousands of times, so the map hashes a rule with a multiply, not SipHash.
#[derive(Default)]
struct Rules {
    list: Vec<Rule>,
    index: std::collections::HashMap<Rule, u32, std::hash::BuildHasherDefault<RuleHasher>>,
}

impl Rules {
    fn intern(&mut self, rule: Rule) -> u32 {
        let next = u32::try_from(self.list.len()).unwrap_or(NO_RULE);
        let list = &mut self.list;
        *self.index.entry(rule).or_insert_with(|| {
            list.push(rule);
            next
        })
    }
}

/// A hasher for small keys of plain integers (FxHash's multiply-and-rotate).
#[derive(Default)]
struct RuleHasher(u64);

impl std::hash::Hasher for RuleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_i32(&mut self, n: i32) {
        self.write_u64(u64::from(n as u32));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
}

impl UnwindTable {
    /// The table of an ELF image: a file's bytes, a vDSO copied from memory, or a file read
    /// on demand (`object::ReadCache`: only the headers and `.eh_frame` are read).
    pub fn from_elf<'data, R: object::ReadRef<'data>>(data: R) -> Result<UnwindTable, TableError> {
        let file = object::File::parse(data).map_err(|e| TableError::NotElf(e.to_string()))?;
        let eh = file
            .section_by_name(".eh_frame")
            .ok_or(TableError::NoEhFrame)?;
        let eh_data = eh.data().map_err(|e| TableError::NotElf(e.to_string()))?;
        let addr_of = |name: &str| file.section_by_name(name).map_or(0, |s| s.address());
        let bases = BaseAddresses::default()
            .set_eh_frame(eh.address())
            .set_eh_frame_hdr(addr_of(".eh_frame_hdr"))
            .set_text(addr_of(".text"))
            .set_got(addr_of(".got"));
        let plt: Vec<(u64, u64)> = file
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".plt")))
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        let (changes, rules) = changes_of(eh_data, &bases, &plt);
        UnwindTable::pack(changes, &rules.list)
    }

    /// A table from `(address, rule from there on)` pairs, `None` starting a gap: for
    /// synthetic code in tests.
    pub fn from_ranges(ranges: &[(u64, Option<Rule>)]) -> Result<UnwindTable, TableError> {
        let mut rules = Rules::default();
        let changes = ranges
            .iter()
            .enumerate()
            .map(|(seq, &(address, rule))| {
                let index = rule.map_or(NO_RULE, |r| rules.intern(r));
                Change::new(address, rule.is_some(), seq, index)
            })
            .collect();
        UnwindTable::pack(changes, &rules.list)
    }

    /// Packs rule changes into rows: sorted, one row per address, consecutive equal rules
    /// merged. The table's dictionary holds the rules in the order of the addresses they
    /// first hold at.
    fn pack(mut changes: Vec<Change>, found: &[Rule]) -> Result<UnwindTable, TableError> {
        changes.sort_unstable();
        let base = changes.first().map_or(0, |c| c.address());
        let mut rules: Vec<Rule> = Vec::new();
        // The table's index of each found rule, once it has one.
        let mut renumbered = vec![NO_RULE; found.len()];
        let mut rows: Vec<u64> = Vec::with_capacity(changes.len());
        let mut last_rule = NO_RULE;
        let mut i = 0;
        while let Some(c) = changes.get(i) {
            // Of the changes at one address, the last one sorted (a start after an end)
            // holds from there on.
            let mut at = *c;
            while let Some(next) = changes.get(i + 1).filter(|n| n.address() == c.address()) {
                at = *next;
                i += 1;
            }
            i += 1;
            let rule_index = match (
                found.get(at.rule() as usize),
                renumbered.get_mut(at.rule() as usize),
            ) {
                (Some(rule), Some(slot)) => {
                    if *slot == NO_RULE {
                        rules.push(*rule);
                        *slot = u32::try_from(rules.len() - 1).unwrap_or(NO_RULE);
                    }
                    *slot
                }
                _ => NO_RULE,
            };
            if rule_index == last_rule {
                continue;
            }
            let offset = u32::try_from(at.address() - base).map_err(|_| TableError::TooLarge)?;
            rows.push(u64::from(offset) << 32 | u64::from(rule_index));
            last_rule = rule_index;
        }
        Ok(UnwindTable {
            rows: rows.into_boxed_slice(),
            rules: rules.into_boxed_slice(),
            base,
        })
    }

    /// The rule at `address` (a virtual address of the library), or `None` where no FDE
    /// covers it.
    ///
    /// # Signal safety
    /// A binary search over the rows and one slice lookup: no allocation, no panic.
    #[inline]
    pub fn lookup(&self, address: u64) -> Option<Rule> {
        let offset = u32::try_from(address.checked_sub(self.base)?).ok()?;
        let key = u64::from(offset) << 32 | 0xffff_ffff;
        let after = self.rows.partition_point(|&row| row <= key);
        let row = *self.rows.get(after.checked_sub(1)?)?;
        let rule = (row & 0xffff_ffff) as u32;
        if rule == NO_RULE {
            return None;
        }
        self.rules.get(rule as usize).copied()
    }

    /// Rows in the table.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Distinct rules.
    pub fn distinct_rules(&self) -> usize {
        self.rules.len()
    }

    /// Heap bytes the table holds.
    pub fn memory_bytes(&self) -> usize {
        self.rows.len() * std::mem::size_of::<u64>()
            + self.rules.len() * std::mem::size_of::<Rule>()
    }
}

/// gimli's evaluation storage with room for 32 register rules at once rather than its default
/// 192: a row is copied for every FDE, and at 192 rules those copies were a tenth of the
/// time to build libjvm's table. x86-64 code saves at most the 16 general registers and the
/// return address; an FDE with more rules than this ends its rows there (as any bad
/// instruction does).
struct FewRules;

impl<T: gimli::ReaderOffset> gimli::UnwindContextStorage<T> for FewRules {
    type Rules = [(gimli::Register, RegisterRule<T>); 32];
    type Stack = Box<[gimli::UnwindTableRow<T, Self>; 4]>;
}

/// The rule changes of every FDE in `.eh_frame`; an FDE that cannot be read is skipped.
fn changes_of(eh_data: &[u8], bases: &BaseAddresses, plt: &[(u64, u64)]) -> (Vec<Change>, Rules) {
    let mut eh = EhFrame::new(eh_data, LittleEndian);
    eh.set_address_size(8);
    let mut ctx = Box::new(UnwindContext::<_, FewRules>::new_in());
    let mut changes = Vec::new();
    let mut rules = Rules::default();
    let mut entries = eh.entries(bases);
    // An entry that cannot be parsed ends the section: its length is what finds the next one.
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) =
            partial.parse(|section, bases, offset| section.cie_from_offset(bases, offset))
        else {
            continue;
        };
        let (start, end) = (fde.initial_address(), fde.end_address());
        if end <= start {
            continue;
        }
        let in_plt = plt.iter().any(|&(lo, hi)| start >= lo && end <= hi);
        let Ok(mut rows) = fde.rows(&eh, bases, &mut ctx) else {
            continue;
        };
        let mut last = None;
        // A bad instruction mid-FDE ends its rows: those so far stand, the rest has no rule.
        while let Ok(Some(row)) = rows.next_row() {
            let rule = rule_of(
                row.cfa(),
                row.register(X86_64::RBP),
                row.register(X86_64::RA),
                in_plt,
            );
            if last != Some(rule) {
                let index = rules.intern(rule);
                changes.push(Change::new(row.start_address(), true, changes.len(), index));
                last = Some(rule);
            }
        }
        changes.push(Change::new(end, false, changes.len(), NO_RULE));
    }
    (changes, rules)
}

/// One row of gimli's evaluation as a [`Rule`].
fn rule_of<T: gimli::ReaderOffset>(
    cfa: &CfaRule<T>,
    rbp: Option<RegisterRule<T>>,
    ra: Option<RegisterRule<T>>,
    in_plt: bool,
) -> Rule {
    let offset = |o: i64| i32::try_from(o).ok();
    let cfa = match cfa {
        CfaRule::RegisterAndOffset {
            register,
            offset: o,
        } => {
            let Some(o) = offset(*o) else {
                return Rule::Unsupported;
            };
            if *register == X86_64::RSP {
                Cfa::Sp(o)
            } else if *register == X86_64::RBP {
                Cfa::Fp(o)
            } else {
                return Rule::Unsupported;
            }
        }
        CfaRule::Expression(_) if in_plt => Cfa::Plt,
        CfaRule::Expression(_) => return Rule::Unsupported,
    };
    let rbp = match rbp {
        None | Some(RegisterRule::SameValue) | Some(RegisterRule::Undefined) => None,
        Some(RegisterRule::Offset(o)) => match offset(o) {
            Some(o) => Some(o),
            None => return Rule::Unsupported,
        },
        Some(_) => return Rule::Unsupported,
    };
    let ra = match ra {
        Some(RegisterRule::Offset(o)) => match offset(o) {
            Some(o) => o,
            None => return Rule::Unsupported,
        },
        Some(RegisterRule::Undefined) => return Rule::Outermost,
        _ => return Rule::Unsupported,
    };
    Rule::Frame { cfa, rbp, ra }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(cfa: Cfa, rbp: Option<i32>) -> Rule {
        Rule::Frame { cfa, rbp, ra: -8 }
    }

    #[test]
    fn rows_cover_functions_and_leave_gaps_between_them() {
        let entry = frame(Cfa::Sp(8), None);
        let pushed = frame(Cfa::Sp(16), Some(-16));
        let framed = frame(Cfa::Fp(16), Some(-16));
        // Given out of order: the table sorts them (an end before a start at one address).
        let table = UnwindTable::from_ranges(&[
            // f: 0x1000..0x1040, g: 0x1040..0x1050 (adjacent), h: 0x2000..0x2010.
            (0x2000, Some(Rule::Outermost)),
            (0x2010, None),
            (0x1040, Some(entry)),
            (0x1000, Some(entry)),
            (0x1001, Some(pushed)),
            (0x1004, Some(framed)),
            (0x103f, Some(entry)),
            (0x1040, None),
            (0x1050, None),
        ])
        .unwrap();
        assert_eq!(table.lookup(0xfff), None);
        assert_eq!(table.lookup(0x1000), Some(entry));
        assert_eq!(table.lookup(0x1003), Some(pushed));
        assert_eq!(table.lookup(0x1020), Some(framed));
        // g starts where f ends: its rule, not a gap (and the equal rule is one row).
        assert_eq!(table.lookup(0x1040), Some(entry));
        assert_eq!(table.lookup(0x104f), Some(entry));
        assert_eq!(table.lookup(0x1050), None);
        assert_eq!(table.lookup(0x1fff), None);
        assert_eq!(table.lookup(0x2005), Some(Rule::Outermost));
        assert_eq!(table.lookup(0x2010), None);
        assert_eq!(table.lookup(u64::MAX), None);
        assert_eq!(table.distinct_rules(), 4);
        // 0x103f..0x1050 is one row of `entry`.
        assert_eq!(table.rows(), 7);
    }

    #[test]
    fn too_large_spans_are_refused() {
        assert_eq!(
            UnwindTable::from_ranges(&[
                (0, Some(Rule::Outermost)),
                (1 << 33, Some(Rule::Unsupported))
            ]),
            Err(TableError::TooLarge)
        );
        assert_eq!(UnwindTable::from_ranges(&[]).unwrap().lookup(0), None);
    }

    /// The C library this test runs on: every function that calls another has a rule, and
    /// the table is about as compact as measured (glibc 2.41: 25,000 CFI rows, 3,700 FDEs).
    #[test]
    fn glibc_table_is_compact_and_describes_its_functions() {
        let (data, bias) = crate::elf::tests::mapped_libc();
        let table = UnwindTable::from_elf(&data[..]).unwrap();
        assert!(table.rows() > 5_000, "{} rows", table.rows());
        assert!(table.distinct_rules() < 2_000, "{}", table.distinct_rules());
        // write(2)'s wrapper, where this process has it.
        let write = libc::write as *const () as usize as u64 - bias;
        match table.lookup(write) {
            Some(Rule::Frame { .. }) => {}
            other => panic!("write has rule {other:?}"),
        }
        assert!(UnwindTable::from_elf(&b"not an elf"[..]).is_err());
        // Read on demand from the file, the same table.
        let path = crate::maps::read_self()
            .unwrap()
            .into_iter()
            .find(|m| m.executable() && m.file_name() == "libc.so.6")
            .unwrap()
            .path;
        let cache = object::ReadCache::new(std::fs::File::open(path).unwrap());
        assert_eq!(UnwindTable::from_elf(&cache).unwrap(), table);
    }
}
