pub mod event_sample;
pub mod os;
pub mod sample_buffer;
pub mod signal_handler;
pub mod thread_registry;
pub mod thread_table;
pub mod timers;
pub mod virtual_threads;
