//! The agent's OpAMP client: it reports who the agent is and what it does to an
//! OpAMP server (`otelprof serve`, or any server speaking the plain-HTTP transport) and hands
//! the captures and settings the server sends, once checked, to the agent through
//! [`Control`]. The wire choices are the crate's (`proto`, `capture`, `settings`).
//!
//! Module map: `config`, `control` and `identity` (leaves), `session` (the conversation, no I/O; reads
//! `control`), `poll` (the thread that carries it; reads all three).

pub mod config;
mod control;
mod identity;
mod poll;
mod session;

pub use config::OpampConfig;
pub use control::{AgentStatus, Control, TypeState};
pub use identity::{describe, instance_uid};
pub use poll::{OpampClient, MAX_BACKOFF};
pub use session::CAPABILITIES;
