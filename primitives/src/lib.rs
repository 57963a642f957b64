//! Primitives several otelprof crates share, each a leaf that imports nothing of the others:
//!
//! - [`escape`]: text from outside, made safe to print on a terminal;
//! - [`units`]: the one grammar of durations and sizes people type (agent options, CLI
//!   flags, relative times);
//! - [`rng`]: SplitMix64, the seeded generator for what must be the same on every run;
//! - [`thread_pool`]: the pool of a thread, from its name;
//! - [`thread_role`]: the frames that name a thread's role instead of its stack.
//!
//! No I/O, no clock, no environment.
#![forbid(unsafe_code)]

pub mod escape;
pub mod rng;
pub mod thread_pool;
pub mod thread_role;
pub mod units;
