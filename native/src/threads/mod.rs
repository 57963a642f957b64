//! Keeping the thread table ([`crate::sampling::thread_table`]) up to date: which threads the
//! sampler covers, with their names, roles and CPU timers.
//!
//! - [`thread_registry`]: Java threads, registered at JVMTI ThreadStart and removed at
//!   ThreadEnd, and their names for the `thread_name` label;
//! - [`running_threads`]: the Java threads already running when profiling starts late;
//! - [`virtual_threads`]: swaps the record a carrier shows on mount and unmount;
//! - [`thread_scan`]: the thread that keeps [`native_threads`] up to date: every thread JVMTI
//!   does not announce (GC, JIT compilers, the VM thread, native libraries) found in
//!   [`process_threads`] (`/proc/self/task`), registered with its role and a CPU timer, so
//!   that the CPU profile covers the whole process.
//!
//! None of this runs in the signal handler; it sits above [`crate::sampling`] (it arms the
//! timers and fills the table the handler reads), and nothing in `sampling` imports it.

pub(crate) mod native_threads;
pub(crate) mod process_threads;
pub(crate) mod running_threads;
pub(crate) mod thread_registry;
pub(crate) mod thread_scan;
pub(crate) mod virtual_threads;
