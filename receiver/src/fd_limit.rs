//! File descriptors: every connection holds one, and so does every request being stored
//! (the file written, the directory fsynced). When accept() takes the last one, the store
//! cannot write what it acknowledged, and accept() itself fails in a loop ("Too many open
//! files"). So the receiver raises its soft limit to the hard one at start (the soft limit
//! is often 1024 while the hard one allows far more) and keeps the connection limit below
//! what is left after a reserve for everything else.

/// Descriptors kept for everything but client connections: stdio, the runtime's epoll and
/// wakers, the listeners, the store's directories, the few connections closing while new
/// ones are accepted (`connection_limit::MAX_CLOSING`, 8), one connection per listener
/// accepted beyond the limit; plus [`FDS_PER_REQUEST`] (the file written, its directory, a
/// margin) for each request that may be stored at once.
pub const RESERVED_FDS: u64 = 32;
pub const FDS_PER_REQUEST: u64 = 4;

/// Fewest connections the receiver serves, however low the descriptor limit.
pub const MIN_CONNECTIONS: usize = 16;

/// Most connections by default: beyond this, memory (buffers per connection), not
/// descriptors, is what runs out; a bigger fleet sends through a Collector.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the soft limit in force
/// afterwards. Raising may fail (a hard limit of "unlimited" that the kernel caps lower);
/// the limit in force is returned all the same.
pub fn raise_nofile() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid, exclusively borrowed `limit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        // Linux refuses more than fs.nr_open (2^20 by default), which "unlimited" exceeds.
        let want = if limit.rlim_max == libc::RLIM_INFINITY {
            1 << 20
        } else {
            limit.rlim_max
        };
        let raised = libc::rlimit {
            rlim_cur: want.max(limit.rlim_cur),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the valid `raised`; lowering or raising the soft
        // limit within the hard one is allowed to any process.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(raised.rlim_cur);
        }
    }
    Ok(limit.rlim_cur)
}

/// The most connections `nofile` descriptors allow when `requests` requests may be stored
/// at once: what is left after the reserve, and at least [`MIN_CONNECTIONS`].
pub fn connections_allowed(nofile: u64, requests: usize) -> usize {
    let reserve = RESERVED_FDS + FDS_PER_REQUEST * requests as u64;
    let left = usize::try_from(nofile.saturating_sub(reserve)).unwrap_or(usize::MAX);
    left.max(MIN_CONNECTIONS)
}

/// The default connection limit: [`connections_allowed`], at most
/// [`DEFAULT_MAX_CONNECTIONS`].
pub fn default_connections(nofile: u64, requests: usize) -> usize {
    connections_allowed(nofile, requests).min(DEFAULT_MAX_CONNECTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_leave_a_reserve() {
        // 256 descriptors, 8 requests at once: 32 + 32 kept back.
        assert_eq!(default_connections(256, 8), 192);
        assert_eq!(default_connections(1024, 8), 960);
        assert_eq!(default_connections(1 << 20, 8), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(connections_allowed(1 << 20, 8), (1 << 20) - 64);
        assert_eq!(default_connections(40, 8), MIN_CONNECTIONS);
        assert_eq!(default_connections(0, 64), MIN_CONNECTIONS);
    }

    #[test]
    fn raising_keeps_at_least_the_current_limit() {
        let mut before = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the valid `before`.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) };
        assert_eq!(rc, 0);
        let now = raise_nofile().unwrap();
        assert!(now >= before.rlim_cur, "{now} < {}", before.rlim_cur);
        assert!(before.rlim_max == libc::RLIM_INFINITY || now <= before.rlim_max);
    }
}
