//! HotSpot's `-XX` flags, found in its flag table (`JVMFlag::flags`, `numFlags`) through the
//! Serviceability Agent's tables ([`VmStructs`]), and one of them claimed and switched.
//!
//! The agent needs `DebugNonSafepoints`: without it the JIT records where each inlined method
//! begins only at safepoints, and AsyncGetCallTrace attributes the code between two of them
//! to whichever inlined method the last one was in. HotSpot turns it on by itself while any
//! JVMTI environment has the CompiledMethodLoad event enabled and the flag is at its default;
//! but that event makes the JVM's Service Thread build and post an address-to-bytecode map
//! for every method it compiles (10–16 ms of CPU in the first second of a small benchmark,
//! 69 ms over a 7 s SQL script in H2). Setting the flag directly gives the same debug
//! information without the events, while profiling runs (off again after a stop). A flag the
//! user set on the command line, either way, is left as it is, and so is one another agent
//! turned on.

use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::jvm::hotspot::vm_structs::VmStructs;
use crate::jvm::jvmti::Jvmti;

/// Flags read at most: HotSpot has about 1,300 (JDK 17) to 1,400 (JDK 25).
const MAX_FLAGS: usize = 100_000;

/// Bits of `JVMFlag::_flags` that say where the value came from; 0 is the default.
const ORIGIN_MASK: u32 = 0xf;

/// The address of the flag [`claim_default_bool`] claimed, 0 if none: [`switch`] turns it on
/// when profiling starts and off when it stops.
static CLAIMED: AtomicUsize = AtomicUsize::new(0);

/// `JVMFlag::FlagType`'s `TYPE_bool`.
const TYPE_BOOL: i32 = 0;

/// What [`claim_default_bool`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The flag is at its default, off, in writable memory: [`switch`] turns it on and off.
    Claimed,
    /// The flag's value was given (on the command line, in a flags file, ergonomically): it
    /// was left alone; this is its value.
    Given(bool),
    /// The flag is at its default origin but on already (another agent set it): left alone.
    AlreadyOn,
}

/// Finds the boolean flag `name` and claims it for [`switch`] when it is at its default and
/// off; leaves it alone otherwise.
pub(crate) fn claim_default_bool(jvmti: &Jvmti, name: &str) -> Result<Outcome, String> {
    let structs = VmStructs::find(jvmti)?;
    let field = |f: &str| {
        structs
            .field_offset("JVMFlag", f)
            .ok_or_else(|| format!("this JVM exports no JVMFlag::{f}"))
    };
    let (name_at, addr_at, flags_at) = (field("_name")?, field("_addr")?, field("_flags")?);
    let flag_size = structs
        .type_size("JVMFlag")
        .ok_or("this JVM exports no size of JVMFlag")?;
    let flags_size = structs.type_size("JVMFlag::Flags").unwrap_or(4);
    // An int since JDK 14 (a string before, which this check then rejects).
    let type_at = structs.field_offset("JVMFlag", "_type");
    let word = std::mem::size_of::<usize>();
    if flag_size == 0
        || [name_at, addr_at].iter().any(|&o| o + word > flag_size)
        || !matches!(flags_size, 1 | 2 | 4)
        || flags_at + flags_size > flag_size
        || type_at.is_some_and(|o| o + 4 > flag_size)
    {
        return Err("HotSpot's JVMFlag has an unexpected layout".to_owned());
    }
    let stat = |f: &str| {
        structs
            .static_address("JVMFlag", f)
            .ok_or_else(|| format!("this JVM exports no JVMFlag::{f}"))
    };
    // SAFETY: addresses of libjvm's static `JVMFlag* flags` and `size_t numFlags`, aligned,
    // alive for the process, set when libjvm is loaded.
    let (table, count) = unsafe {
        (
            std::ptr::read_volatile(stat("flags")? as *const usize),
            std::ptr::read_volatile(stat("numFlags")? as *const usize),
        )
    };
    if table == 0 || count > MAX_FLAGS {
        return Err(format!(
            "HotSpot's flag table makes no sense ({count} flags)"
        ));
    }
    for i in 0..count {
        let entry = table + i * flag_size;
        // SAFETY: `entry` is one of the `count` entries of the flag table, of `flag_size`
        // bytes each; the name and address are words inside it (checked above). The last
        // entry of the table has a null name.
        let (flag_name, addr) = unsafe {
            (
                std::ptr::read_unaligned((entry + name_at) as *const *const c_char),
                std::ptr::read_unaligned((entry + addr_at) as *const usize),
            )
        };
        if flag_name.is_null() || addr == 0 {
            continue;
        }
        // SAFETY: a flag's name is a NUL-terminated static string.
        if unsafe { CStr::from_ptr(flag_name) }.to_bytes() != name.as_bytes() {
            continue;
        }
        if let Some(type_at) = type_at {
            // SAFETY: `_type` lies inside the entry (checked above).
            let ty = unsafe { std::ptr::read_unaligned((entry + type_at) as *const i32) };
            if ty != TYPE_BOOL {
                return Err(format!("the flag {name} is not a boolean here (type {ty})"));
            }
        }
        // SAFETY: `_flags` lies inside the entry, of `flags_size` bytes (checked above).
        let origin = unsafe {
            match flags_size {
                1 => u32::from(std::ptr::read_unaligned((entry + flags_at) as *const u8)),
                2 => u32::from(std::ptr::read_unaligned((entry + flags_at) as *const u16)),
                _ => std::ptr::read_unaligned((entry + flags_at) as *const u32),
            }
        } & ORIGIN_MASK;
        // SAFETY: a bool flag's `_addr` is the address of its C++ `bool`, in libjvm's data.
        let value = unsafe { std::ptr::read_volatile(addr as *const u8) } != 0;
        if origin != 0 {
            return Ok(Outcome::Given(value));
        }
        if value {
            // At its default origin yet on: another agent in this JVM set it the same way and
            // relies on it; it is left to that agent.
            return Ok(Outcome::AlreadyOn);
        }
        // A flag that is a constant in some build would sit in read-only memory, where a
        // store kills the process: write only into a writable mapping.
        if !writable(addr)? {
            return Err(format!("the flag {name} is not in writable memory"));
        }
        CLAIMED.store(addr, Ordering::Relaxed);
        return Ok(Outcome::Claimed);
    }
    Err(format!("this JVM has no flag {name}"))
}

/// Turns the flag [`claim_default_bool`] claimed on or off (nothing if it claimed none): on
/// when profiling starts, off when it stops, so that the JIT records what it does without the
/// agent.
pub(crate) fn switch(on: bool) {
    let addr = CLAIMED.load(Ordering::Relaxed);
    if addr != 0 {
        // SAFETY: the address of a bool flag in libjvm's data (see `claim_default_bool`); a
        // one-byte store, which the compiler threads that read the flag see whole, before or
        // after.
        unsafe { std::ptr::write_volatile(addr as *mut u8, u8::from(on)) };
    }
}

/// Whether `addr` lies in a writable mapping of this process.
fn writable(addr: usize) -> Result<bool, String> {
    let maps = otelprof_native_frames::maps::read_self()
        .map_err(|e| format!("cannot read /proc/self/maps: {e}"))?;
    Ok(maps.iter().any(|m| m.contains(addr as u64) && m.writable()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_is_writable_and_a_literal_is_not() {
        static mut WORD: u8 = 0;
        let word = std::ptr::addr_of!(WORD) as usize;
        assert_eq!(writable(word), Ok(true));
        assert_eq!(writable("literal".as_ptr() as usize), Ok(false));
    }
}
