//! The server's side of OpAMP, as `otelprof serve` runs it: [`agents`], the table of the
//! agents connected, what each reported and what waits for it, and [`exchange`], a request
//! of the plain-HTTP transport answered from it. No I/O: the caller serves the transport
//! (reading bodies within its bounds) and passes the time in.

pub mod agents;
pub mod exchange;

pub use agents::Agents;
