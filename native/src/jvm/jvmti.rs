//! Thin safe-ish wrappers over the JVMTI and JNI calls the agent makes.
//!
//! Each wrapper checks that the VM filled the slot it calls, turns JVMTI errors into
//! [`JvmtiErr`], and frees what JVMTI allocated. None of this is signal-safe; the handler
//! never calls here.

use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::sync::OnceLock;

use jni::sys::{jclass, jint, jmethodID, jobject, JNIEnv, JavaVM, JNI_OK};

use crate::sys::{self, error, JvmtiCapabilities, JvmtiEnv, JvmtiEventCallbacks, JvmtiThreadInfo};

/// A failed JVMTI or JNI call: which function, and the code it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed with error {code}")]
pub(crate) struct JvmtiErr {
    pub(crate) call: &'static str,
    pub(crate) code: u32,
}

/// Calls slot `$f` of the JVMTI function table.
macro_rules! jvmti_call {
    ($self:expr, $f:ident $(, $arg:expr)*) => {{
        let env = $self.env;
        // SAFETY: `env` is a live jvmtiEnv* (see `Jvmti::from_vm`), so `*env` points to the
        // VM's function table for as long as the VM runs.
        let table = unsafe { &**env };
        match table.$f {
            // SAFETY: the arguments match the slot's signature, generated from jvmti.h.
            Some(f) => unsafe { f(env $(, $arg)*) },
            None => error::NOT_AVAILABLE,
        }
    }};
}

fn check(call: &'static str, code: u32) -> Result<(), JvmtiErr> {
    if code == error::NONE {
        Ok(())
    } else {
        Err(JvmtiErr { call, code })
    }
}

/// A jvmtiEnv*. Copyable: JVMTI environments are valid on every thread until the VM dies.
#[derive(Clone, Copy)]
pub(crate) struct Jvmti {
    env: *mut JvmtiEnv,
}

// SAFETY: a jvmtiEnv may be used from any thread attached to the VM (JVMTI spec, "Environments").
unsafe impl Send for Jvmti {}
// SAFETY: as above.
unsafe impl Sync for Jvmti {}

/// The agent's own JVMTI environment, published once the agent is set up.
static AGENT_ENV: OnceLock<Jvmti> = OnceLock::new();

/// Publishes the agent's environment for [`agent_env`]. Called once, when the agent is complete;
/// later calls change nothing.
pub(crate) fn publish_agent_env(env: Jvmti) {
    let _ = AGENT_ENV.set(env);
}

/// The agent's JVMTI environment, for the JVMTI callbacks and JNI methods that need it: `None`
/// until the agent is set up, and for good if it never was (profiling off).
pub(crate) fn agent_env() -> Option<Jvmti> {
    AGENT_ENV.get().copied()
}

impl Jvmti {
    /// Obtains a JVMTI environment from the VM.
    ///
    /// # Safety
    /// `vm` must be the JavaVM* passed to Agent_OnLoad / Agent_OnAttach.
    pub(crate) unsafe fn from_vm(vm: *mut JavaVM) -> Result<Jvmti, JvmtiErr> {
        let mut env: *mut c_void = std::ptr::null_mut();
        // SAFETY: `vm` is valid per the caller; GetEnv is always present in the invoke table.
        let rc = unsafe {
            match (**vm).GetEnv {
                Some(get_env) => get_env(vm, &mut env, sys::JVMTI_VERSION_1_2),
                None => -1,
            }
        };
        if rc != JNI_OK || env.is_null() {
            return Err(JvmtiErr {
                call: "GetEnv(JVMTI_VERSION_1_2)",
                code: rc as u32,
            });
        }
        Ok(Jvmti {
            env: env as *mut JvmtiEnv,
        })
    }

    pub(crate) fn raw(&self) -> *mut JvmtiEnv {
        self.env
    }

    /// Address of a JVMTI function inside libjvm, to find libjvm itself with `dladdr`.
    pub(crate) fn function_address(&self) -> *const c_void {
        // SAFETY: see `jvmti_call!`.
        let table = unsafe { &**self.env };
        table
            .GetMethodName
            .map_or(std::ptr::null(), |f| f as *const c_void)
    }

    pub(crate) fn potential_capabilities(&self) -> Result<JvmtiCapabilities, JvmtiErr> {
        let mut caps = JvmtiCapabilities::default();
        check(
            "GetPotentialCapabilities",
            jvmti_call!(self, GetPotentialCapabilities, &mut caps),
        )?;
        Ok(caps)
    }

    pub(crate) fn add_capabilities(&self, caps: &JvmtiCapabilities) -> Result<(), JvmtiErr> {
        check("AddCapabilities", jvmti_call!(self, AddCapabilities, caps))
    }

    pub(crate) fn set_event_callbacks(
        &self,
        callbacks: &JvmtiEventCallbacks,
    ) -> Result<(), JvmtiErr> {
        let size = std::mem::size_of::<JvmtiEventCallbacks>() as jint;
        check(
            "SetEventCallbacks",
            jvmti_call!(self, SetEventCallbacks, callbacks, size),
        )
    }

    pub(crate) fn set_event(&self, enable: bool, event: u32) -> Result<(), JvmtiErr> {
        let mode = if enable {
            sys::JVMTI_ENABLE
        } else {
            sys::JVMTI_DISABLE
        };
        let null: jobject = std::ptr::null_mut();
        check(
            "SetEventNotificationMode",
            jvmti_call!(self, SetEventNotificationMode, mode, event, null),
        )
    }

    fn deallocate<T>(&self, p: *mut T) {
        if !p.is_null() {
            jvmti_call!(self, Deallocate, p as *mut u8);
        }
    }

    /// Copies and frees a JVMTI-allocated C string.
    fn take_string(&self, p: *mut c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: JVMTI returns NUL-terminated modified-UTF-8 strings.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        self.deallocate(p);
        s
    }

    /// Copies and frees a JVMTI-allocated array.
    fn take_array<T: Copy>(&self, p: *mut T, n: jint) -> Vec<T> {
        if p.is_null() {
            return Vec::new();
        }
        // SAFETY: JVMTI returned `n` initialised elements at `p`.
        let v = unsafe { std::slice::from_raw_parts(p, n.max(0) as usize) }.to_vec();
        self.deallocate(p);
        v
    }

    /// Ids of the extension events this VM offers, by name (e.g.
    /// `com.sun.hotspot.events.VirtualThreadMount`). Frees what JVMTI allocated.
    pub(crate) fn extension_events(&self) -> Result<Vec<(String, jint)>, JvmtiErr> {
        let mut n: jint = 0;
        let mut p: *mut c_void = std::ptr::null_mut();
        check(
            "GetExtensionEvents",
            jvmti_call!(self, GetExtensionEvents, &mut n, &mut p),
        )?;
        let infos = p as *mut sys::JvmtiExtensionEventInfo;
        let mut out = Vec::new();
        for i in 0..n.max(0) as usize {
            // SAFETY: JVMTI returned `n` infos at `infos`, each with `param_count` params; we
            // read them once and free every allocation the spec says the caller owns.
            unsafe {
                let info = &*infos.add(i);
                out.push((self.take_string(info.id), info.extension_event_index));
                self.deallocate(info.short_description);
                for j in 0..info.param_count.max(0) as usize {
                    self.deallocate((*info.params.add(j)).name);
                }
                self.deallocate(info.params);
            }
        }
        self.deallocate(infos);
        Ok(out)
    }

    /// Sets (or, with `None`, clears) an extension event's callback; a callback enables it.
    pub(crate) fn set_extension_event_callback(
        &self,
        index: jint,
        callback: Option<ExtensionEventFn>,
    ) -> Result<(), JvmtiErr> {
        let f = callback.map_or(std::ptr::null_mut(), |f| f as *mut c_void);
        check(
            "SetExtensionEventCallback",
            jvmti_call!(self, SetExtensionEventCallback, index, f),
        )
    }

    /// JVMTI thread-local storage of `thread` (null: the current thread, which may be virtual).
    ///
    /// # Safety
    /// `thread` is null or a live reference to a Thread.
    pub(crate) unsafe fn thread_local_storage(
        &self,
        thread: jobject,
    ) -> Result<*mut c_void, JvmtiErr> {
        let mut p: *mut c_void = std::ptr::null_mut();
        check(
            "GetThreadLocalStorage",
            jvmti_call!(self, GetThreadLocalStorage, thread, &mut p),
        )?;
        Ok(p)
    }

    /// # Safety
    /// As for [`Jvmti::thread_local_storage`].
    pub(crate) unsafe fn set_thread_local_storage(
        &self,
        thread: jobject,
        value: *const c_void,
    ) -> Result<(), JvmtiErr> {
        check(
            "SetThreadLocalStorage",
            jvmti_call!(self, SetThreadLocalStorage, thread, value),
        )
    }

    /// The calling thread's java.lang.Thread, as a local reference (the caller deletes it).
    pub(crate) fn current_thread(&self, thread: &mut jobject) -> Result<(), JvmtiErr> {
        check(
            "GetCurrentThread",
            jvmti_call!(self, GetCurrentThread, thread),
        )
    }

    /// Every live platform thread, as JNI local references (the caller deletes them).
    pub(crate) fn all_threads(&self) -> Result<Vec<jobject>, JvmtiErr> {
        let mut n: jint = 0;
        let mut p: *mut jobject = std::ptr::null_mut();
        check(
            "GetAllThreads",
            jvmti_call!(self, GetAllThreads, &mut n, &mut p),
        )?;
        Ok(self.take_array(p, n))
    }

    /// Posts `event` for what exists already (JVMTI GenerateEvents: CompiledMethodLoad for
    /// the methods compiled so far).
    pub(crate) fn generate_events(&self, event: u32) -> Result<(), JvmtiErr> {
        check("GenerateEvents", jvmti_call!(self, GenerateEvents, event))
    }

    /// All loaded classes, as JNI local references (the caller deletes them).
    pub(crate) fn loaded_classes(&self) -> Result<Vec<jclass>, JvmtiErr> {
        let mut n: jint = 0;
        let mut p: *mut jclass = std::ptr::null_mut();
        check(
            "GetLoadedClasses",
            jvmti_call!(self, GetLoadedClasses, &mut n, &mut p),
        )?;
        Ok(self.take_array(p, n))
    }

    /// Creates the jmethodIDs of `class`'s methods; AsyncGetCallTrace can only name methods
    /// that have one. The ids themselves are not needed here.
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub(crate) unsafe fn preload_method_ids(&self, class: jclass) -> Result<usize, JvmtiErr> {
        let mut n: jint = 0;
        let mut p: *mut jmethodID = std::ptr::null_mut();
        check(
            "GetClassMethods",
            jvmti_call!(self, GetClassMethods, class, &mut n, &mut p),
        )?;
        self.deallocate(p);
        Ok(n.max(0) as usize)
    }

    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub(crate) unsafe fn class_signature(&self, class: jclass) -> Result<String, JvmtiErr> {
        let mut sig: *mut c_char = std::ptr::null_mut();
        let mut generic: *mut c_char = std::ptr::null_mut();
        check(
            "GetClassSignature",
            jvmti_call!(self, GetClassSignature, class, &mut sig, &mut generic),
        )?;
        self.deallocate(generic);
        Ok(self.take_string(sig))
    }

    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub(crate) unsafe fn source_file_name(&self, class: jclass) -> Result<String, JvmtiErr> {
        let mut name: *mut c_char = std::ptr::null_mut();
        check(
            "GetSourceFileName",
            jvmti_call!(self, GetSourceFileName, class, &mut name),
        )?;
        Ok(self.take_string(name))
    }

    /// # Safety
    /// `method` must be a jmethodID the VM handed out (it may belong to an unloaded class: JVMTI then returns an error).
    pub(crate) unsafe fn method_name(&self, method: jmethodID) -> Result<String, JvmtiErr> {
        let mut name: *mut c_char = std::ptr::null_mut();
        let mut sig: *mut c_char = std::ptr::null_mut();
        let mut generic: *mut c_char = std::ptr::null_mut();
        check(
            "GetMethodName",
            jvmti_call!(
                self,
                GetMethodName,
                method,
                &mut name,
                &mut sig,
                &mut generic
            ),
        )?;
        self.deallocate(sig);
        self.deallocate(generic);
        Ok(self.take_string(name))
    }

    /// The declaring class of `method`, as a JNI local reference.
    ///
    /// # Safety
    /// `method` must be a jmethodID the VM handed out.
    pub(crate) unsafe fn method_declaring_class(
        &self,
        method: jmethodID,
    ) -> Result<jclass, JvmtiErr> {
        let mut class: jclass = std::ptr::null_mut();
        check(
            "GetMethodDeclaringClass",
            jvmti_call!(self, GetMethodDeclaringClass, method, &mut class),
        )?;
        Ok(class)
    }

    /// `(first bytecode index, line)` pairs of `method`, in the order the class file lists them.
    ///
    /// # Safety
    /// `method` must be a jmethodID the VM handed out.
    pub(crate) unsafe fn line_number_table(
        &self,
        method: jmethodID,
    ) -> Result<Vec<(i64, i32)>, JvmtiErr> {
        let mut n: jint = 0;
        let mut p: *mut sys::JvmtiLineNumberEntry = std::ptr::null_mut();
        check(
            "GetLineNumberTable",
            jvmti_call!(self, GetLineNumberTable, method, &mut n, &mut p),
        )?;
        Ok(self
            .take_array(p, n)
            .into_iter()
            .map(|e| (e.start_location, e.line_number))
            .collect())
    }

    /// `jvmtiThreadState` bits of `thread`.
    ///
    /// # Safety
    /// `thread` is a live reference to a java.lang.Thread.
    pub(crate) unsafe fn thread_state(&self, thread: jobject) -> Result<jint, JvmtiErr> {
        let mut state: jint = 0;
        check(
            "GetThreadState",
            jvmti_call!(self, GetThreadState, thread, &mut state),
        )?;
        Ok(state)
    }

    /// The stack of `thread` (null: the calling thread), innermost frame first, into
    /// `frames` (room for `max` entries). Returns the number of frames stored. For another
    /// thread the VM runs a handshake with it: immediate when the thread is blocked or
    /// waiting, at its next safepoint poll when it runs Java code.
    ///
    /// # Safety
    /// `frames` is valid for writes of `max` entries; `thread` is null (then the caller is a
    /// live Java thread, in a JVMTI event callback) or a live reference to a Thread.
    pub(crate) unsafe fn stack_trace(
        &self,
        thread: jobject,
        frames: *mut sys::JvmtiFrameInfo,
        max: jint,
    ) -> Result<jint, JvmtiErr> {
        let mut n: jint = 0;
        check(
            "GetStackTrace",
            jvmti_call!(self, GetStackTrace, thread, 0, max, frames, &mut n),
        )?;
        Ok(n)
    }

    /// This environment's tag of `object` (0 when untagged).
    ///
    /// # Safety
    /// `object` is a live JNI reference.
    pub(crate) unsafe fn tag(&self, object: jobject) -> Result<i64, JvmtiErr> {
        let mut tag: i64 = 0;
        check("GetTag", jvmti_call!(self, GetTag, object, &mut tag))?;
        Ok(tag)
    }

    /// Tags `object` in this environment (0 removes the tag).
    ///
    /// # Safety
    /// `object` is a live JNI reference.
    pub(crate) unsafe fn set_tag(&self, object: jobject, tag: i64) -> Result<(), JvmtiErr> {
        check("SetTag", jvmti_call!(self, SetTag, object, tag))
    }

    /// Mean bytes between SampledObjectAlloc events (0: every allocation).
    pub(crate) fn set_heap_sampling_interval(&self, bytes: jint) -> Result<(), JvmtiErr> {
        check(
            "SetHeapSamplingInterval",
            jvmti_call!(self, SetHeapSamplingInterval, bytes),
        )
    }

    /// The name of a thread. Deletes the local references JVMTI hands back with it.
    ///
    /// # Safety
    /// `jni` must be the calling thread's JNIEnv and `thread` a live reference to a java.lang.Thread.
    pub(crate) unsafe fn thread_name(
        &self,
        jni: *mut JNIEnv,
        thread: jobject,
    ) -> Result<String, JvmtiErr> {
        // SAFETY: all-zero is a valid JvmtiThreadInfo (null pointers).
        let mut info: JvmtiThreadInfo = unsafe { std::mem::zeroed() };
        check(
            "GetThreadInfo",
            jvmti_call!(self, GetThreadInfo, thread, &mut info),
        )?;
        // SAFETY: JVMTI returned these as local references of the calling thread.
        unsafe {
            delete_local_ref(jni, info.thread_group);
            delete_local_ref(jni, info.context_class_loader);
        }
        Ok(self.take_string(info.name))
    }
}

/// HotSpot's virtual-thread mount/unmount extension events: `(jvmtiEnv*, JNIEnv*, jthread)`.
pub(crate) type ExtensionEventFn = unsafe extern "C" fn(*mut JvmtiEnv, *mut JNIEnv, jobject);

/// Deletes a JNI local reference (no-op for null).
///
/// # Safety
/// `jni` must be the calling thread's JNIEnv (or null) and `obj` a local reference it owns (or null).
pub(crate) unsafe fn delete_local_ref(jni: *mut JNIEnv, obj: jobject) {
    if jni.is_null() || obj.is_null() {
        return;
    }
    // SAFETY: `jni` is the calling thread's JNIEnv and `obj` a local reference it owns.
    unsafe {
        if let Some(f) = (**jni).DeleteLocalRef {
            f(jni, obj);
        }
    }
}

/// A new local reference to `obj` (null on failure); the caller deletes it.
///
/// # Safety
/// `jni` must be the calling thread's JNIEnv (or null) and `obj` a live reference (or null).
pub(crate) unsafe fn new_local_ref(jni: *mut JNIEnv, obj: jobject) -> jobject {
    if jni.is_null() || obj.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: as for `delete_local_ref`.
    unsafe {
        (**jni)
            .NewLocalRef
            .map_or(std::ptr::null_mut(), |f| f(jni, obj))
    }
}

/// The class of `obj`, as a local reference (null on failure).
///
/// # Safety
/// `jni` must be the calling thread's JNIEnv (or null) and `obj` a live reference (or null).
pub(crate) unsafe fn object_class(jni: *mut JNIEnv, obj: jobject) -> jclass {
    if jni.is_null() || obj.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: as for `delete_local_ref`.
    unsafe {
        (**jni)
            .GetObjectClass
            .map_or(std::ptr::null_mut(), |f| f(jni, obj))
    }
}

/// # Safety
/// `jni` must be the calling thread's JNIEnv (or null) and `obj` a live reference (or null).
pub(crate) unsafe fn new_global_ref(jni: *mut JNIEnv, obj: jobject) -> jobject {
    if jni.is_null() || obj.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: as for `delete_local_ref`.
    unsafe {
        (**jni)
            .NewGlobalRef
            .map_or(std::ptr::null_mut(), |f| f(jni, obj))
    }
}

/// # Safety
/// `jni` must be the calling thread's JNIEnv (or null) and `obj` a global reference from `new_global_ref` (or null), deleted once.
pub(crate) unsafe fn delete_global_ref(jni: *mut JNIEnv, obj: jobject) {
    if jni.is_null() || obj.is_null() {
        return;
    }
    // SAFETY: `obj` is a global reference made by `new_global_ref`.
    unsafe {
        if let Some(f) = (**jni).DeleteGlobalRef {
            f(jni, obj);
        }
    }
}

/// A new weak global reference to `obj` (null on failure): it does not keep `obj` alive,
/// and the caller deletes it with [`delete_weak_global_ref`].
///
/// # Safety
/// `jni` must be the calling thread's JNIEnv (or null) and `obj` a live reference (or null).
pub(crate) unsafe fn new_weak_global_ref(jni: *mut JNIEnv, obj: jobject) -> jobject {
    if jni.is_null() || obj.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: as for `delete_local_ref`.
    unsafe {
        (**jni)
            .NewWeakGlobalRef
            .map_or(std::ptr::null_mut(), |f| f(jni, obj))
    }
}

/// # Safety
/// `jni` must be the calling thread's JNIEnv (or null) and `weak` a reference from
/// [`new_weak_global_ref`] (or null), deleted once.
pub(crate) unsafe fn delete_weak_global_ref(jni: *mut JNIEnv, weak: jobject) {
    if jni.is_null() || weak.is_null() {
        return;
    }
    // SAFETY: `weak` is a weak global reference made by `new_weak_global_ref`.
    unsafe {
        if let Some(f) = (**jni).DeleteWeakGlobalRef {
            f(jni, weak);
        }
    }
}

/// Whether the object `weak` refers to has been collected. `IsSameObject(weak, NULL)` is
/// the JNI way to test a weak reference without using it, and HotSpot answers it without
/// the keep-alive barrier that `NewLocalRef` would trigger (a concurrent collector's marking
/// would otherwise treat the object as reachable for one more cycle).
///
/// # Safety
/// `jni` must be the calling thread's JNIEnv and `weak` a live weak global reference.
pub(crate) unsafe fn is_collected(jni: *mut JNIEnv, weak: jobject) -> bool {
    if jni.is_null() || weak.is_null() {
        return true;
    }
    // SAFETY: per this function's contract.
    unsafe {
        (**jni)
            .IsSameObject
            .is_some_and(|f| f(jni, weak, std::ptr::null_mut()) != 0)
    }
}

/// Attaches the calling native thread to the VM as a daemon (it never keeps the VM alive).
///
/// # Safety
/// `vm` must be a live JavaVM*.
pub(crate) unsafe fn attach_current_thread_as_daemon(
    vm: *mut JavaVM,
    name: &CStr,
) -> Option<*mut JNIEnv> {
    #[repr(C)]
    struct AttachArgs {
        version: jint,
        name: *const c_char,
        group: jobject,
    }
    let mut args = AttachArgs {
        version: jni::sys::JNI_VERSION_1_8,
        name: name.as_ptr(),
        group: std::ptr::null_mut(),
    };
    let mut env: *mut c_void = std::ptr::null_mut();
    // SAFETY: `vm` is live per the caller; `args` matches JavaVMAttachArgs.
    let rc = unsafe {
        (**vm).AttachCurrentThreadAsDaemon.map_or(-1, |f| {
            f(vm, &mut env, &mut args as *mut AttachArgs as *mut c_void)
        })
    };
    (rc == JNI_OK && !env.is_null()).then_some(env as *mut JNIEnv)
}

/// Detaches the calling thread.
///
/// # Safety
/// `vm` must be a live JavaVM* and the calling thread attached.
pub(crate) unsafe fn detach_current_thread(vm: *mut JavaVM) {
    // SAFETY: per the caller.
    unsafe {
        if let Some(f) = (**vm).DetachCurrentThread {
            f(vm);
        }
    }
}
