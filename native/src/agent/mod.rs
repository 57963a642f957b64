mod setup;
mod start_stop;

pub(crate) use setup::{on_live_start, on_load, register_current_thread};
