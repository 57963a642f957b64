//! Serving one accepted connection (HTTP/1.1 or HTTP/2; gRPC is HTTP/2) with hyper, within
//! the [`Limits`]: it is closed when it idles too long (before its first request, for the
//! header-read timeout; between requests, for the idle timeout) and when the connection
//! limit or the receiver's stop asks it to. Closing is graceful (an HTTP/2 GOAWAY, the end
//! of the HTTP/1.1 response in progress); a connection that does not finish in time is
//! dropped, and one closed to make room while idle is dropped at once (a client waits for
//! its descriptor).

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::connection_limit::Registered;
use super::limits::{self, Limits};

/// What the receiver answers with, on both listeners.
pub type ResponseBody = tonic::body::Body;

/// A connection builder with the receiver's protocol limits. `http2_only` for gRPC.
pub fn builder(limits: &Limits, http2_only: bool) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits::H2_MAX_STREAMS)
        .initial_stream_window_size(limits::H2_STREAM_WINDOW)
        .initial_connection_window_size(limits::H2_CONNECTION_WINDOW)
        .max_header_list_size(limits::H2_MAX_HEADER_LIST)
        .keep_alive_interval(limits::H2_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(limits::H2_KEEPALIVE_TIMEOUT);
    if http2_only {
        b = b.http2_only();
    }
    b
}

/// How often a closing connection is looked at (whether its last request ended).
const CLOSING_CHECK: Duration = Duration::from_millis(100);

/// Serves `io` until the client closes it, it idles too long, or it is asked to close.
pub async fn serve<I, H, F>(
    io: I,
    conn: Registered,
    builder: Arc<auto::Builder<TokioExecutor>>,
    limits: Limits,
    handler: H,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(http::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = http::Response<ResponseBody>> + Send + 'static,
{
    let conn = Arc::new(conn);
    let tracked = conn.clone();
    let service = hyper::service::service_fn(move |request| {
        // From the complete request head to the response: the connection is busy, and
        // never closed to make room.
        let in_request = tracked.begin_request();
        let handler = handler.clone();
        async move {
            let response = handler(request).await;
            drop(in_request);
            Ok::<_, Infallible>(response)
        }
    });
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let mut closing_since: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let wake = match closing_since {
            Some(_) => now + CLOSING_CHECK,
            None => {
                let allowed = if conn.state.has_spoken() {
                    limits.idle_timeout
                } else {
                    limits.header_read_timeout
                };
                now + allowed.saturating_sub(conn.idle_for())
            }
        };
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = conn.state.close.notified(), if closing_since.is_none() => {
                if conn.state.is_evicted() && !conn.state.in_request() {
                    // Closed to make room for a client waiting now: at once.
                    return;
                }
                connection.as_mut().graceful_shutdown();
                closing_since = Some(Instant::now());
            }
            _ = tokio::time::sleep_until(wake) => match closing_since {
                None => {
                    let allowed = if conn.state.has_spoken() {
                        limits.idle_timeout
                    } else {
                        limits.header_read_timeout
                    };
                    if !conn.state.in_request() && conn.idle_for() >= allowed {
                        conn.counters().timed_out.fetch_add(1, Relaxed);
                        connection.as_mut().graceful_shutdown();
                        closing_since = Some(Instant::now());
                    }
                }
                Some(since) => {
                    let grace = if conn.state.in_request() {
                        limits::CLOSE_GRACE
                    } else {
                        limits::IDLE_CLOSE_GRACE
                    };
                    if since.elapsed() >= grace {
                        // Dropping the connection closes the socket.
                        return;
                    }
                }
            }
        }
    }
}
