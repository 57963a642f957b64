//! The connection limit, shared by both listeners, and who makes room when it is reached.
//!
//! Rule: at most `limit` connections are open. When a new client arrives at the limit, the
//! connection idle the longest (open, but not in a request: never spoke, between requests,
//! mid-handshake or sending headers byte by byte) is closed to admit it; only when every
//! connection is in a request does the new one wait in the kernel's backlog until one ends.
//! So idle and slow-loris connections cannot lock clients out however many there are, and a
//! connection is only ever closed under a request that is still arriving if it outlives
//! the body timeout. Reaching the limit is said once; after that it is counted
//! ([`ConnectionCounters`], in the receiver's summary lines).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// What happened to connections, for the summary lines.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    /// Idle connections closed to admit a new one at the limit.
    pub evicted: AtomicU64,
    /// Times the limit was reached with every connection in a request (new clients waited).
    pub waited: AtomicU64,
    /// Connections closed for taking too long: TLS handshake, first request, idleness.
    pub timed_out: AtomicU64,
    /// Failed accept() calls (e.g. out of file descriptors).
    pub accept_errors: AtomicU64,
}

/// One open connection as the limit sees it.
#[derive(Debug)]
pub struct ConnectionState {
    /// Requests in progress on it (HTTP/2 streams count one each).
    active: AtomicU32,
    /// When it last became idle, in milliseconds since the limit's epoch.
    idle_since_ms: AtomicU64,
    /// Whether a request has started on it.
    spoke: AtomicBool,
    /// Asked to close (evicted, or the receiver is stopping).
    closing: AtomicBool,
    /// Closed to make room: no goodbye needed unless a request is in progress (an HTTP/2
    /// GOAWAY to a peer that does not read would keep the descriptor for the grace time).
    evicted: AtomicBool,
    /// Wakes the task serving the connection when it is asked to close.
    pub close: Notify,
}

impl ConnectionState {
    pub fn is_closing(&self) -> bool {
        self.closing.load(Relaxed)
    }

    pub fn in_request(&self) -> bool {
        self.active.load(Relaxed) > 0
    }

    pub fn has_spoken(&self) -> bool {
        self.spoke.load(Relaxed)
    }

    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Relaxed)
    }

    /// Asks the connection to close to make room; returns whether it was news.
    fn evict(&self) -> bool {
        self.evicted.store(true, Relaxed);
        self.ask_to_close()
    }

    fn ask_to_close(&self) -> bool {
        let first = !self.closing.swap(true, Relaxed);
        // notify_one keeps the wake-up for a task not yet waiting.
        self.close.notify_one();
        first
    }
}

/// Most connections asked to close that may hold their descriptors while new ones are
/// accepted (the descriptor reserve has room for them).
pub const MAX_CLOSING: usize = 8;

#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    connections: HashMap<u64, Arc<ConnectionState>>,
}

#[derive(Debug)]
pub struct ConnectionLimit {
    limit: usize,
    open: Mutex<Open>,
    /// A connection closed or became idle: an acceptor waiting for room may go on.
    changed: Notify,
    epoch: Instant,
    pub counters: ConnectionCounters,
    limit_said: AtomicBool,
}

/// A registered connection; dropping it frees its place.
#[derive(Debug)]
pub struct Registered {
    limit: Arc<ConnectionLimit>,
    id: u64,
    pub state: Arc<ConnectionState>,
}

/// A request in progress on a connection; dropping it ends the request.
#[derive(Debug)]
pub struct InRequest {
    limit: Arc<ConnectionLimit>,
    state: Arc<ConnectionState>,
}

impl ConnectionLimit {
    pub fn new(limit: usize) -> Arc<ConnectionLimit> {
        Arc::new(ConnectionLimit {
            limit: limit.max(1),
            open: Mutex::new(Open::default()),
            changed: Notify::new(),
            epoch: Instant::now(),
            counters: ConnectionCounters::default(),
            limit_said: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // Every mutation is one insert or remove: a poisoned lock still holds a valid map.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Connections open, including those closing.
    pub fn open(&self) -> usize {
        self.lock().connections.len()
    }

    /// How long `state` has been idle (zero while in a request).
    pub fn idle_for(&self, state: &ConnectionState) -> Duration {
        if state.in_request() {
            return Duration::ZERO;
        }
        let since = state.idle_since_ms.load(Relaxed);
        Duration::from_millis(self.now_ms().saturating_sub(since))
    }

    /// Says once that the limit was reached.
    fn say_limit_reached(&self) {
        if !self.limit_said.swap(true, Relaxed) {
            errln!(
                "otelprof receive: {} connections open, the limit (--max-connections): from now \
                 on the longest idle connection is closed for each new one, and new ones wait \
                 while all are in a request; counted in the summary lines",
                self.limit
            );
        }
    }

    /// Whether a new connection can be admitted now: below the limit, or some open
    /// connection is idle and can be closed for it; and not while [`MAX_CLOSING`]
    /// connections asked to close still hold their descriptors (a burst of clients would
    /// otherwise take descriptors faster than the closing connections give them back).
    fn has_room(&self) -> bool {
        let open = self.lock();
        let closing = open.connections.values().filter(|c| c.is_closing()).count();
        if closing >= MAX_CLOSING {
            return false;
        }
        let live = open.connections.len() - closing;
        live < self.limit
            || open
                .connections
                .values()
                .any(|c| !c.is_closing() && !c.in_request())
    }

    /// Waits until a new connection can be admitted (see [`Self::has_room`]).
    pub async fn room(&self) {
        let mut said = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between the check and the wait is
            // not missed.
            changed.as_mut().enable();
            if self.has_room() {
                return;
            }
            if !said {
                said = true;
                self.say_limit_reached();
                self.counters.waited.fetch_add(1, Relaxed);
            }
            changed.await;
        }
    }

    /// Registers a connection just accepted. At the limit, the longest idle other
    /// connection is asked to close to make room for it.
    pub fn register(self: &Arc<Self>) -> Registered {
        let state = Arc::new(ConnectionState {
            active: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(self.now_ms()),
            spoke: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            close: Notify::new(),
        });
        let (id, victim) = {
            let mut open = self.lock();
            let id = open.next_id;
            open.next_id += 1;
            open.connections.insert(id, state.clone());
            let live = open
                .connections
                .values()
                .filter(|c| !c.is_closing())
                .count();
            let victim = if live > self.limit {
                open.connections
                    .iter()
                    .filter(|(other, c)| **other != id && !c.is_closing() && !c.in_request())
                    .min_by_key(|(_, c)| c.idle_since_ms.load(Relaxed))
                    .map(|(_, c)| c.clone())
            } else {
                None
            };
            (id, victim)
        };
        if let Some(victim) = victim {
            self.say_limit_reached();
            if victim.evict() {
                self.counters.evicted.fetch_add(1, Relaxed);
            }
        }
        Registered {
            limit: self.clone(),
            id,
            state,
        }
    }

    /// Closes the longest idle connection, if any (to free a file descriptor when accept()
    /// runs out of them). Returns whether one was asked to close.
    pub fn evict_one_idle(&self) -> bool {
        let victim = self
            .lock()
            .connections
            .values()
            .filter(|c| !c.is_closing() && !c.in_request())
            .min_by_key(|c| c.idle_since_ms.load(Relaxed))
            .cloned();
        match victim {
            Some(v) => {
                if v.evict() {
                    self.counters.evicted.fetch_add(1, Relaxed);
                }
                true
            }
            None => false,
        }
    }

    /// Asks every connection to close (the receiver is stopping).
    pub fn close_all(&self) {
        for c in self.lock().connections.values() {
            c.ask_to_close();
        }
    }
}

impl Registered {
    /// Marks the start of a request; the returned guard marks its end when dropped.
    pub fn begin_request(&self) -> InRequest {
        self.state.spoke.store(true, Relaxed);
        self.state.active.fetch_add(1, Relaxed);
        InRequest {
            limit: self.limit.clone(),
            state: self.state.clone(),
        }
    }

    pub fn idle_for(&self) -> Duration {
        self.limit.idle_for(&self.state)
    }

    pub fn counters(&self) -> &ConnectionCounters {
        &self.limit.counters
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.limit.lock().connections.remove(&self.id);
        self.limit.changed.notify_waiters();
    }
}

impl Drop for InRequest {
    fn drop(&mut self) {
        self.state.idle_since_ms.store(self.limit.now_ms(), Relaxed);
        if self.state.active.fetch_sub(1, Relaxed) == 1 {
            self.limit.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_limit_the_longest_idle_connection_makes_room() {
        let limit = ConnectionLimit::new(2);
        let a = limit.register();
        std::thread::sleep(Duration::from_millis(5));
        let b = limit.register();
        let _in_b = b.begin_request();
        assert!(limit.has_room(), "a is idle: it can make room");
        let c = limit.register();
        assert!(a.state.is_closing(), "a, idle the longest, goes");
        assert!(a.state.is_evicted());
        assert!(!b.state.is_closing(), "b is in a request");
        assert!(!c.state.is_closing());
        assert_eq!(limit.counters.evicted.load(Relaxed), 1);
        drop(a);
        assert_eq!(limit.open(), 2);
    }

    #[test]
    fn closing_connections_hold_back_new_ones() {
        let limit = ConnectionLimit::new(100);
        let open: Vec<Registered> = (0..MAX_CLOSING).map(|_| limit.register()).collect();
        assert!(limit.has_room());
        limit.close_all();
        assert!(!limit.has_room(), "their descriptors are not free yet");
        drop(open);
        assert!(limit.has_room());
    }

    #[test]
    fn connections_in_a_request_are_never_evicted() {
        let limit = ConnectionLimit::new(1);
        let a = limit.register();
        let in_a = a.begin_request();
        assert!(!limit.has_room());
        assert!(!limit.evict_one_idle());
        drop(in_a);
        assert!(limit.has_room(), "a is idle again");
        assert!(a.state.has_spoken());
        assert!(limit.evict_one_idle());
        assert!(a.state.is_closing());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn room_waits_until_a_request_ends() {
        let limit = ConnectionLimit::new(1);
        let a = limit.register();
        let in_a = a.begin_request();
        let waiter = {
            let limit = limit.clone();
            tokio::spawn(async move { limit.room().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "full, and nobody idle");
        assert_eq!(limit.counters.waited.load(Relaxed), 1);
        drop(in_a);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn idle_time_counts_from_the_end_of_the_last_request() {
        let limit = ConnectionLimit::new(4);
        let a = limit.register();
        let r = a.begin_request();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(a.idle_for(), Duration::ZERO);
        drop(r);
        assert!(a.idle_for() < Duration::from_millis(25));
    }
}
