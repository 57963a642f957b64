//! What a loaded ELF image says about itself: its GNU build id (so that a backend can find
//! the same file's symbols again), its debug link, and where its code was loaded relative to
//! its own addresses.
#![forbid(unsafe_code)]

use std::path::Path;

use object::{Object, ObjectSection, ObjectSegment};

/// The facts of one ELF image that symbolisation and unwinding need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfInfo {
    /// The GNU build id note (`NT_GNU_BUILD_ID`), if any.
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: the name of a separate debug file.
    pub debuglink: Option<String>,
    /// Loadable segments: file offset, file size, virtual address.
    pub segments: Vec<Segment>,
    /// The size of `.eh_frame`: how much work its unwind table is.
    pub unwind_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub vaddr: u64,
}

impl ElfInfo {
    pub fn parse<'data, R: object::ReadRef<'data>>(data: R) -> Result<ElfInfo, String> {
        let file = object::File::parse(data).map_err(|e| e.to_string())?;
        let segments = file
            .segments()
            .map(|s| {
                let (file_offset, file_size) = s.file_range();
                Segment {
                    file_offset,
                    file_size,
                    vaddr: s.address(),
                }
            })
            .collect();
        Ok(ElfInfo {
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, _)| String::from_utf8_lossy(name).into_owned()),
            segments,
            unwind_bytes: file.section_by_name(".eh_frame").map_or(0, |s| s.size()),
        })
    }

    /// The load bias of a mapping of this file at `start` from file offset `offset`: what
    /// is added to the file's virtual addresses to get run-time ones. `None` when no loadable
    /// segment holds that offset.
    pub fn load_bias(&self, start: u64, offset: u64) -> Option<u64> {
        // Mappings start on a page boundary, segments need not: a page can hold the end of
        // one segment and the start of the next (the next is mapped on its own from that
        // page), so of the segments whose pages hold `offset`, the last one is the mapping's.
        let seg = self
            .segments
            .iter()
            .filter(|s| {
                let first_page = s.file_offset & !0xfff;
                offset >= first_page && offset < s.file_offset.saturating_add(s.file_size.max(1))
            })
            .max_by_key(|s| s.file_offset)?;
        // `offset` in the file is `seg.vaddr + (offset - seg.file_offset)` in the image.
        let vaddr = seg.vaddr.wrapping_add(offset).wrapping_sub(seg.file_offset);
        Some(start.wrapping_sub(vaddr))
    }

    /// The build id in lowercase hex (empty when there is none).
    pub fn build_id_hex(&self) -> String {
        self.build_id
            .as_deref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect())
            .unwrap_or_default()
    }
}

/// The sections whose bytes the unwind table needs. It also needs where `.text`, `.got` and
/// the PLT sections are, which the section headers (always copied) say: their bytes, most of
/// a library (libjvm's code is 13 MiB), are never read.
pub const UNWIND_SECTIONS: &[&str] = &[".eh_frame", ".eh_frame_hdr"];
/// The sections a symbol table needs.
pub const SYMBOL_SECTIONS: &[&str] = &[".symtab", ".strtab", ".dynsym", ".dynstr"];

/// Parts of an ELF file, at their offsets: what [`read_sections`] read. Reading anything
/// else fails, except the symbol and string tables, which read as zeros (an ELF parser looks
/// at them even when only the unwind information is wanted). A copy as long as the file with the
/// rest zeroed would do the same, but zeroing it costs more than reading the parts (libjvm's
/// file is 24 MB, its unwind information 1.8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseImage {
    len: u64,
    /// Sorted by offset, not overlapping.
    parts: Vec<(u64, Vec<u8>)>,
    zeros: Vec<u8>,
}

impl SparseImage {
    /// All of a file's bytes.
    pub fn whole(bytes: Vec<u8>) -> SparseImage {
        SparseImage {
            len: bytes.len() as u64,
            parts: vec![(0, bytes)],
            zeros: Vec::new(),
        }
    }

    /// The length of the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes read from the file.
    pub fn bytes_held(&self) -> usize {
        self.parts.iter().map(|(_, p)| p.len()).sum()
    }

    /// The part holding `offset`, and where `offset` is in it.
    fn part_at(&self, offset: u64) -> Option<(&[u8], usize)> {
        let after = self.parts.partition_point(|(start, _)| *start <= offset);
        let (start, bytes) = self.parts.get(after.checked_sub(1)?)?;
        let at = usize::try_from(offset.checked_sub(*start)?).ok()?;
        (at < bytes.len()).then_some((bytes.as_slice(), at))
    }
}

impl<'a> object::ReadRef<'a> for &'a SparseImage {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        let size = usize::try_from(size).map_err(|_| ())?;
        if let Some(held) = self
            .part_at(offset)
            .and_then(|(bytes, at)| bytes.get(at..at.checked_add(size)?))
        {
            return Ok(held);
        }
        // Not read (a symbol table, or a string table only partly in a part that was).
        let in_file = offset
            .checked_add(size as u64)
            .is_some_and(|end| end <= self.len);
        if in_file {
            return self.zeros.get(..size).ok_or(());
        }
        Err(())
    }

    fn read_bytes_at_until(
        self,
        range: std::ops::Range<u64>,
        delimiter: u8,
    ) -> Result<&'a [u8], ()> {
        let (bytes, at) = self.part_at(range.start).ok_or(())?;
        let len = usize::try_from(range.end.saturating_sub(range.start)).map_err(|_| ())?;
        let end = at.saturating_add(len).min(bytes.len());
        let within = bytes.get(at..end).ok_or(())?;
        let found = within.iter().position(|&b| b == delimiter).ok_or(())?;
        within.get(..found).ok_or(())
    }
}

/// The parts of the ELF file at `path` that hold its headers, its notes (the build id), its
/// debug link and the sections named in `wanted`; only those are read: a library's debug
/// information or code can be most of its file (the agent's own is 60 MB, of which its unwind
/// table needs 3).
pub fn read_sections(path: &Path, wanted: &[&str]) -> std::io::Result<SparseImage> {
    use object::elf::{SHT_DYNSYM, SHT_STRTAB, SHT_SYMTAB, SHT_SYMTAB_SHNDX};
    use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut ranges = vec![(0u64, len.min(4096))];
    let mut zeros = 0u64;
    {
        let cache = object::ReadCache::new(&file);
        let Ok(elf) = ElfFile64::<object::Endianness, _>::parse(&cache) else {
            // Not a 64-bit ELF file: all of it, for the caller's parser to judge.
            return std::fs::read(path).map(SparseImage::whole);
        };
        let (header, endian) = (elf.elf_header(), elf.endian());
        let table = |at: u64, n: u64, size: u16| (at, n.saturating_mul(u64::from(size)));
        ranges.push(table(
            header.e_phoff(endian),
            u64::from(header.e_phnum(endian)),
            header.e_phentsize(endian),
        ));
        ranges.push(table(
            header.e_shoff(endian),
            elf.elf_section_table().len() as u64,
            header.e_shentsize(endian),
        ));
        for section in elf.sections() {
            let Ok(name) = section.name() else { continue };
            let always =
                name.starts_with(".note") || name == ".shstrtab" || name == ".gnu_debuglink";
            let Some(range) = section.file_range() else {
                continue;
            };
            if wanted.contains(&name) || always {
                ranges.push(range);
            } else if matches!(
                section.elf_section_header().sh_type(endian),
                SHT_SYMTAB | SHT_DYNSYM | SHT_SYMTAB_SHNDX | SHT_STRTAB
            ) {
                zeros = zeros.max(range.1);
            }
        }
    }
    // Each part starts on an 8-byte boundary, so that what is aligned in the file is aligned
    // in memory; parts that touch or overlap are read as one.
    let mut spans: Vec<(u64, u64)> = ranges
        .into_iter()
        .filter(|&(_, size)| size > 0)
        .map(|(offset, size)| {
            let start = (offset & !7).min(len);
            (start, offset.saturating_add(size).min(len))
        })
        .filter(|(start, end)| start < end)
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut parts = Vec::with_capacity(merged.len());
    for (start, end) in merged {
        let size =
            usize::try_from(end - start).map_err(|_| std::io::Error::other("file too large"))?;
        let mut bytes = vec![0u8; size];
        file.read_exact_at(&mut bytes, start)?;
        parts.push((start, bytes));
    }
    let zeros = usize::try_from(zeros).map_err(|_| std::io::Error::other("file too large"))?;
    Ok(SparseImage {
        len,
        parts,
        zeros: vec![0u8; zeros],
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The C library this test process runs on: its file's bytes and its load bias.
    pub(crate) fn mapped_libc() -> (Vec<u8>, u64) {
        let maps = crate::maps::read_self().unwrap();
        let text = maps
            .iter()
            .find(|m| m.executable() && m.file_name() == "libc.so.6")
            .expect("libc.so.6 mapped");
        let data = std::fs::read(&text.path).unwrap();
        let info = ElfInfo::parse(&data[..]).unwrap();
        let bias = info.load_bias(text.start, text.offset).unwrap();
        (data, bias)
    }

    #[test]
    fn libc_has_a_build_id_and_a_bias_that_places_its_code() {
        let maps = crate::maps::read_self().unwrap();
        let text = maps
            .iter()
            .find(|m| m.executable() && m.file_name() == "libc.so.6")
            .expect("libc.so.6 mapped");
        let info = ElfInfo::parse(&std::fs::read(&text.path).unwrap()[..]).unwrap();
        assert_eq!(info.build_id.as_ref().map(Vec::len), Some(20));
        assert_eq!(info.build_id_hex().len(), 40);
        let bias = info.load_bias(text.start, text.offset).unwrap();
        // Shared objects are linked at 0: the bias is where the file's first page landed,
        // page-aligned.
        assert_eq!(bias & 0xfff, 0);
        assert!(bias <= text.start);
        assert!(info.load_bias(text.start, u64::MAX - 1).is_none());
        // A text segment that starts inside the page where the read-only one ends (lld's
        // layout: offset 0x253594, address 0x254594) is mapped from that page.
        let lld = ElfInfo {
            segments: vec![
                Segment {
                    file_offset: 0,
                    file_size: 0x253594,
                    vaddr: 0,
                },
                Segment {
                    file_offset: 0x253594,
                    file_size: 0x580b7c,
                    vaddr: 0x254594,
                },
            ],
            ..ElfInfo::default()
        };
        assert_eq!(
            lld.load_bias(0x7f00_0025_3000, 0x253000),
            Some(0x7f00_0025_3000 - 0x254000)
        );
        assert_eq!(lld.load_bias(0x7f00_0000_0000, 0), Some(0x7f00_0000_0000));
    }
}
