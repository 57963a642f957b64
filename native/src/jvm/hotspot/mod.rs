//! What only HotSpot can tell, read outside any API: for a Java thread that was already
//! running when profiling started (loaded into a running JVM, or started again after a stop),
//! its kernel thread id and its JNIEnv. A thread that starts while profiling runs hands both
//! over itself at JVMTI ThreadStart; an older one never will, so they are read from the JVM's
//! own structures ([`thread_map`]), located through the table HotSpot exports for its
//! Serviceability Agent ([`vm_structs`]).
//!
//! The bounds of its code cache, where native stack walks stop ([`code_cache`]), come from
//! the same table, and so does the `-XX` flag the agent sets ([`vm_flags`]).
//!
//! Everything here runs on the thread that starts profiling, never in the signal handler:
//! the handler only ever reads the thread table these ids are put in.

pub(crate) mod code_cache;
pub(crate) mod thread_map;
pub(crate) mod vm_flags;
pub(crate) mod vm_structs;
