//! The receiver's limits against slow, idle and greedy clients, in one place: every number
//! here is a rule a client cannot talk its way past, and each is attacked by
//! tests/tests/hostile/receiver.rs.
//!
//! - A connection must complete its TLS handshake within [`Limits::tls_handshake_timeout`]
//!   and start its first request within [`Limits::header_read_timeout`] (HTTP/1.1 headers
//!   included: hyper's own header timeout); between requests it may idle for
//!   [`Limits::idle_timeout`]. Whatever it does, a connection that is not in a request can
//!   be closed to admit a new one once the connection limit is reached
//!   (see `connection_limit`).
//! - A request's body must arrive within [`Limits::body_timeout`] of being read.
//! - At most [`request_slots`] requests are read and checked at once, so the request bytes in
//!   memory (each body, and its inflated copy when it is gzip, at most `--max-request-size`
//!   apiece) are bounded by twice that many times the limit; HTTP/2 lets a client send at most
//!   [`H2_CONNECTION_WINDOW`] bytes ahead of what the receiver has read, on at most
//!   [`H2_MAX_STREAMS`] streams per connection.

use std::time::Duration;

/// Time limits of a connection's phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most connections open at once over both listeners; `None` derives it from the file
    /// descriptors the process may open (see `fd_limit`).
    pub max_connections: Option<usize>,
    /// From the TCP accept to the end of the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// From the connection's start (after TLS) to its first request, and for the headers of
    /// every HTTP/1.1 request. OTLP clients send a request as soon as they connect.
    pub header_read_timeout: Duration,
    /// Between two requests on one connection: longer than the agent's default period
    /// (60 s), so that an exporter keeps its connection from one export to the next; at the
    /// connection limit, idle connections are closed sooner (see `connection_limit`).
    pub idle_timeout: Duration,
    /// From the start of reading a body to its last byte. OTLP clients give up on a whole
    /// export after 10 s by default (`OTEL_EXPORTER_OTLP_TIMEOUT`): 30 s is slack for slow
    /// links, not for clients trickling bytes to hold a request open.
    pub body_timeout: Duration,
    /// How long a request waits for one of the [`request_slots`] before it is answered
    /// "busy" (retryable: gRPC UNAVAILABLE, HTTP 503).
    pub slot_wait: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: None,
            tls_handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            body_timeout: Duration::from_secs(30),
            slot_wait: Duration::from_secs(10),
        }
    }
}

/// Most requests read and checked at once, over all connections: 256 MiB of bodies at
/// `--max-request-size` (their inflated copies as much again), at least 2 (one slow client
/// cannot stop the receiver) and at most 64 (each also needs a blocking thread and a few
/// file descriptors to be stored).
pub fn request_slots(max_request_bytes: usize) -> usize {
    ((256usize << 20) / max_request_bytes.max(1)).clamp(2, 64)
}

/// HTTP/2 streams open at once on one connection (hyper's default is 200). An exporter
/// sends one request at a time, a Collector a few; more would only let one connection
/// queue work ahead of the others.
pub const H2_MAX_STREAMS: u32 = 16;

/// HTTP/2 flow-control windows: how many bytes a client may send ahead of what the
/// receiver has read, per stream and per connection. 1 MiB lets a profile of hundreds of KB
/// go in one window (the 64 KiB default makes it wait for several window updates); the
/// connection's 4 MiB caps what a connection can park in memory while its requests wait
/// for a slot.
pub const H2_STREAM_WINDOW: u32 = 1 << 20;
pub const H2_CONNECTION_WINDOW: u32 = 4 << 20;

/// Largest HTTP/2 header block (hyper's default): a token and a few OTLP headers need far
/// less.
pub const H2_MAX_HEADER_LIST: u32 = 16 << 10;

/// HTTP/2 keep-alive pings find peers that vanished without closing (a cable pulled) while
/// a request is open.
pub const H2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
pub const H2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// After a connection is asked to close (evicted, idle, or the receiver stopping): how long
/// a request in progress may still take, and how long an idle one may take to say goodbye
/// (an HTTP/2 GOAWAY a peer does not read).
pub const CLOSE_GRACE: Duration = Duration::from_secs(10);
pub const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_slots_bound_the_bytes_in_memory() {
        assert_eq!(request_slots(32 << 20), 8);
        assert_eq!(request_slots(1 << 30), 2, "one slow client never stops it");
        assert_eq!(request_slots(1 << 10), 64);
        assert_eq!(request_slots(0), 64);
        for max in [1 << 20, 4 << 20, 32 << 20, 100 << 20] {
            assert!(request_slots(max) * max <= 256 << 20);
        }
    }
}
