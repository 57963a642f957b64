//! Kernel function names from `/proc/kallsyms` (proc(5)).
//!
//! Addresses read as zero when the reader may not see them (`kptr_restrict`, or an
//! unprivileged reader with `perf_event_paranoid` above 1): such a table is empty, and the
//! caller names kernel frames `[kernel]`.
#![forbid(unsafe_code)]

/// Kernel text symbols, sorted by address. Kallsyms gives no sizes: an address belongs to the
/// symbol before it, up to the next one. The names are kept in one string (a kernel has over
/// a hundred thousand functions: one allocation each would be most of the parsing time).
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    starts: Vec<u64>,
    /// Where each symbol's name is in `text`: its start and length.
    names: Vec<(u32, u32)>,
    text: String,
}

impl KernelSymbols {
    /// Parses the text of `/proc/kallsyms`: lines `address type name [module]`; text
    /// symbols (`T`, `t`, `W`, `w`) only. Of symbols at one address, the first listed names it.
    pub fn parse(text: &str) -> KernelSymbols {
        let mut names = String::new();
        let mut symbols: Vec<(u64, u32, u32)> = text
            .lines()
            .filter_map(|line| {
                let mut f = line.split_ascii_whitespace();
                let address = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                if !matches!(kind, "T" | "t" | "W" | "w") || address == 0 {
                    return None;
                }
                let at = u32::try_from(names.len()).ok()?;
                let len = u32::try_from(name.len()).ok()?;
                names.push_str(name);
                Some((address, at, len))
            })
            .collect();
        // Names are appended in the order listed: sorting by (address, name position) keeps
        // the first listed of each address first.
        symbols.sort_unstable();
        symbols.dedup_by_key(|s| s.0);
        KernelSymbols {
            starts: symbols.iter().map(|s| s.0).collect(),
            names: symbols.iter().map(|s| (s.1, s.2)).collect(),
            text: names,
        }
    }

    /// `/proc/kallsyms` of this machine (empty when unreadable or hidden).
    pub fn read() -> KernelSymbols {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|t| KernelSymbols::parse(&t))
            .unwrap_or_default()
    }

    /// Whether this process sees kernel addresses in `/proc/kallsyms` (its first line only:
    /// the kernel hides all of them or none).
    pub fn visible() -> bool {
        use std::io::BufRead;
        let Ok(file) = std::fs::File::open("/proc/kallsyms") else {
            return false;
        };
        let mut line = String::new();
        std::io::BufReader::new(file).read_line(&mut line).is_ok()
            && line
                .split_ascii_whitespace()
                .next()
                .and_then(|a| u64::from_str_radix(a, 16).ok())
                .is_some_and(|a| a != 0)
    }

    /// Whether any address was visible.
    pub fn usable(&self) -> bool {
        !self.starts.is_empty()
    }

    /// The function holding `address` and its start.
    pub fn lookup(&self, address: u64) -> Option<(&str, u64)> {
        let after = self.starts.partition_point(|&s| s <= address);
        let i = after.checked_sub(1)?;
        // Past the last symbol is not kernel text we know.
        if after == self.starts.len() {
            return None;
        }
        let &(at, len) = self.names.get(i)?;
        let name = self
            .text
            .get(at as usize..(at as usize).checked_add(len as usize)?)?;
        Some((name, *self.starts.get(i)?))
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

/// The kernel's GNU build id, from the ELF notes it exports (`/sys/kernel/notes`): a sequence
/// of `namesz, descsz, type` words, each name and descriptor padded to 4 bytes.
pub fn kernel_build_id(notes: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(
            notes.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let pad = |n: usize| n.checked_add(3).map(|n| n & !3);
    let mut at: usize = 0;
    while at.checked_add(12)? <= notes.len() {
        let (namesz, descsz, kind) = (word(at)? as usize, word(at + 4)? as usize, word(at + 8)?);
        let name_at = at + 12;
        let desc_at = name_at.checked_add(pad(namesz)?)?;
        let end = desc_at.checked_add(pad(descsz)?)?;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return notes
                .get(desc_at..desc_at.checked_add(descsz)?)
                .map(<[u8]>::to_vec);
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_symbols_name_the_addresses_up_to_the_next_one() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\n\
             ffffffff81001000 t do_one\n\
             ffffffff81002000 D some_data\n\
             ffffffff81003000 T ksys_write\n\
             ffffffff81003000 t ksys_write_alias\n\
             ffffffffc0000000 t ext4_thing\t[ext4]\n\
             ffffffffc0001000 T _etext_mod\n",
        );
        assert!(k.usable());
        assert_eq!(
            k.lookup(0xffffffff81001234),
            Some(("do_one", 0xffffffff81001000))
        );
        // Data symbols are not functions: do_one reaches up to ksys_write.
        assert_eq!(k.lookup(0xffffffff81002500).map(|x| x.0), Some("do_one"));
        assert_eq!(
            k.lookup(0xffffffff81003000).map(|x| x.0),
            Some("ksys_write")
        );
        assert_eq!(
            k.lookup(0xffffffffc0000010).map(|x| x.0),
            Some("ext4_thing")
        );
        assert_eq!(k.lookup(0xfffffffff0000000), None);
        assert_eq!(k.lookup(0x1000), None);
        let hidden = KernelSymbols::parse("0000000000000000 T _stext\n0000000000000000 t x\n");
        assert!(!hidden.usable());
        // This process's view agrees with a full read.
        assert_eq!(KernelSymbols::visible(), KernelSymbols::read().usable());
    }

    #[test]
    fn the_build_id_note_is_found_among_others() {
        let mut notes = Vec::new();
        let mut note = |name: &[u8], kind: u32, desc: &[u8]| {
            notes.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&kind.to_ne_bytes());
            notes.extend_from_slice(name);
            notes.resize(notes.len().next_multiple_of(4), 0);
            notes.extend_from_slice(desc);
            notes.resize(notes.len().next_multiple_of(4), 0);
        };
        note(b"Xen\0", 1, &[1, 2, 3]);
        note(b"GNU\0", 3, &[0xab; 20]);
        assert_eq!(kernel_build_id(&notes), Some(vec![0xab; 20]));
        assert_eq!(kernel_build_id(&notes[..20]), None);
        assert_eq!(kernel_build_id(&[]), None);
        // The running kernel's, when it exports its notes and has one.
        if let Some(id) = std::fs::read("/sys/kernel/notes")
            .ok()
            .and_then(|n| kernel_build_id(&n))
        {
            assert_eq!(id.len(), 20);
        }
    }
}
