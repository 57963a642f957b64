//! The partial copies of an ELF file the agent reads (only the sections unwind tables or
//! symbols need) give the same tables, symbols and build id as the whole file: the C library
//! of this test process.

use std::path::Path;

use otelprof_native_frames::elf::{
    read_sections, ElfInfo, SparseImage, SYMBOL_SECTIONS, UNWIND_SECTIONS,
};
use otelprof_native_frames::symbols::SymbolTable;
use otelprof_native_frames::unwind_table::UnwindTable;

#[test]
fn a_partial_copy_gives_the_same_tables_and_build_id() {
    let maps = otelprof_native_frames::maps::read_self().unwrap();
    let mut files: Vec<&str> = maps
        .iter()
        .filter(|m| m.executable() && m.is_file())
        .map(|m| m.path.as_str())
        .collect();
    files.dedup();
    // This test's own executable (with its debug information), the C library and the
    // others this process has mapped.
    assert!(files.len() >= 3, "{files:?}");
    for path in files {
        let whole = std::fs::read(path).unwrap();
        let unwind = read_sections(Path::new(path), UNWIND_SECTIONS).unwrap();
        let symbols = read_sections(Path::new(path), SYMBOL_SECTIONS).unwrap();
        same_as_whole(path, &whole, &unwind, &symbols);
    }
    assert!(read_sections(Path::new("/nonexistent"), &[]).is_err());
    assert!(ElfInfo::parse(&b"\x7fELF"[..]).is_err());
}

fn same_as_whole(path: &str, whole: &[u8], unwind: &SparseImage, symbols: &SparseImage) {
    assert_eq!(unwind.len(), whole.len() as u64);
    // The code and the symbols were not read for the unwind table, nor the code for the
    // symbols.
    assert!(
        unwind.bytes_held() < whole.len() / 4,
        "{path}: {} of {} bytes read",
        unwind.bytes_held(),
        whole.len()
    );
    assert!(symbols.bytes_held() < whole.len() / 2, "{path}");
    assert_eq!(ElfInfo::parse(unwind), ElfInfo::parse(whole), "{path}");
    assert_eq!(ElfInfo::parse(symbols), ElfInfo::parse(whole), "{path}");
    assert_eq!(
        UnwindTable::from_elf(unwind).map_err(|e| e.to_string()),
        UnwindTable::from_elf(whole).map_err(|e| e.to_string()),
        "{path}"
    );
    // Every function and name alike (compared through their debug form).
    let partial = SymbolTable::from_elf(symbols, None);
    assert_eq!(
        format!("{partial:?}"),
        format!("{:?}", SymbolTable::from_elf(whole, None)),
        "{path}"
    );
    if path.ends_with("/libc.so.6") {
        assert!(partial.address_of("qsort").is_some());
    }
}
