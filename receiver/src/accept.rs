//! The accept loop of one listener: it takes a connection only when the connection limit
//! has room (or an idle connection to close for it), gives TLS its handshake timeout, and
//! hands each connection to its own task.
//!
//! An accept() that fails for want of resources (out of file descriptors, of memory) is said
//! once, then counted; the loop frees a descriptor by closing the longest idle connection
//! and backs off (10 ms, doubling to 1 s) instead of spinning on the error.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::connection::{self, ResponseBody};
use super::connection_limit::ConnectionLimit;
use super::limits::Limits;

const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One listener and how its connections are served.
pub struct Listener<H> {
    pub tcp: TcpListener,
    /// `grpc` or `http`, for messages.
    pub what: &'static str,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub builder: Arc<auto::Builder<TokioExecutor>>,
    pub handler: H,
}

/// Whether an accept() error concerns only the connection being accepted (it was reset
/// before it was taken): the next accept() can go at once.
fn only_that_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted)
        || e.raw_os_error() == Some(libc::EPROTO)
}

/// Accepts until `stop` turns true. `accept_error_said` is shared by the listeners, so
/// that running out of descriptors is said once, not once per listener.
pub async fn accept_loop<H, F>(
    listener: Listener<H>,
    limit: Arc<ConnectionLimit>,
    limits: Limits,
    accept_error_said: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
) where
    H: Fn(http::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = http::Response<ResponseBody>> + Send + 'static,
{
    let addr = listener
        .tcp
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let mut backoff = BACKOFF_FIRST;
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            accepted = async {
                limit.room().await;
                listener.tcp.accept().await
            } => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff = BACKOFF_FIRST;
                stream
            }
            Err(e) => {
                limit.counters.accept_errors.fetch_add(1, Relaxed);
                if only_that_connection(&e) {
                    continue;
                }
                if !accept_error_said.swap(true, Relaxed) {
                    errln!(
                        "otelprof receive: cannot accept {} connections on {addr}: {e}; \
                         closing idle connections and backing off (at most {BACKOFF_MAX:?}); \
                         further failures are counted in the summary lines",
                        listener.what
                    );
                }
                limit.evict_one_idle();
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let registered = limit.register();
        let builder = listener.builder.clone();
        let handler = listener.handler.clone();
        let Some(acceptor) = listener.tls.clone() else {
            tokio::spawn(connection::serve(
                stream, registered, builder, limits, handler,
            ));
            continue;
        };
        tokio::spawn(async move {
            let handshake =
                tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(stream));
            let tls = tokio::select! {
                done = handshake => match done {
                    Ok(Ok(tls)) => tls,
                    // A failed handshake is the client's problem; it has been told.
                    Ok(Err(_)) => return,
                    Err(_) => {
                        registered.counters().timed_out.fetch_add(1, Relaxed);
                        return;
                    }
                },
                // Closed to make room while still shaking hands.
                _ = registered.state.close.notified() => return,
            };
            connection::serve(tls, registered, builder, limits, handler).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_are_not_resource_errors() {
        let e = |code| std::io::Error::from_raw_os_error(code);
        assert!(only_that_connection(&e(libc::ECONNABORTED)));
        assert!(only_that_connection(&e(libc::EPROTO)));
        assert!(!only_that_connection(&e(libc::EMFILE)));
        assert!(!only_that_connection(&e(libc::ENFILE)));
        assert!(!only_that_connection(&e(libc::ENOBUFS)));
    }
}
