//! What a loaded ELF image says about itself: its GNU build id (so that a backend can find
//! the same file's symbols again), its debug link, and where its code was loaded relative to
//! its own addresses.
#![forbid(unsafe_code)]

use object::{Object, ObjectSegment};

/// The facts of one ELF image that symbolisation and unwinding need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfInfo {
    /// The GNU build id note (`NT_GNU_BUILD_ID`), if any.
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: the name of a separate debug file.
    pub debuglink: Option<String>,
    /// Loadable segments: file offset, file size, virtual address.
    pub segments: Vec<Segment>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub vaddr: u64,
}

impl ElfInfo {
    pub fn parse(data: &[u8]) -> Result<ElfInfo, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_has_a_build_id_and_a_bias_that_places_its_code() {
        let maps = crate::maps::read_self().unwrap();
        let text = maps
            .iter()
            .find(|m| m.executable() && m.file_name() == "libc.so.6")
            .expect("libc.so.6 mapped");
        let info = ElfInfo::parse(&std::fs::read(&text.path).unwrap()).unwrap();
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
        assert!(ElfInfo::parse(b"\x7fELF").is_err());
    }
}
