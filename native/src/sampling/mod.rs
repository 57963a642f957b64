//! Taking samples: the SIGPROF handler and everything it reaches.
//!
//! - [`timers`]: the per-thread CPU timers (and `setitimer`) that send SIGPROF: the CPU engine;
//! - [`thread_scan`]: the thread that keeps [`native_threads`] up to date: every thread JVMTI
//!   does not announce (GC, JIT compilers, the VM thread, native libraries) found in
//!   [`process_threads`] (`/proc/self/task`), registered with its [`thread_roles`] role and a
//!   CPU timer, so that the CPU profile covers the whole process;
//! - [`signal_handler`]: the handler (AsyncGetCallTrace, the span context, the buffer), with
//!   [`caller_walk`] for walks that fail at the top frame and [`wall_signal`] for the signals
//!   of the wall-clock thread;
//! - [`thread_table`]: how the handler finds the interrupted thread (by tid, without TLS);
//!   [`thread_registry`] fills it at ThreadStart and ThreadEnd, [`running_threads`] with the
//!   threads already running when profiling starts late, [`virtual_threads`] swaps the
//!   record a carrier shows on mount and unmount;
//! - [`sample_buffer`]: where samples wait for the aggregator; [`event_sample`] writes the
//!   samples of JVMTI callbacks into it;
//! - [`os`]: the thread id and the clock; [`own_threads`]: the agent's own threads, never
//!   profiled.
//!
//! Every function the handler reaches documents its signal safety. Nothing here imports the
//! engines, the agent or the aggregator.

pub(crate) mod caller_walk;
pub(crate) mod event_sample;
pub(crate) mod native_threads;
pub(crate) mod os;
pub(crate) mod own_threads;
pub(crate) mod process_threads;
pub(crate) mod running_threads;
pub(crate) mod sample_buffer;
pub(crate) mod signal_handler;
pub(crate) mod thread_registry;
pub(crate) mod thread_roles;
pub(crate) mod thread_scan;
pub(crate) mod thread_table;
pub(crate) mod timers;
pub(crate) mod virtual_threads;
pub(crate) mod wall_signal;
