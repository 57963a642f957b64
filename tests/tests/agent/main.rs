//! The agent in a real JVM, read back with independent tools: CPU, wall-clock, allocation,
//! live-heap and lock accuracy against workloads whose truth is known, the CPU engines and
//! the mixed Java/native/kernel stacks, leak candidates from live snapshots, garbage
//! collection pauses in wall profiles, the whole process's CPU, the profile types and their
//! units, source lines, span context through the real OpenTelemetry SDK, and a JVM that is
//! never harmed.

mod accuracy;
mod allocation;
mod cpu_engines;
mod gc_pause;
mod leaks;
mod lines;
mod live_heap;
mod locks;
mod native_frames;
mod process_cpu;
mod profile_types;
mod safety;
mod span_context;
mod units;
mod wall_clock;
