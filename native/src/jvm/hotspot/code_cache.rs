//! Where HotSpot's code cache lies: the one reservation that holds the interpreter, the
//! compiled methods, the adapters and the stubs. A native stack walk stops at the first
//! return address inside it: from there on the frames are Java frames, which
//! AsyncGetCallTrace walks. The bounds are the static fields `CodeCache::_low_bound` and
//! `_high_bound`, set once when the JVM reserves the cache and never moved.

use crate::jvm::hotspot::vm_structs::VmStructs;
use crate::jvm::jvmti::Jvmti;

/// The code cache's `[low, high)` addresses.
pub(crate) fn bounds(jvmti: &Jvmti) -> Result<(u64, u64), String> {
    let structs = VmStructs::find(jvmti)?;
    let read = |field: &str| -> Result<u64, String> {
        let at = structs
            .static_address("CodeCache", field)
            .ok_or_else(|| format!("this JVM exports no CodeCache::{field}"))?;
        // SAFETY: the address of a static `address` field of libjvm, aligned, alive for the
        // process; it is written once at VM start, before any agent code runs.
        Ok(unsafe { std::ptr::read_volatile(at as *const u64) })
    };
    let (low, high) = (read("_low_bound")?, read("_high_bound")?);
    if low == 0 || high <= low {
        return Err(format!(
            "the code cache bounds {low:#x}..{high:#x} make no sense"
        ));
    }
    Ok((low, high))
}
