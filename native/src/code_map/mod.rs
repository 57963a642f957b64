//! Where native code is in this process and what it is called: the libraries mapped, with
//! their unwind tables for the signal handler's native walk ([`modules`], built and kept up
//! to date by [`module_scan`]), and the names of native and kernel frames for the aggregator
//! ([`names`], [`locations`]). The parsing itself (ELF, `.eh_frame`, kallsyms, demangling,
//! the walk) is the safe crate `otelprof_native_frames`.
//!
//! Nothing here imports the sampling, the threads or the engines; the handler reads only
//! [`modules::current`].

pub(crate) mod locations;
pub(crate) mod module_scan;
pub(crate) mod modules;
pub(crate) mod names;
