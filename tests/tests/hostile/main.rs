//! Hostile input against the real binaries and the store: the CLI and the agent, the
//! receiver's limits, the store's readers and writers, and the OTLP decoder's conformance to
//! the official parser.

mod cli;
mod conformance;
mod receiver;
mod store;
