//! OpAMP, the OpenTelemetry agent management protocol, as otelprof speaks it (plain-HTTP
//! transport): the messages ([`proto`]) and what travels in them ([`engines`], [`capture`],
//! [`settings`]), shared by the server in `otelprof serve` and the client in the agent.
//!
//! # How otelprof's requests travel in OpAMP
//!
//! - **Continuous settings** are remote configuration: the server's `AgentRemoteConfig` holds
//!   one file named [`settings::FILE`] (`text/plain`) in the agent options' own grammar, e.g.
//!   `wall=50ms,alloc=off`: the keys it names override the agent's local options, the others
//!   keep them, an empty file gives every key back to the local options. Remote config is
//!   OpAMP's desired state, which is what continuous settings are: the agent reports the
//!   hash it applied (`RemoteConfigStatus` APPLIED, or FAILED with the reason) and the
//!   server re-offers a config whose hash differs, so a lost answer heals on the next poll.
//! - **A capture** is a one-shot request, not a state: a `CustomMessage` of the custom
//!   capability [`capture::CAPABILITY`], type [`capture::START`], its data the capture's text
//!   form (`id=c-17,wall=20ms,alloc=256k,seconds=60`). The agent answers with a
//!   `CustomMessage` of type [`capture::STATUS`] (`id=c-17,state=running,ends=…`, later
//!   `state=done`, or `state=refused,reason=…`). The server offers the capture on every
//!   poll until the agent has answered for its id, and the agent acts on an id once, so a
//!   lost response neither loses nor repeats a capture.
//! - **What the agent is and does**: `AgentDescription` (service name, version and instance
//!   id identifying; host, pid, runtime and OS not), `ComponentHealth` (one component per
//!   profile type: active with its interval, available, or unavailable), `EffectiveConfig`
//!   (the [`settings::FILE`] file: the profiling settings in force), and the capabilities it
//!   accepts (`AcceptsRemoteConfig`, the capture capability).
//!
//! The agent takes profiling settings only, within [`engines`]'s bounds: never a path, an
//! endpoint, a command or code. Anything else is refused with the reason, and nothing of a
//! refused request is applied.
#![forbid(unsafe_code)]

pub mod capture;
#[cfg(feature = "client")]
pub mod client;
pub mod engines;
pub mod proto;
#[cfg(feature = "server")]
pub mod server;
pub mod settings;
