//! The agent's lifecycle: [`setup`] at load (options, JVMTI capabilities and events, the
//! SIGPROF handler) with the JVMTI callbacks, [`start_stop`] at VMInit and VMDeath.

mod setup;
mod start_stop;

pub(crate) use setup::{on_live_start, on_load, register_current_thread};
