//! `otelprof attach`: HotSpot's dynamic attach protocol, spoken without any JDK tool, to load
//! and drive the otelprof agent in a running JVM (and to run diagnostic commands).
//!
//! From the leaves up:
//! - [`sys`]: the system calls `std` lacks (pidfd, `openat2` inside a root, `SO_PEERCRED`,
//!   effective ids); all of the module's `unsafe` is there;
//! - [`procfs`], [`perfdata`]: what `/proc/PID/*` and HotSpot's performance-data file say
//!   (parsers, no I/O);
//! - [`options`]: the agent options, checked before the JVM is touched;
//! - [`protocol`]: the wire format of requests and responses;
//! - [`reply`]: the agent's reply file format;
//! - [`creds`]: acting as the JVM's user when root;
//! - [`target`]: the process, checked (exists, ours to attach, a HotSpot JVM) and pinned by
//!   descriptors;
//! - [`tmpdir`]: the JVM's `/tmp`, where files for it are made and checked;
//! - [`listener`]: finding or starting the JVM's attach listener and connecting to it;
//! - [`verbs`]: start, stop, status, dump and jcmd, made of the above.

mod creds;
mod error;
mod listener;
mod options;
mod perfdata;
mod procfs;
mod protocol;
mod reply;
mod sys;
mod target;
mod tmpdir;
mod verbs;

pub use error::AttachError;
pub use verbs::{run, AgentFiles, Outcome, Verb};
