//! Finding things inside libjvm, the library that is the JVM: where it is loaded (through the
//! address of a JVMTI function, which lives in it), and functions it does not export, from the
//! ELF symbol table of its file on disk. Used at start-up, never in a signal handler.

use std::ffi::{CStr, CString};
use std::os::unix::fs::FileExt;

use crate::jvm::jvmti::Jvmti;

/// Where libjvm is loaded.
pub(crate) struct Loaded {
    /// The file the dynamic linker loaded it from.
    pub(crate) path: CString,
    /// Its load base: symbol values in the file are relative to it.
    pub(crate) base: usize,
}

/// Finds libjvm with `dladdr` on a JVMTI function.
pub(crate) fn locate(jvmti: &Jvmti) -> Option<Loaded> {
    let addr = jvmti.function_address();
    if addr.is_null() {
        return None;
    }
    // SAFETY: all-zero Dl_info is valid; dladdr fills it for an address inside a loaded object.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` is a function pointer from the VM's JVMTI table.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated path of a loaded object.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_owned();
    Some(Loaded {
        path,
        base: info.dli_fbase as usize,
    })
}

/// The address of `name`, a symbol libjvm exports (a function or a variable): found with
/// `dlsym(RTLD_DEFAULT)` when libjvm was loaded globally (the `java` launcher does), else in
/// libjvm's own handle. Null when absent.
pub(crate) fn exported(jvmti: &Jvmti, name: &CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no other preconditions.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !sym.is_null() {
        return sym;
    }
    let Some(libjvm) = locate(jvmti) else {
        return std::ptr::null_mut();
    };
    // SAFETY: RTLD_NOLOAD only returns a handle to an already-loaded object (libjvm itself).
    let handle = unsafe { libc::dlopen(libjvm.path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if handle.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: valid handle and name. The handle is not closed: libjvm stays loaded for the
    // life of the process, and closing would only drop the reference count we just took.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

/// The address of `name`, a function in libjvm's ELF symbol table that the dynamic linker
/// does not export (such as HotSpot's `Unsafe_Park`). The load base is checked against a symbol
/// the dynamic linker also knows (`AsyncGetCallTrace`), so that a file replaced on disk since
/// it was loaded is not trusted.
pub(crate) fn local_function(jvmti: &Jvmti, name: &str) -> Result<usize, String> {
    let Some(Loaded { path, base }) = locate(jvmti) else {
        return Err("cannot locate libjvm".to_owned());
    };
    let path = path.to_string_lossy().into_owned();
    let symbols = elf_symbols(&path, &[name, "AsyncGetCallTrace"])
        .map_err(|e| format!("cannot read the symbols of {path}: {e}"))?;
    let (Some(&Some(wanted)), Some(&Some(agct))) = (symbols.first(), symbols.get(1)) else {
        return Err(format!("{path} has no {name} symbol (stripped?)"));
    };
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let exported = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"AsyncGetCallTrace".as_ptr()) };
    if !exported.is_null() && exported as usize != base.wrapping_add(agct as usize) {
        return Err(format!("{path} on disk does not match the loaded library"));
    }
    Ok(base.wrapping_add(wanted as usize))
}

/// The values of the named function symbols in the `.symtab` of the ELF64 little-endian file
/// at `path` (None for those absent).
///
/// Hand-written, not the `object` crate, for speed on the thread that starts the agent: on the
/// libjvm of OpenJDK 17 and Temurin 25 (24 and 30 MB) it reads the section headers, `.symtab` and
/// `.strtab` in 1.3-3.7 ms (release build, file in the page cache); `object` 0.40 through its
/// `ReadCache` found the same two symbols in 34-48 ms.
fn elf_symbols(path: &str, names: &[&str]) -> Result<Vec<Option<u64>>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let read = |offset: u64, len: u64| -> Result<Vec<u8>, String> {
        let len = usize::try_from(len).map_err(|_| "section too large".to_owned())?;
        if len > 512 << 20 {
            return Err("section too large".to_owned());
        }
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset)
            .map_err(|e| e.to_string())?;
        Ok(buf)
    };
    let u16_at = |b: &[u8], o: usize| -> Option<u16> {
        Some(u16::from_le_bytes(
            b.get(o..o.checked_add(2)?)?.try_into().ok()?,
        ))
    };
    let u32_at = |b: &[u8], o: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            b.get(o..o.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let u64_at = |b: &[u8], o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(o..o.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let bad = || "malformed ELF".to_owned();

    let header = read(0, 64)?;
    // ELF magic, 64-bit, little-endian.
    if header.get(0..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1]) {
        return Err("not a 64-bit little-endian ELF file".to_owned());
    }
    let shoff = u64_at(&header, 0x28).ok_or_else(bad)?;
    let shentsize = u64::from(u16_at(&header, 0x3a).ok_or_else(bad)?);
    let shnum = u64::from(u16_at(&header, 0x3c).ok_or_else(bad)?);
    if shentsize < 64 {
        return Err(bad());
    }
    let sections = read(shoff, shentsize * shnum)?;
    let section = |i: u64| -> Option<(u32, u64, u64, u32)> {
        let o = usize::try_from(i.checked_mul(shentsize)?).ok()?;
        Some((
            u32_at(&sections, o.checked_add(4)?)?,  // sh_type
            u64_at(&sections, o.checked_add(24)?)?, // sh_offset
            u64_at(&sections, o.checked_add(32)?)?, // sh_size
            u32_at(&sections, o.checked_add(40)?)?, // sh_link
        ))
    };
    const SHT_SYMTAB: u32 = 2;
    let Some((_, sym_off, sym_size, link)) = (0..shnum)
        .filter_map(section)
        .find(|(ty, ..)| *ty == SHT_SYMTAB)
    else {
        return Ok(vec![None; names.len()]);
    };
    let (_, str_off, str_size, _) = section(u64::from(link)).ok_or_else(bad)?;
    let symtab = read(sym_off, sym_size)?;
    let strtab = read(str_off, str_size)?;
    let mut found = vec![None; names.len()];
    const STT_FUNC: u8 = 2;
    for sym in symtab.chunks_exact(24) {
        let info = sym.get(4).copied().unwrap_or(0);
        if info & 0xf != STT_FUNC {
            continue;
        }
        let (Some(name_at), Some(value)) = (u32_at(sym, 0), u64_at(sym, 8)) else {
            continue;
        };
        let Some(rest) = strtab.get(name_at as usize..) else {
            continue;
        };
        let name = rest.split(|b| *b == 0).next().unwrap_or(&[]);
        for (i, wanted) in names.iter().enumerate() {
            if name == wanted.as_bytes() && value != 0 {
                if let Some(slot) = found.get_mut(i) {
                    *slot = Some(value);
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_read_from_an_elf_file() {
        // This test binary is an ELF file with a symbol table (debug builds keep it).
        let exe = std::env::current_exe().unwrap();
        let found = elf_symbols(exe.to_str().unwrap(), &["main", "no_such_symbol_here"]).unwrap();
        assert!(found[0].is_some(), "{found:?}");
        assert_eq!(found[1], None);
        assert!(elf_symbols("/dev/null", &["main"]).is_err());
        let text = std::env::temp_dir().join(format!("otelprof-not-elf-{}", std::process::id()));
        std::fs::write(
            &text,
            b"not an ELF file at all, but long enough to read a header from it.....",
        )
        .unwrap();
        assert!(elf_symbols(text.to_str().unwrap(), &["main"]).is_err());
        let _ = std::fs::remove_file(&text);
    }
}
