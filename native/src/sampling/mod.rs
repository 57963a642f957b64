//! Taking samples: the SIGPROF handler and everything it reaches.
//!
//! - the CPU engines that send SIGPROF: [`perf_events`] (a perf `cpu-clock` event per thread,
//!   its ring read by [`perf_ring`]) and [`timers`] (a POSIX timer on each thread's CPU
//!   clock, or `setitimer`); [`cpu_clock`] starts one or the other for each thread;
//! - [`signal_handler`]: the handler (kernel frames, [`native_walk`], AsyncGetCallTrace, the
//!   span context, the buffer), with [`caller_walk`] for walks that fail at the top frame and
//!   [`wall_signal`] for the signals of the wall-clock thread;
//! - [`thread_table`]: how the handler finds the interrupted thread (by tid, without TLS),
//!   and [`thread_roles`]: the role frame it records for a thread it may not walk; the
//!   threads that fill the table live in [`crate::threads`];
//! - [`sample_buffer`]: where samples wait for the aggregator, which sleeps on its
//!   [`doorbell`] until an arena is half full or its timeout; [`event_sample`] writes the
//!   samples of JVMTI callbacks into it;
//! - [`os`]: the thread id and the clock; [`own_threads`]: the agent's own threads, never
//!   profiled.
//!
//! Every function the handler reaches documents its signal safety. Nothing here imports the
//! engines, the agent, the aggregator or the thread bookkeeping; the handler reads the module
//! set of [`crate::code_map::modules`].

pub(crate) mod caller_walk;
pub(crate) mod cpu_clock;
pub(crate) mod doorbell;
pub(crate) mod event_sample;
pub(crate) mod native_walk;
pub(crate) mod os;
pub(crate) mod own_threads;
pub(crate) mod perf_events;
pub(crate) mod perf_ring;
pub(crate) mod sample_buffer;
pub(crate) mod signal_handler;
pub(crate) mod thread_roles;
pub(crate) mod thread_table;
pub(crate) mod timers;
pub(crate) mod wall_signal;
