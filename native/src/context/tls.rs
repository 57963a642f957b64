//! `otel_thread_ctx_v1`, the thread-local pointer to the current thread's context record that
//! out-of-process readers follow (OTEP 4947; docs/context-protocol.md, Readers).
//!
//! The variable is defined in C (c/otel_thread_ctx.c): stable Rust cannot define an exported ELF
//! TLS symbol. Only the owning thread touches its pointer, and never from a signal handler: the
//! first access to a dynamic TLS block may allocate.

use crate::context::record::ContextRecord;

extern "C" {
    /// Sets `otel_thread_ctx_v1` for the calling thread (c/otel_thread_ctx.c).
    fn otelprof_set_thread_ctx(record: *mut ContextRecord);
    /// Reads `otel_thread_ctx_v1` of the calling thread (c/otel_thread_ctx.c).
    fn otelprof_get_thread_ctx() -> *mut ContextRecord;
}

/// Publishes `record` in the calling thread's `otel_thread_ctx_v1`.
///
/// # Safety
/// `record` is null or a pool record that outlives its publication (pool records are never
/// freed). Not for signal handlers: the first TLS access of a thread may allocate.
pub(crate) unsafe fn publish(record: *mut ContextRecord) {
    // SAFETY: a plain TLS store on the calling thread.
    unsafe { otelprof_set_thread_ctx(record) };
}

/// What `otel_thread_ctx_v1` holds on the calling thread.
///
/// # Safety
/// Not for signal handlers (see [`publish`]).
pub(crate) unsafe fn published() -> *mut ContextRecord {
    // SAFETY: a plain TLS load on the calling thread.
    unsafe { otelprof_get_thread_ctx() }
}
