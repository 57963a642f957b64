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
        let mut parser = Parser::with_capacity(text.len() / 45);
        parser.lines(text.as_bytes());
        parser.finish()
    }

    /// `/proc/kallsyms` of this machine (empty when unreadable or hidden). Read and parsed a
    /// piece at a time: the whole text is over 5 MB on a common kernel, and a buffer that
    /// size, grown as the read goes, costs more page faults and copies than the parsing.
    pub fn read() -> KernelSymbols {
        std::fs::File::open("/proc/kallsyms")
            .map(KernelSymbols::read_from)
            .unwrap_or_default()
    }

    /// Kallsyms text from `source`, parsed a buffer at a time.
    fn read_from(mut source: impl std::io::Read) -> KernelSymbols {
        // A common kernel lists about 120,000 symbols; reserving room for more than that
        // costs nothing until the room is used.
        let mut parser = Parser::with_capacity(160_000);
        let mut buf = vec![0u8; 64 * 1024];
        // Bytes at the start of `buf` that begin a line not yet complete.
        let mut kept = 0;
        loop {
            let n = match source.read(buf.get_mut(kept..).unwrap_or_default()) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return KernelSymbols::default(),
            };
            let filled = kept.saturating_add(n);
            let Some(data) = buf.get(..filled) else {
                return KernelSymbols::default();
            };
            if n == 0 {
                // The last line, when the text does not end with a newline.
                parser.lines(data);
                return parser.finish();
            }
            let complete = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            if complete == 0 && filled == buf.len() {
                // A line longer than the buffer: this is not kallsyms.
                return KernelSymbols::default();
            }
            parser.lines(data.get(..complete).unwrap_or_default());
            buf.copy_within(complete..filled, 0);
            kept = filled - complete;
        }
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

/// Symbols gathered from lines of kallsyms, in the order listed.
struct Parser {
    /// Address, and where the name is in `names`: its start and length.
    symbols: Vec<(u64, u32, u32)>,
    names: String,
}

impl Parser {
    fn with_capacity(lines: usize) -> Parser {
        // A name takes about 22 bytes.
        Parser {
            symbols: Vec::with_capacity(lines),
            names: String::with_capacity(lines.saturating_mul(22)),
        }
    }

    /// Adds the text symbols of `bytes`, whole lines only (the last may lack its newline).
    fn lines(&mut self, bytes: &[u8]) {
        let mut at = 0;
        // One pass over the text: each line is `address type name`, then a tab and
        // `[module]` for a module's symbols. Each byte is looked at once (splitting into lines
        // first and then into fields was most of the parsing time).
        while at < bytes.len() {
            let line = bytes.get(at..).unwrap_or_default();
            let field_end = |from: usize| {
                line.get(from..)
                    .unwrap_or_default()
                    .iter()
                    .position(|&b| matches!(b, b' ' | b'\t' | b'\n'))
                    .map_or(line.len(), |n| from.saturating_add(n))
            };
            let line_end = |from: usize| {
                line.get(from..)
                    .unwrap_or_default()
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(line.len(), |n| from.saturating_add(n))
            };
            let hex_end = field_end(0);
            let kind = line.get(hex_end.saturating_add(1)).copied();
            let name_at = hex_end.saturating_add(3);
            let well_formed = line.get(hex_end) == Some(&b' ')
                && line.get(hex_end.saturating_add(2)) == Some(&b' ');
            let wanted = well_formed && matches!(kind, Some(b'T' | b't' | b'W' | b'w'));
            let (name_end, next) = if wanted {
                let end = field_end(name_at);
                (end, line_end(end))
            } else {
                (name_at, line_end(0))
            };
            at = at.saturating_add(next).saturating_add(1);
            if !wanted {
                continue;
            }
            let Some(address) = line.get(..hex_end).and_then(parse_hex).filter(|&a| a != 0) else {
                continue;
            };
            let Some(name) = line
                .get(name_at..name_end)
                .and_then(|n| std::str::from_utf8(n).ok())
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            let (Ok(start), Ok(len)) = (u32::try_from(self.names.len()), u32::try_from(name.len()))
            else {
                return;
            };
            self.names.push_str(name);
            self.symbols.push((address, start, len));
        }
    }

    fn finish(mut self) -> KernelSymbols {
        // Names are appended in the order listed: sorting by (address, name position) keeps
        // the first listed of each address first.
        self.symbols.sort_unstable();
        self.symbols.dedup_by_key(|s| s.0);
        self.names.shrink_to_fit();
        KernelSymbols {
            starts: self.symbols.iter().map(|s| s.0).collect(),
            names: self.symbols.iter().map(|s| (s.1, s.2)).collect(),
            text: self.names,
        }
    }
}

/// A hexadecimal number of at most 16 digits.
fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        n = n << 4 | u64::from(v);
    }
    Some(n)
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

    /// A reader that returns at most `step` bytes a call.
    struct Trickle<'a> {
        text: &'a [u8],
        step: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.text.len());
            buf[..n].copy_from_slice(&self.text[..n]);
            self.text = &self.text[n..];
            Ok(n)
        }
    }

    #[test]
    fn reading_in_pieces_gives_what_parsing_the_whole_text_gives() {
        let mut text = String::new();
        for i in 0..5000u64 {
            let kind = ["T", "t", "D", "W"][(i % 4) as usize];
            text.push_str(&format!(
                "{:016x} {kind} fn_{i}\n",
                0xffff_ffff_8100_0000 + i * 64
            ));
        }
        text.push_str("ffffffffc0000000 t last_without_newline\t[m]");
        let whole = KernelSymbols::parse(&text);
        assert_eq!(whole.len(), 3751);
        for step in [1, 7, 45, 4096, 70_000] {
            let pieces = KernelSymbols::read_from(Trickle {
                text: text.as_bytes(),
                step,
            });
            assert_eq!(pieces.starts, whole.starts, "step {step}");
            assert_eq!(pieces.text, whole.text, "step {step}");
            assert_eq!(pieces.names, whole.names, "step {step}");
        }
        assert_eq!(
            whole.lookup(0xffff_ffff_c000_0001),
            None,
            "past the last symbol"
        );
        assert_eq!(
            whole.lookup(0xffff_ffff_8100_0000 + 4999 * 64 + 1),
            Some(("fn_4999", 0xffff_ffff_8100_0000 + 4999 * 64))
        );
        // A line longer than the read buffer is not kallsyms.
        let long = format!("ffffffff81000000 T {}\n", "x".repeat(70_000));
        let odd = KernelSymbols::read_from(Trickle {
            text: long.as_bytes(),
            step: 4096,
        });
        assert!(odd.is_empty());
    }

    #[test]
    fn the_machines_kallsyms_reads_as_when_read_whole() {
        let text = std::fs::read_to_string("/proc/kallsyms").expect("/proc/kallsyms");
        let whole = KernelSymbols::parse(&text);
        let read = KernelSymbols::read();
        // Symbols come and go between two reads (BPF programs, modules): nearly all agree.
        let diff = whole.len().abs_diff(read.len());
        assert!(
            diff * 100 <= whole.len().max(1),
            "{} vs {}",
            whole.len(),
            read.len()
        );
    }

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
