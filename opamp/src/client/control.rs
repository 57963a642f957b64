//! What the OpAMP client asks of the agent, and what it reads back: the agent implements
//! [`Control`]. The client has already checked every request against the bounds of
//! [`crate::engines`] before it calls; the agent checks what only it knows (an engine
//! this JVM cannot run, one already busy).

use crate::capture::Capture;
use crate::settings::Settings;

/// One profile type as the agent runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeState {
    /// Running, with its interval in the options' grammar (`10ms`, `512k`).
    Active(String),
    /// Not running, and could be started.
    Available,
    /// Cannot run in this JVM, for this reason.
    Unavailable(String),
}

/// What the agent is doing, reported as OpAMP health and effective config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentStatus {
    pub healthy: bool,
    /// One line, e.g. `profiling cpu 10ms, wall 50ms`.
    pub status: String,
    pub last_error: String,
    /// `cpu`, `wall`, `alloc`, `lock`, each with its state.
    pub types: Vec<(&'static str, TypeState)>,
    /// The continuous settings in force, in the options' grammar (`cpu=10ms,wall=off,…`).
    pub effective: String,
}

pub trait Control: Send + Sync + 'static {
    /// Starts `capture` now; it must stop by itself after `capture.duration`. `Err` is the
    /// reason it was not started (nothing of it runs then).
    fn capture(&self, capture: &Capture) -> Result<(), String>;
    /// Applies continuous settings; `Err` is the reason, and the previous settings stay.
    fn settings(&self, settings: &Settings) -> Result<(), String>;
    fn status(&self) -> AgentStatus;
}
