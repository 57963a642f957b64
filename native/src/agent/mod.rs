//! The agent's lifecycle: [`setup`] once per process (JVMTI capabilities and callbacks, the
//! SIGPROF handler), a [`session`] per start (engines, events, threads), [`control`] for the
//! transitions between them, and [`attach`] for the verbs and replies of `Agent_OnAttach`.

pub(crate) mod attach;
pub(crate) mod control;
pub(crate) mod session;
pub(crate) mod setup;

/// Registers the calling thread if it started before the agent did (it had no ThreadStart).
///
/// # Safety
/// `env` is the calling thread's JNIEnv.
pub(crate) unsafe fn register_current_thread(env: *mut jni::sys::JNIEnv) {
    let Some(loaded) = setup::loaded() else {
        return;
    };
    let mut thread: jni::sys::jobject = std::ptr::null_mut();
    if loaded.jvmti.current_thread(&mut thread).is_ok() {
        // SAFETY: the calling thread's JNIEnv and Thread.
        unsafe {
            crate::threads::thread_registry::on_thread_start(&loaded.jvmti, env, thread);
            crate::jvm::jvmti::delete_local_ref(env, thread);
        }
    }
}
