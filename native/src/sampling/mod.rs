//! Taking samples: the SIGPROF handler and everything it reaches.
//!
//! - [`timers`]: the per-thread CPU timers (and `setitimer`) that send SIGPROF: the CPU engine;
//! - [`signal_handler`]: the handler (AsyncGetCallTrace, the span context, the buffer), with
//!   [`caller_walk`] for walks that fail at the top frame and [`wall_signal`] for the signals
//!   of the wall-clock thread;
//! - [`thread_table`]: how the handler finds the interrupted thread (by tid, without TLS),
//!   and [`thread_roles`]: the role frame it records for a thread it may not walk; the
//!   threads that fill the table live in [`crate::threads`];
//! - [`sample_buffer`]: where samples wait for the aggregator; [`event_sample`] writes the
//!   samples of JVMTI callbacks into it;
//! - [`os`]: the thread id and the clock; [`own_threads`]: the agent's own threads, never
//!   profiled.
//!
//! Every function the handler reaches documents its signal safety. Nothing here imports the
//! engines, the agent, the aggregator or the thread bookkeeping.

pub(crate) mod caller_walk;
pub(crate) mod event_sample;
pub(crate) mod os;
pub(crate) mod own_threads;
pub(crate) mod sample_buffer;
pub(crate) mod signal_handler;
pub(crate) mod thread_roles;
pub(crate) mod thread_table;
pub(crate) mod timers;
pub(crate) mod wall_signal;
