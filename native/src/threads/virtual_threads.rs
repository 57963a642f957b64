//! Virtual threads (JDK 21+): the context record belongs to the virtual thread, and follows it
//! from carrier to carrier (docs/context-protocol.md, Virtual threads).
//!
//! The record is kept in the virtual thread's JVMTI thread-local storage; HotSpot's mount and
//! unmount extension events, posted on the carrier, point the carrier's thread-table slot (and
//! `otel_thread_ctx_v1`) at the mounted virtual thread's record and back. No slot ever points
//! into a carrier that may exit: the record is the virtual thread's own, from the never-freed
//! pool, and goes back to the pool at VirtualThreadEnd.

use std::sync::atomic::{AtomicBool, Ordering};

use jni::sys::jobject;

use crate::context::record::{ContextRecord, RECORDS};
use crate::context::tls;
use crate::jvm::jvmti::{ExtensionEventFn, Jvmti};
use crate::sampling::os::gettid;
use crate::threads::thread_registry;

const MOUNT: &str = "com.sun.hotspot.events.VirtualThreadMount";
const UNMOUNT: &str = "com.sun.hotspot.events.VirtualThreadUnmount";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether virtual-thread context tracking is on (JDK 21+ with the capability granted).
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Registers the mount/unmount callbacks (which call [`mount`] and [`unmount`]). Returns false
/// when this VM has no such events.
pub(crate) fn enable(
    jvmti: &Jvmti,
    on_mount: ExtensionEventFn,
    on_unmount: ExtensionEventFn,
) -> bool {
    let Ok(events) = jvmti.extension_events() else {
        return false;
    };
    let find = |name: &str| events.iter().find(|(n, _)| n == name).map(|&(_, i)| i);
    let (Some(mount), Some(unmount)) = (find(MOUNT), find(UNMOUNT)) else {
        return false;
    };
    if jvmti
        .set_extension_event_callback(mount, Some(on_mount))
        .is_err()
        || jvmti
            .set_extension_event_callback(unmount, Some(on_unmount))
            .is_err()
    {
        let _ = jvmti.set_extension_event_callback(mount, None);
        return false;
    }
    // Some VMs also want the extension events enabled like standard ones.
    let _ = jvmti.set_event(true, mount as u32);
    let _ = jvmti.set_event(true, unmount as u32);
    ENABLED.store(true, Ordering::Relaxed);
    true
}

/// Turns the mount and unmount callbacks off (profiling stopped): mounts and unmounts cost
/// nothing more. A virtual thread keeps its record in its JVMTI storage for the next session.
pub(crate) fn disable(jvmti: &Jvmti) {
    if !ENABLED.swap(false, Ordering::Relaxed) {
        return;
    }
    let Ok(events) = jvmti.extension_events() else {
        return;
    };
    for (name, index) in events {
        if name == MOUNT || name == UNMOUNT {
            let _ = jvmti.set_event(false, index as u32);
            let _ = jvmti.set_extension_event_callback(index, None);
        }
    }
}

/// Makes the calling carrier's slot and `otel_thread_ctx_v1` show `record`, or the carrier's
/// own record when `record` is null and `own_if_null` is set.
///
/// # Safety
/// `record` is null or a pool record.
unsafe fn show_on_carrier(record: *mut ContextRecord, own_if_null: bool) {
    if let Some(slot) = thread_registry::TABLE.lookup(gettid()) {
        let shown = if record.is_null() && own_if_null {
            slot.own_context()
        } else {
            record
        };
        slot.set_current_context(shown);
        // SAFETY: null or a pool record, on the carrier itself.
        unsafe { tls::publish(shown) };
    }
}

/// Mount: the carrier starts running `vthread`. A virtual thread that never published
/// context shows "no span": the carrier's own record must not leak into it.
///
/// # Safety
/// HotSpot's VirtualThreadMount arguments: `vthread` is the event's live thread reference, and
/// the caller is the carrier.
pub(crate) unsafe fn mount(jvmti: &Jvmti, vthread: jobject) {
    // SAFETY: `vthread` is the event's live thread reference.
    let record = unsafe { jvmti.thread_local_storage(vthread) }.unwrap_or(std::ptr::null_mut());
    // SAFETY: the storage only ever holds pool records (see `register_current`).
    unsafe { show_on_carrier(record as *mut ContextRecord, false) };
}

/// Unmount: the carrier goes back to its own record. Called on the carrier.
pub(crate) fn unmount() {
    // SAFETY: null selects the carrier's own record.
    unsafe { show_on_carrier(std::ptr::null_mut(), true) }
}

/// VirtualThreadEnd (posted on the carrier while the virtual thread is still mounted): give its
/// record back.
///
/// # Safety
/// JVMTI's VirtualThreadEnd arguments.
pub(crate) unsafe fn on_end(jvmti: &Jvmti, vthread: jobject) {
    // SAFETY: the event's thread reference.
    let record = unsafe { jvmti.thread_local_storage(vthread) }.unwrap_or(std::ptr::null_mut());
    if record.is_null() {
        return;
    }
    // SAFETY: as above; the virtual thread is ending, nothing will read its storage again.
    unsafe {
        let _ = jvmti.set_thread_local_storage(vthread, std::ptr::null());
        show_on_carrier(std::ptr::null_mut(), true);
        RECORDS.give_back(record as *mut ContextRecord);
    }
}

/// Gives the calling virtual thread a record of its own and shows it on its carrier.
///
/// # Safety
/// Called on a virtual thread (the shim checks `Thread.isVirtual()`).
pub(crate) unsafe fn register_current(jvmti: &Jvmti) -> *mut ContextRecord {
    // SAFETY: null = the current (virtual) thread.
    let existing =
        unsafe { jvmti.thread_local_storage(std::ptr::null_mut()) }.unwrap_or(std::ptr::null_mut());
    if !existing.is_null() {
        return existing as *mut ContextRecord;
    }
    let record = RECORDS.take();
    if record.is_null() {
        return record;
    }
    // SAFETY: as above.
    if unsafe { jvmti.set_thread_local_storage(std::ptr::null_mut(), record as *const _) }.is_err()
    {
        // SAFETY: never published.
        unsafe { RECORDS.give_back(record) };
        return std::ptr::null_mut();
    }
    // SAFETY: a pool record, on the carrier this virtual thread is mounted on.
    unsafe { show_on_carrier(record, false) };
    record
}
