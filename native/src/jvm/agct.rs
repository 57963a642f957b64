//! Finding AsyncGetCallTrace, HotSpot's signal-safe stack walker.
//!
//! The `java` launcher loads libjvm with RTLD_GLOBAL, so the symbol is usually visible to
//! `dlsym(RTLD_DEFAULT)`. Embedders may load it privately; then we find libjvm through the
//! address of a JVMTI function ([`crate::jvm::libjvm::locate`]) and look the symbol up there.

use std::ffi::CStr;

use crate::jvm::jvmti::Jvmti;
use crate::jvm::libjvm;
use crate::sys::AsyncGetCallTraceFn;

#[derive(Debug, thiserror::Error)]
#[error("AsyncGetCallTrace is not exported by this JVM (is it HotSpot?); profiling is off")]
pub(crate) struct NotFound;

pub(crate) fn find(jvmti: &Jvmti) -> Result<AsyncGetCallTraceFn, NotFound> {
    const NAME: &CStr = c"AsyncGetCallTrace";
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no other preconditions.
    let mut sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, NAME.as_ptr()) };
    if sym.is_null() {
        sym = find_via_libjvm(jvmti, NAME).unwrap_or(std::ptr::null_mut());
    }
    if sym.is_null() {
        return Err(NotFound);
    }
    // SAFETY: the symbol is HotSpot's `void AsyncGetCallTrace(ASGCT_CallTrace*, jint, void*)`.
    Ok(unsafe { std::mem::transmute::<*mut libc::c_void, AsyncGetCallTraceFn>(sym) })
}

fn find_via_libjvm(jvmti: &Jvmti, name: &CStr) -> Option<*mut libc::c_void> {
    let libjvm = libjvm::locate(jvmti)?;
    // SAFETY: RTLD_NOLOAD only returns a handle to an already-loaded object (libjvm itself).
    let handle = unsafe { libc::dlopen(libjvm.path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: valid handle and name. The handle is not closed: libjvm stays loaded for the
    // life of the process, and closing would only drop the reference count we just took.
    let sym = unsafe { libc::dlsym(handle, name.as_ptr()) };
    (!sym.is_null()).then_some(sym)
}
