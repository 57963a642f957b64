//! The agent's OpAMP client (issue 17): it reports who the agent is and what it does to an
//! OpAMP server (`otelprof serve`, or any server speaking the plain-HTTP transport) and hands
//! the captures and settings the server sends, once checked, to the agent through
//! [`Control`]. The wire choices are `otelprof_opamp`'s.
//!
//! Module map: `config`, `control` and `identity` (leaves), `session` (the conversation, no I/O; reads
//! `control`), `client` (the thread that carries it; reads all three).

mod client;
pub mod config;
mod control;
mod identity;
mod session;

pub use client::{OpampClient, MAX_BACKOFF};
pub use config::OpampConfig;
pub use control::{AgentStatus, Control, TypeState};
pub use identity::{describe, instance_uid};
pub use session::CAPABILITIES;
