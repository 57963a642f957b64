//! HotSpot's `gHotSpotVMStructs`: the table of field offsets the JVM exports for its
//! Serviceability Agent (`jhsdb`), present in every HotSpot build from JDK 6 to 25. Each entry
//! names a type and a field and gives the field's offset; the layout of an entry is itself
//! exported (`gHotSpotVMStructEntry*Offset`, `...ArrayStride`), so nothing about it is assumed.
//!
//! The table and the strings it points to are static data of libjvm: read directly.

use std::ffi::{c_char, CStr};

use crate::jvm::jvmti::Jvmti;
use crate::jvm::libjvm;

/// Entries read at most: the table has about 2,000 (JDK 17: 1,900; JDK 25: 2,300); a table
/// without its terminating entry must not be read forever.
const MAX_ENTRIES: usize = 100_000;

/// The layout of one entry, and where the table is.
struct Layout {
    table: usize,
    stride: usize,
    type_name: usize,
    field_name: usize,
    offset: usize,
    /// Where an entry says whether its field is static (an int32), and a static field's
    /// address (a pointer): `None` where this JVM does not export them.
    is_static: Option<usize>,
    address: Option<usize>,
    /// The companion table of type sizes (`gHotSpotVMTypes`), where this JVM exports it.
    types: Option<TypesLayout>,
}

/// The layout of one entry of `gHotSpotVMTypes`, and where that table is.
struct TypesLayout {
    table: usize,
    stride: usize,
    type_name: usize,
    size: usize,
}

/// Offsets of non-static fields and addresses of static ones, looked up by type and field
/// name.
pub(crate) struct VmStructs {
    layout: Layout,
}

impl VmStructs {
    /// Finds the table in this JVM's libjvm.
    pub(crate) fn find(jvmti: &Jvmti) -> Result<VmStructs, String> {
        let word = |name: &CStr| -> Result<usize, String> {
            let p = libjvm::exported(jvmti, name);
            if p.is_null() {
                return Err(format!(
                    "this JVM exports no {} (not HotSpot?)",
                    name.to_string_lossy()
                ));
            }
            // SAFETY: HotSpot exports these as 64-bit variables (a pointer for the table,
            // uint64_t for the layout), aligned, in libjvm's data, alive for the process.
            Ok(unsafe { std::ptr::read_volatile(p as *const usize) })
        };
        let layout = Layout {
            table: word(c"gHotSpotVMStructs")?,
            stride: word(c"gHotSpotVMStructEntryArrayStride")?,
            type_name: word(c"gHotSpotVMStructEntryTypeNameOffset")?,
            field_name: word(c"gHotSpotVMStructEntryFieldNameOffset")?,
            offset: word(c"gHotSpotVMStructEntryOffsetOffset")?,
            is_static: word(c"gHotSpotVMStructEntryIsStaticOffset").ok(),
            address: word(c"gHotSpotVMStructEntryAddressOffset").ok(),
            types: (|| {
                let types = TypesLayout {
                    table: word(c"gHotSpotVMTypes").ok()?,
                    stride: word(c"gHotSpotVMTypeEntryArrayStride").ok()?,
                    type_name: word(c"gHotSpotVMTypeEntryTypeNameOffset").ok()?,
                    size: word(c"gHotSpotVMTypeEntrySizeOffset").ok()?,
                };
                let fits = |o: usize| o.checked_add(8).is_some_and(|end| end <= types.stride);
                (types.table != 0
                    && types.stride <= 1024
                    && fits(types.type_name)
                    && fits(types.size))
                .then_some(types)
            })(),
        };
        let word_size = std::mem::size_of::<usize>();
        let fits = |o: usize| {
            o.checked_add(word_size)
                .is_some_and(|end| end <= layout.stride)
        };
        if layout.table == 0
            || layout.stride == 0
            || layout.stride > 1024
            || !fits(layout.type_name)
            || !fits(layout.field_name)
            || !fits(layout.offset)
            || layout
                .is_static
                .is_some_and(|o| o.saturating_add(4) > layout.stride)
            || layout.address.is_some_and(|o| !fits(o))
        {
            return Err("HotSpot's VMStructs table has an unexpected layout".to_owned());
        }
        Ok(VmStructs { layout })
    }

    /// The offset of `type_name::field_name` (a non-static field), if the table has it.
    pub(crate) fn field_offset(&self, type_name: &str, field_name: &str) -> Option<usize> {
        let entry = self.entry(type_name, field_name)?;
        // SAFETY: a word inside the entry (checked in `find`).
        let offset =
            unsafe { std::ptr::read_unaligned((entry + self.layout.offset) as *const u64) };
        usize::try_from(offset).ok()
    }

    /// The address of the static field `type_name::field_name`, if the table has it.
    pub(crate) fn static_address(&self, type_name: &str, field_name: &str) -> Option<usize> {
        let (is_static, address) = (self.layout.is_static?, self.layout.address?);
        let entry = self.entry(type_name, field_name)?;
        // SAFETY: an int32 and a word inside the entry (checked in `find`).
        let (flag, addr) = unsafe {
            (
                std::ptr::read_unaligned((entry + is_static) as *const i32),
                std::ptr::read_unaligned((entry + address) as *const usize),
            )
        };
        (flag != 0 && addr != 0).then_some(addr)
    }

    /// The size in bytes of the type `type_name`, if the table of types has it.
    pub(crate) fn type_size(&self, type_name: &str) -> Option<usize> {
        let t = self.layout.types.as_ref()?;
        let entry = find_entry(t.table, t.stride, t.type_name, |_, name| {
            name.to_bytes() == type_name.as_bytes()
        })?;
        // SAFETY: a word inside the entry (checked in `find`).
        let size = unsafe { std::ptr::read_unaligned((entry + t.size) as *const u64) };
        usize::try_from(size).ok()
    }

    /// The address of the entry of `type_name::field_name`.
    fn entry(&self, type_name: &str, field_name: &str) -> Option<usize> {
        let l = &self.layout;
        find_entry(l.table, l.stride, l.type_name, |entry, ty| {
            // SAFETY: a word inside the entry (checked in `find`), holding a pointer to a
            // static C string or null.
            let field =
                unsafe { std::ptr::read_unaligned((entry + l.field_name) as *const *const c_char) };
            // SAFETY: a non-null name in the table is a NUL-terminated static string.
            !field.is_null()
                && ty.to_bytes() == type_name.as_bytes()
                && unsafe { CStr::from_ptr(field) }.to_bytes() == field_name.as_bytes()
        })
    }
}

/// The first entry of one of HotSpot's tables (`table`, entries `stride` bytes apart, each
/// with a pointer to its type name at `name_at`, the last with a null one) for which `is_it`
/// is true, given the entry's address and type name.
fn find_entry(
    table: usize,
    stride: usize,
    name_at: usize,
    mut is_it: impl FnMut(usize, &CStr) -> bool,
) -> Option<usize> {
    for i in 0..MAX_ENTRIES {
        let entry = table.checked_add(i.checked_mul(stride)?)?;
        // SAFETY: `entry` is inside the table (entries up to the terminating one, whose type
        // name is null, are part of it); the name is a word inside the entry (checked in
        // `VmStructs::find`).
        let name = unsafe { std::ptr::read_unaligned((entry + name_at) as *const *const c_char) };
        if name.is_null() {
            return None;
        }
        // SAFETY: a non-null name in the table is a NUL-terminated static string.
        if is_it(entry, unsafe { CStr::from_ptr(name) }) {
            return Some(entry);
        }
    }
    None
}
