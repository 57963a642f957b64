//! Profiling a JVM that is already running: the agent's attach verbs (`Agent_OnAttach`),
//! `otelprof attach` and its transport, span context at attach, the live heap on demand,
//! and repeated starts and stops.

mod agent;
mod cli;
mod context;
mod cycles;
mod live;
mod on_attach;
mod profile;
