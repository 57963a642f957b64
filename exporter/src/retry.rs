//! What to do after a failed export, and how long to wait before the next try.
//!
//! [`classify`] is a pure function of what the server (or the network) said, following the
//! OTLP specification's "Failures" sections
//! (<https://opentelemetry.io/docs/specs/otlp/#failures> for gRPC,
//! <https://opentelemetry.io/docs/specs/otlp/#failures-1> for HTTP): for gRPC, UNAVAILABLE, CANCELLED,
//! DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE and DATA_LOSS are retryable, RESOURCE_EXHAUSTED
//! only when the server sends RetryInfo (it says recovery is possible), everything else is
//! permanent; for HTTP, 429, 502, 503 and 504 are retryable and every other error status is
//! permanent. A server's RetryInfo / Retry-After is honoured (bounded by [`MAX_SERVER_DELAY`]);
//! otherwise the wait grows exponentially with jitter ([`Backoff`]).
//!
//! Retrying is bounded per request: the queue sends its oldest request first, so a request
//! that keeps failing holds back every newer one. A request is retried for at most its retry
//! budget (`OtlpConfig::retry_budget`, by default 5 minutes, as the Collector's
//! `retry_on_failure.max_elapsed_time`) after its first failure, then dropped and counted.
//! Failing to connect at all does not spend the budget ([`spends_retry_budget`]): that says
//! the endpoint is down, not that the request is bad, and the byte-bounded queue already
//! decides what an outage costs.

use std::time::Duration;

use otelprof_primitives::rng::SplitMix64;

use tonic::Code;

/// What a failed attempt means for the data it carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Try again after the backoff delay.
    Retry,
    /// The server asked to wait this long before trying again.
    Throttled(Duration),
    /// Trying again cannot help (bad request, unauthenticated, …): drop the data.
    Permanent,
}

/// What happened to one attempt, as seen by the transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No connection could be made: refused, DNS, TLS handshake, connect timeout. Nothing
    /// reached a server.
    Unreachable,
    /// Connected, but no answer came: the connection broke, or the timeout passed. The
    /// request may be why (a proxy that resets oversized uploads, one too slow to send).
    NoAnswer,
    /// A gRPC status other than OK, with the RetryInfo delay if the server sent one.
    Grpc {
        code: Code,
        retry_info: Option<Duration>,
    },
    /// An HTTP error status, with the Retry-After delay if the server sent one.
    Http {
        status: u16,
        retry_after: Option<Duration>,
    },
}

/// Longest server-requested delay we honour: a misbehaving server must not park the
/// exporter for hours (the queue keeps filling and dropping meanwhile).
pub(crate) const MAX_SERVER_DELAY: Duration = Duration::from_secs(300);

/// First wait after a failure, and the longest one (before the server's own requests).
pub(crate) const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Whether a failure spends the failed request's retry budget: every failure but
/// [`Failure::Unreachable`], which says nothing about the request.
pub(crate) fn spends_retry_budget(failure: &Failure) -> bool {
    !matches!(failure, Failure::Unreachable)
}

pub(crate) fn classify(failure: &Failure) -> Disposition {
    use Code::{
        Aborted, Cancelled, DataLoss, DeadlineExceeded, OutOfRange, ResourceExhausted, Unavailable,
    };
    let throttled = |d: Duration| Disposition::Throttled(d.min(MAX_SERVER_DELAY));
    match *failure {
        Failure::Unreachable | Failure::NoAnswer => Disposition::Retry,
        Failure::Grpc { code, retry_info } => match (code, retry_info) {
            (ResourceExhausted, Some(d)) => throttled(d),
            (ResourceExhausted, None) => Disposition::Permanent,
            (
                Cancelled | DeadlineExceeded | Aborted | OutOfRange | Unavailable | DataLoss,
                Some(d),
            ) => throttled(d),
            (
                Cancelled | DeadlineExceeded | Aborted | OutOfRange | Unavailable | DataLoss,
                None,
            ) => Disposition::Retry,
            _ => Disposition::Permanent,
        },
        Failure::Http {
            status,
            retry_after,
        } => match (status, retry_after) {
            (429 | 502 | 503 | 504, Some(d)) => throttled(d),
            (429 | 502 | 503 | 504, None) => Disposition::Retry,
            _ => Disposition::Permanent,
        },
    }
}

/// Exponential backoff with jitter: the n-th wait is uniformly drawn from
/// `[d/2, d)` where `d = min(initial × 2ⁿ, max)`, so that many agents restarted together do
/// not retry in lockstep, and no wait is shorter than half the nominal one.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
    rng: SplitMix64,
}

impl Backoff {
    /// `seed` seeds the jitter (any value).
    pub(crate) fn new(initial: Duration, max: Duration, seed: u64) -> Backoff {
        Backoff {
            initial,
            max,
            attempt: 0,
            // SplitMix64 scrambles nearby seeds apart; jitter needs no cryptographic quality.
            rng: SplitMix64(seed),
        }
    }

    /// The wait before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(30)).unwrap_or(u32::MAX);
        let nominal = self.initial.saturating_mul(factor).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = nominal / 2;
        let span = (nominal - half).as_nanos() as u64;
        let jitter = self.rng.below(span);
        half + Duration::from_nanos(jitter)
    }

    /// After a success: start from `initial` again.
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Parses an HTTP `Retry-After` value: delay-seconds or an HTTP-date (relative to `now`).
pub(crate) fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_follow_the_otlp_spec() {
        use Code::{
            DeadlineExceeded, InvalidArgument, ResourceExhausted, Unauthenticated, Unavailable,
            Unimplemented,
        };
        let g = |code, retry_info| classify(&Failure::Grpc { code, retry_info });
        assert_eq!(g(Unavailable, None), Disposition::Retry);
        assert_eq!(g(DeadlineExceeded, None), Disposition::Retry);
        assert_eq!(g(ResourceExhausted, None), Disposition::Permanent);
        assert_eq!(
            g(ResourceExhausted, Some(Duration::from_secs(3))),
            Disposition::Throttled(Duration::from_secs(3))
        );
        assert_eq!(
            g(Unavailable, Some(Duration::from_secs(2))),
            Disposition::Throttled(Duration::from_secs(2))
        );
        assert_eq!(g(InvalidArgument, None), Disposition::Permanent);
        assert_eq!(g(Unauthenticated, None), Disposition::Permanent);
        assert_eq!(g(Unimplemented, None), Disposition::Permanent);
        assert_eq!(
            g(Unavailable, Some(Duration::from_secs(100_000))),
            Disposition::Throttled(MAX_SERVER_DELAY)
        );
    }

    #[test]
    fn http_statuses_follow_the_otlp_spec() {
        let h = |status, retry_after| {
            classify(&Failure::Http {
                status,
                retry_after,
            })
        };
        for s in [429, 502, 503, 504] {
            assert_eq!(h(s, None), Disposition::Retry, "{s}");
        }
        assert_eq!(
            h(429, Some(Duration::from_secs(7))),
            Disposition::Throttled(Duration::from_secs(7))
        );
        for s in [400, 401, 403, 404, 405, 413, 415, 500, 501] {
            assert_eq!(h(s, None), Disposition::Permanent, "{s}");
        }
        assert_eq!(classify(&Failure::Unreachable), Disposition::Retry);
        assert_eq!(classify(&Failure::NoAnswer), Disposition::Retry);
    }

    #[test]
    fn only_an_unreachable_endpoint_leaves_the_retry_budget_alone() {
        assert!(!spends_retry_budget(&Failure::Unreachable));
        assert!(spends_retry_budget(&Failure::NoAnswer));
        // OUT_OF_RANGE is retryable by the spec, and what tonic answers to an oversized
        // request: the budget is what keeps it from holding the queue.
        let out_of_range = Failure::Grpc {
            code: Code::OutOfRange,
            retry_info: None,
        };
        assert_eq!(classify(&out_of_range), Disposition::Retry);
        assert!(spends_retry_budget(&out_of_range));
        let throttled = Failure::Http {
            status: 429,
            retry_after: Some(Duration::from_secs(1)),
        };
        assert!(spends_retry_budget(&throttled));
    }

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), 42);
        let delays: Vec<Duration> = (0..10).map(|_| b.next_delay()).collect();
        for (n, d) in delays.iter().enumerate() {
            let nominal = Duration::from_secs(1 << n.min(5)).min(Duration::from_secs(30));
            assert!(
                *d >= nominal / 2 && *d < nominal,
                "attempt {n}: {d:?} vs {nominal:?}"
            );
        }
        let mut other = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), 43);
        let theirs: Vec<Duration> = (0..10).map(|_| other.next_delay()).collect();
        assert_ne!(delays, theirs, "different seeds jitter differently");
        b.reset();
        assert!(b.next_delay() < Duration::from_secs(1));
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
