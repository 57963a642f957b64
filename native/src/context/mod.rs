//! The thread-context protocol shared with the Java shim and with out-of-process readers,
//! described in docs/context-protocol.md; this folder is the native side of it.
//!
//! - [`record`]: the record's layout (OTEP 4947) and the pool it comes from, never freed;
//! - [`reader`]: reading a record in the handler, in callbacks, and from the wall-clock thread;
//! - [`tls`]: `otel_thread_ctx_v1`, the pointer out-of-process readers follow;
//! - [`endpoints`]: local root span id -> endpoint name, bound when a profile is written;
//! - [`process_context`]: the process context (OTEP 4719).
//!
//! Handing records to threads is done by the thread registry
//! ([`crate::threads::thread_registry`], [`crate::threads::virtual_threads`]) and the shim's
//! native methods ([`crate::jni_api`]); the modules here import nothing else of the crate.

pub(crate) mod endpoints;
pub(crate) mod process_context;
pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod tls;
