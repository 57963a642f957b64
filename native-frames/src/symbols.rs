//! Function names of an ELF file, by address.
//!
//! From `.symtab` when the file has one, else from a separate debug file (found by build id
//! under `/usr/lib/debug/.build-id/`, or by `.gnu_debuglink`), else from `.dynsym` (the
//! exported functions only). Every entry keeps its size, and an address past the end of the
//! function before it gets no name: a stripped library's internal functions would otherwise
//! all be named after the nearest exported one (glibc's `msort_with_tmp` as `mrand48_r+0x25c`).
//! The caller names such an address `libname+0xOFFSET` instead.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol, SymbolKind};

/// One function: start (the file's own virtual address), size, name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    start: u64,
    size: u64,
    name: u32,
}

/// Where a table's names came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Symtab,
    DebugFile,
    Dynsym,
    None,
}

/// The functions of one file, sorted by address.
#[derive(Clone, Debug)]
pub struct SymbolTable {
    entries: Vec<Entry>,
    names: Names,
    pub source: Source,
}

/// Names kept in one string (a library such as libjvm has tens of thousands: one allocation
/// each was a large part of reading its table).
#[derive(Clone, Debug, Default)]
struct Names {
    text: String,
    /// Start and length of each name in `text`.
    spans: Vec<(u32, u32)>,
}

impl Names {
    /// Adds a name; `None` once the names no longer fit 32-bit offsets.
    fn push(&mut self, name: &str) -> Option<u32> {
        let index = u32::try_from(self.spans.len()).ok()?;
        let at = u32::try_from(self.text.len()).ok()?;
        let len = u32::try_from(name.len()).ok()?;
        at.checked_add(len)?;
        self.text.push_str(name);
        self.spans.push((at, len));
        Some(index)
    }

    fn get(&self, index: u32) -> Option<&str> {
        let &(at, len) = self.spans.get(index as usize)?;
        self.text
            .get(at as usize..(at as usize).checked_add(len as usize)?)
    }
}

/// A function found for an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found<'a> {
    /// The name as the file spells it (mangled).
    pub name: &'a str,
    /// The function's first address.
    pub start: u64,
}

impl SymbolTable {
    /// The functions of `data` (an ELF image). When it has no `.symtab`, `debug_dirs` are
    /// searched for a debug file (by build id, then by debug link); `None` skips that.
    pub fn from_elf<'data, R: object::ReadRef<'data>>(
        data: R,
        debug: Option<&DebugSearch>,
    ) -> SymbolTable {
        let Ok(file) = object::File::parse(data) else {
            return SymbolTable::empty();
        };
        let symtab = SymbolTable::collect(file.symbols());
        if !symtab.entries.is_empty() {
            return SymbolTable {
                source: Source::Symtab,
                ..symtab
            };
        }
        if let Some(table) = debug.and_then(|d| d.find(&file)) {
            return table;
        }
        let dynsym = SymbolTable::collect(file.dynamic_symbols());
        let source = if dynsym.entries.is_empty() {
            Source::None
        } else {
            Source::Dynsym
        };
        SymbolTable { source, ..dynsym }
    }

    pub fn empty() -> SymbolTable {
        SymbolTable {
            entries: Vec::new(),
            names: Names::default(),
            source: Source::None,
        }
    }

    fn collect<'d, S: ObjectSymbol<'d>>(symbols: impl Iterator<Item = S>) -> SymbolTable {
        let mut names = Names::default();
        // Each function with its sort key: by address; of aliases at one address the largest
        // first, then the preferred name: global before local (`write` before glibc's
        // `__GI___write`), then fewer leading underscores, then the first listed.
        let mut found: Vec<(u64, std::cmp::Reverse<u64>, u8, u32)> = Vec::new();
        for s in symbols {
            if s.kind() != SymbolKind::Text || s.is_undefined() || s.address() == 0 {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            if name.is_empty() {
                continue;
            }
            let Some(index) = names.push(name) else {
                break;
            };
            let underscores = name.bytes().take_while(|&b| b == b'_').count().min(127) as u8;
            let rank = u8::from(!s.is_global()) << 7 | underscores;
            found.push((s.address(), std::cmp::Reverse(s.size()), rank, index));
        }
        found.sort_unstable();
        found.dedup_by_key(|f| f.0);
        SymbolTable {
            entries: found
                .into_iter()
                .map(|(start, size, _, name)| Entry {
                    start,
                    size: size.0,
                    name,
                })
                .collect(),
            names,
            source: Source::Symtab,
        }
    }

    /// The function holding `address` (a virtual address of the file).
    pub fn lookup(&self, address: u64) -> Option<Found<'_>> {
        let after = self.entries.partition_point(|e| e.start <= address);
        // A small function may sit inside a large one that starts before it (a local label
        // symbol, a cold part): look back a few entries for one that holds the address.
        let candidates = self.entries.get(after.saturating_sub(4)..after)?;
        let e = candidates.iter().rev().find(|e| {
            address < e.start.saturating_add(e.size) || (e.size == 0 && address == e.start)
        })?;
        Some(Found {
            name: self.names.get(e.name)?,
            start: e.start,
        })
    }

    /// The address of the function named `name` (for tests and diagnostics).
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.entries
            .iter()
            .find(|e| self.names.get(e.name) == Some(name))
            .map(|e| e.start)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Where separate debug files are looked for (`/usr/lib/debug` by default, as gdb does).
#[derive(Clone, Debug)]
pub struct DebugSearch {
    pub root: PathBuf,
    /// The directory of the file itself, for a debug link next to it.
    pub file_dir: Option<PathBuf>,
}

impl DebugSearch {
    pub fn new(file: &Path) -> DebugSearch {
        DebugSearch {
            root: PathBuf::from("/usr/lib/debug"),
            file_dir: file.parent().map(Path::to_path_buf),
        }
    }

    /// The symbols of the debug file of `file`, if one is found and has a `.symtab`.
    fn find<'data, R: object::ReadRef<'data>>(
        &self,
        file: &object::File<'data, R>,
    ) -> Option<SymbolTable> {
        let mut candidates = Vec::new();
        if let Some(id) = file.build_id().ok().flatten().filter(|id| id.len() >= 2) {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let (dir, rest) = hex.split_at(2);
            candidates.push(
                self.root
                    .join(".build-id")
                    .join(dir)
                    .join(format!("{rest}.debug")),
            );
        }
        if let Some((name, _crc)) = file.gnu_debuglink().ok().flatten() {
            let name = String::from_utf8_lossy(name).into_owned();
            if let Some(dir) = &self.file_dir {
                candidates.push(dir.join(&name));
                candidates.push(dir.join(".debug").join(&name));
                let relative = dir.strip_prefix("/").unwrap_or(dir);
                candidates.push(self.root.join(relative).join(&name));
            }
        }
        candidates.into_iter().find_map(|path| {
            // Only its symbol tables: a debug file is mostly DWARF this does not need.
            let data = crate::elf::read_sections(&path, crate::elf::SYMBOL_SECTIONS).ok()?;
            let debug = object::File::parse(&data).ok()?;
            let table = SymbolTable::collect(debug.symbols());
            (!table.entries.is_empty()).then_some(SymbolTable {
                source: Source::DebugFile,
                ..table
            })
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn table(entries: &[(u64, u64, &str)]) -> SymbolTable {
        let mut t = SymbolTable::empty();
        for (start, size, name) in entries {
            let name = t.names.push(name).unwrap();
            t.entries.push(Entry {
                start: *start,
                size: *size,
                name,
            });
        }
        t
    }

    #[test]
    fn addresses_past_a_function_have_no_name() {
        let t = table(&[
            (0x1000, 0x100, "big"),
            (0x1040, 0x10, "inner"),
            (0x2000, 0, "label"),
            (0x3000, 0x20, "last"),
        ]);
        assert_eq!(t.lookup(0x0fff), None);
        assert_eq!(t.lookup(0x1000).map(|f| f.name), Some("big"));
        assert_eq!(
            t.lookup(0x1045).map(|f| (f.name, f.start)),
            Some(("inner", 0x1040))
        );
        // Inside `big` after `inner` ended.
        assert_eq!(t.lookup(0x1080).map(|f| f.name), Some("big"));
        assert_eq!(t.lookup(0x1100), None);
        assert_eq!(t.lookup(0x2000).map(|f| f.name), Some("label"));
        assert_eq!(t.lookup(0x2001), None);
        assert_eq!(t.lookup(0x301f).map(|f| f.name), Some("last"));
        assert_eq!(t.lookup(0x3020), None);
    }

    #[test]
    fn libc_is_named_from_its_debug_file_or_dynsym_never_wrongly() {
        let maps = crate::maps::read_self().unwrap();
        let path = maps
            .iter()
            .find(|m| m.executable() && m.file_name() == "libc.so.6")
            .map(|m| PathBuf::from(&m.path))
            .unwrap();
        let data = std::fs::read(&path).unwrap();
        let t = SymbolTable::from_elf(&data[..], Some(&DebugSearch::new(&path)));
        assert_ne!(t.source, Source::None);
        let (_, bias) = crate::elf::tests::mapped_libc();
        // write(2)'s wrapper and qsort, where this process has them: named (by one of their
        // aliases), and the first address found is the function's start.
        for (f, names) in [
            (libc::write as *const () as usize, &["write"][..]),
            (libc::qsort as *const () as usize, &["qsort"][..]),
        ] {
            let vaddr = f as u64 - bias;
            let found = t.lookup(vaddr).expect("named");
            assert!(names.contains(&found.name), "{}", found.name);
            assert_eq!(found.start, vaddr);
        }
        let dynsym = SymbolTable::from_elf(&data[..], None);
        assert!(dynsym.len() > 1000, "{}", dynsym.len());
    }
}
