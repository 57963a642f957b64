//! OpAMP: the hand-written messages, the agent's client and `serve`'s server against the
//! official Python classes, and real JVMs managed by `serve`.

mod agent;
mod client;
mod messages;
mod opamp_support;
mod server;
