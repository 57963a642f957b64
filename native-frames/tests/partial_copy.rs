//! The partial copies of an ELF file the agent reads (only the sections unwind tables or
//! symbols need) give the same tables, symbols and build id as the whole file: the C library
//! of this test process.

use std::path::Path;

use otelprof_native_frames::elf::{read_sections, ElfInfo, SYMBOL_SECTIONS, UNWIND_SECTIONS};
use otelprof_native_frames::symbols::SymbolTable;
use otelprof_native_frames::unwind_table::UnwindTable;

#[test]
fn a_partial_copy_gives_the_same_tables_and_build_id() {
    let maps = otelprof_native_frames::maps::read_self().unwrap();
    let path = &maps
        .iter()
        .find(|m| m.executable() && m.file_name() == "libc.so.6")
        .unwrap()
        .path;
    let whole = std::fs::read(path).unwrap();
    let unwind = read_sections(Path::new(path), UNWIND_SECTIONS).unwrap();
    let symbols = read_sections(Path::new(path), SYMBOL_SECTIONS).unwrap();
    assert_eq!(unwind.len(), whole.len());
    assert_ne!(unwind, whole, "the code was not read");
    assert_eq!(ElfInfo::parse(&unwind[..]), ElfInfo::parse(&whole[..]));
    assert_eq!(
        UnwindTable::from_elf(&unwind[..]).unwrap(),
        UnwindTable::from_elf(&whole[..]).unwrap()
    );
    let named = |data: &[u8]| {
        let t = SymbolTable::from_elf(data, None);
        (
            t.len(),
            t.lookup(t.address_of("qsort").unwrap())
                .map(|f| f.name.to_owned()),
        )
    };
    assert_eq!(named(&symbols), named(&whole));
    assert!(read_sections(Path::new("/nonexistent"), &[]).is_err());
    assert!(ElfInfo::parse(&b"\x7fELF"[..]).is_err());
}
