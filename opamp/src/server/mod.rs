//! The server's side of OpAMP, as `otelprof serve` runs it: [`agents`], the table of the
//! agents connected, what each reported and what waits for it. No I/O: the caller serves
//! the transport and passes the time in.

pub mod agents;

pub use agents::Agents;
