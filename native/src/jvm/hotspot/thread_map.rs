//! The kernel thread id and the JNIEnv of a running Java thread, from its `java.lang.Thread`.
//!
//! The way there: `Thread.eetop` (a private `long` that HotSpot sets to the thread's
//! `JavaThread*` while it runs, and clears when it ends) → `JavaThread::_osthread` →
//! `OSThread::_thread_id`, the kernel tid; both offsets come from [`VmStructs`]. The JNIEnv is
//! a field embedded in `JavaThread` whose offset HotSpot does not export; it is measured on the
//! calling thread, whose `JavaThread*` and JNIEnv are both known, and is the same in every
//! `JavaThread`.
//!
//! Everything read is checked before it is believed:
//! - on the calling thread first: the tid found its way must be `gettid()`, or nothing is
//!   mapped (a JVM whose structures differ is told, never guessed at);
//! - for each thread: the memory of another thread is read with `process_vm_readv` on our
//!   own process, which fails with `EFAULT` instead of faulting, so a thread that ends and is
//!   freed meanwhile cannot crash the JVM; its JNIEnv must point to the JNI function table
//!   every thread shares; its tid must be a thread of this process; and `eetop` must hold the
//!   same `JavaThread*` after the reads as before. HotSpot clears `eetop` (in `ensure_join`)
//!   before it frees the `JavaThread`, so an unchanged non-zero `eetop` proves that the
//!   memory read was that live thread's all along.

use std::sync::atomic::{fence, Ordering};

use jni::sys::{jfieldID, jobject, JNIEnv};

use crate::jvm::hotspot::vm_structs::VmStructs;
use crate::jvm::jvmti::{delete_local_ref, Jvmti};

/// A running Java thread's ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mapped {
    /// Its `JavaThread*` (the value of `eetop`).
    pub(crate) java_thread: usize,
    pub(crate) tid: i32,
    pub(crate) env: *mut JNIEnv,
}

/// What it takes to map threads on this JVM, measured once.
pub(crate) struct ThreadMap {
    eetop: jfieldID,
    osthread: usize,
    thread_id: usize,
    /// `JNIEnv*` minus `JavaThread*`.
    env_offset: usize,
    /// The JNI function table every thread's JNIEnv points to.
    functions: usize,
}

impl ThreadMap {
    /// Finds the offsets and checks them on the calling thread.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv; the caller is a Java thread in the live phase.
    pub(crate) unsafe fn new(jvmti: &Jvmti, jni: *mut JNIEnv) -> Result<ThreadMap, String> {
        let structs = VmStructs::find(jvmti)?;
        let osthread = structs
            .field_offset("Thread", "_osthread")
            .or_else(|| structs.field_offset("JavaThread", "_osthread"))
            .ok_or("HotSpot's VMStructs has no Thread::_osthread")?;
        let thread_id = structs
            .field_offset("OSThread", "_thread_id")
            .ok_or("HotSpot's VMStructs has no OSThread::_thread_id")?;
        // SAFETY: per this function's contract.
        let eetop = unsafe { eetop_field(jni) }.ok_or("java.lang.Thread has no eetop field")?;
        let mut me: jobject = std::ptr::null_mut();
        jvmti
            .current_thread(&mut me)
            .map_err(|e| format!("cannot identify the calling thread: {e}"))?;
        // SAFETY: `me` is the calling thread's Thread, a local reference deleted right after.
        let java_thread = unsafe {
            let jt = long_field(jni, me, eetop);
            delete_local_ref(jni, me);
            jt
        };
        let env = jni as usize;
        let env_offset = env.wrapping_sub(java_thread);
        // The JNIEnv is a field of JavaThread: a few hundred bytes in, never past its end.
        if java_thread == 0 || env_offset == 0 || env_offset > 64 * 1024 {
            return Err(format!(
                "the JNIEnv is not inside HotSpot's JavaThread (offset {env_offset:#x})"
            ));
        }
        // SAFETY: `jni` is a valid JNIEnv, whose first word is its function table.
        let functions = unsafe { *(jni as *const usize) };
        let map = ThreadMap {
            eetop,
            osthread,
            thread_id,
            env_offset,
            functions,
        };
        let tid = map.tid_of(java_thread);
        // SAFETY: SYS_gettid takes no arguments and cannot fail.
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        if tid != Some(me) {
            return Err(format!(
                "HotSpot's thread structures are not as expected (tid {tid:?} found, {me} is right)"
            ));
        }
        Ok(map)
    }

    fn tid_of(&self, java_thread: usize) -> Option<i32> {
        let os = read_word(java_thread.checked_add(self.osthread)?)?;
        if os == 0 {
            return None;
        }
        let tid = read_i32(os.checked_add(self.thread_id)?)?;
        (tid > 0).then_some(tid)
    }

    /// The ids of `thread`, or `None` if it is not running (not started yet, or ended) or
    /// anything read does not check out.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv and `thread` a live reference to a Thread.
    pub(crate) unsafe fn map(&self, jni: *mut JNIEnv, thread: jobject) -> Option<Mapped> {
        // SAFETY: per this function's contract.
        let java_thread = unsafe { long_field(jni, thread, self.eetop) };
        if java_thread == 0 {
            return None;
        }
        let tid = self.tid_of(java_thread)?;
        let env = java_thread.checked_add(self.env_offset)?;
        if read_word(env)? != self.functions {
            return None;
        }
        if !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
            return None;
        }
        fence(Ordering::Acquire);
        // SAFETY: as above.
        if unsafe { long_field(jni, thread, self.eetop) } != java_thread {
            return None;
        }
        Some(Mapped {
            java_thread,
            tid,
            env: env as *mut JNIEnv,
        })
    }

    /// Whether `thread` still runs as the `JavaThread` `mapped` was read from.
    ///
    /// # Safety
    /// As for [`ThreadMap::map`].
    pub(crate) unsafe fn still_running(
        &self,
        jni: *mut JNIEnv,
        thread: jobject,
        mapped: &Mapped,
    ) -> bool {
        // SAFETY: per this function's contract.
        unsafe { long_field(jni, thread, self.eetop) == mapped.java_thread }
    }
}

/// `Thread.eetop`'s field id (valid as long as the class: forever).
///
/// # Safety
/// `jni` is the calling thread's JNIEnv.
unsafe fn eetop_field(jni: *mut JNIEnv) -> Option<jfieldID> {
    // SAFETY: per this function's contract; a failed lookup leaves an exception, cleared, and
    // the class reference is deleted after its last use.
    unsafe {
        let class = (**jni).FindClass.map_or(std::ptr::null_mut(), |f| {
            f(jni, c"java/lang/Thread".as_ptr())
        });
        clear_exception(jni);
        if class.is_null() {
            return None;
        }
        let field = (**jni).GetFieldID.map_or(std::ptr::null_mut(), |f| {
            f(jni, class, c"eetop".as_ptr(), c"J".as_ptr())
        });
        clear_exception(jni);
        delete_local_ref(jni, class);
        (!field.is_null()).then_some(field)
    }
}

/// # Safety
/// `jni` is the calling thread's JNIEnv, `object` a live Thread and `field` a `long` of it.
unsafe fn long_field(jni: *mut JNIEnv, object: jobject, field: jfieldID) -> usize {
    // SAFETY: per this function's contract.
    unsafe {
        (**jni)
            .GetLongField
            .map_or(0, |f| f(jni, object, field) as usize)
    }
}

/// # Safety
/// `jni` is the calling thread's JNIEnv.
unsafe fn clear_exception(jni: *mut JNIEnv) {
    // SAFETY: per this function's contract.
    unsafe {
        if (**jni).ExceptionCheck.is_some_and(|f| f(jni) != 0) {
            if let Some(clear) = (**jni).ExceptionClear {
                clear(jni);
            }
        }
    }
}

/// Reads `N` bytes of this process's memory at `address` without faulting: `None` where it
/// is not mapped (`process_vm_readv` on our own pid: the kernel copies, and reports EFAULT).
fn read_bytes<const N: usize>(address: usize) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: N,
    };
    let remote = libc::iovec {
        iov_base: address as *mut libc::c_void,
        iov_len: N,
    };
    // SAFETY: `local` is our own N-byte buffer; the kernel validates `remote` and fails with
    // EFAULT rather than touching an unmapped address.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == N as isize).then_some(out)
}

fn read_word(address: usize) -> Option<usize> {
    read_bytes::<8>(address).map(usize::from_ne_bytes)
}

fn read_i32(address: usize) -> Option<i32> {
    read_bytes::<4>(address).map(i32::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_memory_and_reports_unmapped_addresses_instead_of_faulting() {
        let value: usize = 0x1234_5678_9abc_def0;
        assert_eq!(read_word(&value as *const usize as usize), Some(value));
        let small: i32 = -7;
        assert_eq!(read_i32(&small as *const i32 as usize), Some(-7));
        assert_eq!(read_word(0), None);
        assert_eq!(read_word(8), None);
        assert_eq!(read_word(usize::MAX - 3), None);
    }
}
