//! What both transports do with a request: check it, store it durably, count it. The answer
//! depends only on the outcome, so gRPC and HTTP clients are treated alike.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use otel_bridge::gzip::{self, InflateError};
use prost::Message as _;

use otelprof_store::{Signal, Store};

/// Why a request was not accepted, by what the client should do next.
#[derive(Debug)]
pub enum Rejected {
    /// Malformed: do not retry (gRPC INVALID_ARGUMENT, HTTP 400).
    Invalid(String),
    /// Bigger than the limit: do not retry as is (gRPC RESOURCE_EXHAUSTED, HTTP 413).
    TooLarge(String),
    /// Could not be stored (disk full, I/O error): retry later (gRPC UNAVAILABLE, HTTP 503).
    Storage(String),
}

/// Counters, printed in the receiver's summary lines.
#[derive(Debug, Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub profiles: AtomicU64,
    pub samples: AtomicU64,
    pub metric_requests: AtomicU64,
    pub rejected: AtomicU64,
    pub bytes_stored: AtomicU64,
}

#[derive(Debug)]
pub struct Ingest {
    pub store: Store,
    /// Largest request body and largest inflated request, in bytes.
    pub max_bytes: usize,
    pub counters: Counters,
    /// `Authorization: Bearer <token>` every request must carry, if set.
    pub token: Option<String>,
}

/// A request's protobuf bytes, and the gzip bytes it came as (stored as they are).
type Unpacked<'a> = (std::borrow::Cow<'a, [u8]>, Option<&'a [u8]>);

/// Request bytes as they arrived.
pub enum Body<'a> {
    /// Protobuf.
    Raw(&'a [u8]),
    /// gzip-compressed protobuf (HTTP `Content-Encoding: gzip`); stored as is.
    Gzip(&'a [u8]),
}

/// The token of an `Authorization: Bearer <token>` value.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|b| *b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let start = rest.iter().position(|b| *b != b' ')?;
    rest.get(start..)
}

/// Whether `authorization` (the header's value) carries `token` (any value does when there is
/// none), compared in constant time so the comparison does not leak how much of a guess was
/// right. The scheme `Bearer` is case-insensitive and followed by one or more spaces (RFC 9110
/// §11.1, §11.4); the token is compared exactly. The receiver and `serve`'s UI both check this.
pub fn token_matches(token: Option<&str>, authorization: Option<&[u8]>) -> bool {
    let Some(token) = token else {
        return true;
    };
    let Some(given) = authorization.and_then(bearer_token) else {
        return false;
    };
    let want = token.as_bytes();
    let mut diff = u8::from(given.len() != want.len());
    for (i, w) in want.iter().enumerate() {
        diff |= w ^ given.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

impl Ingest {
    /// Whether `authorization` (the header's value) carries the token ([`token_matches`]).
    pub fn authorized(&self, authorization: Option<&[u8]>) -> bool {
        token_matches(self.token.as_deref(), authorization)
    }

    fn inflate(&self, gzip: &[u8]) -> Result<Vec<u8>, Rejected> {
        gzip::inflate(gzip, self.max_bytes).map_err(|e| match e {
            InflateError::Gzip(e) => Rejected::Invalid(format!("bad gzip body: {e}")),
            InflateError::TooLarge { limit } => Rejected::TooLarge(format!(
                "the request inflates to more than {limit} bytes (receive --max-request-size)"
            )),
        })
    }

    fn too_large(&self, len: usize) -> Result<(), Rejected> {
        if len > self.max_bytes {
            return Err(Rejected::TooLarge(format!(
                "the request has {len} bytes, more than the limit of {} (receive --max-request-size)",
                self.max_bytes
            )));
        }
        Ok(())
    }

    /// The request's protobuf bytes (inflated if gzip) and its gzip bytes if any, after the
    /// size check.
    fn unpack<'a>(&self, body: Body<'a>) -> Result<Unpacked<'a>, Rejected> {
        match body {
            Body::Raw(raw) => {
                self.too_large(raw.len())?;
                Ok((std::borrow::Cow::Borrowed(raw), None))
            }
            Body::Gzip(gz) => {
                self.too_large(gz.len())?;
                Ok((std::borrow::Cow::Owned(self.inflate(gz)?), Some(gz)))
            }
        }
    }

    /// Stores a checked request as it came (the client's gzip bytes, or the protobuf); returns
    /// how many bytes were stored.
    fn keep(&self, signal: Signal, raw: &[u8], gzip: Option<&[u8]>) -> Result<u64, Rejected> {
        let now = otelprof_store::now_unix_nanos();
        match gzip {
            Some(gz) => self.store.put_gzip(signal, gz, now).map(|_| gz.len()),
            None => self.store.put_raw(signal, raw, now).map(|_| raw.len()),
        }
        .map(|n| n as u64)
        .map_err(|e| Rejected::Storage(otelprof_store::chain(&e)))
    }

    /// Checks a profiles request and stores it. Returns how many profiles it held.
    pub fn profiles(&self, body: Body<'_>) -> Result<usize, Rejected> {
        let result = self.profiles_inner(body);
        match &result {
            Ok(_) => self.counters.requests.fetch_add(1, Relaxed),
            Err(_) => self.counters.rejected.fetch_add(1, Relaxed),
        };
        result
    }

    fn profiles_inner(&self, body: Body<'_>) -> Result<usize, Rejected> {
        let (raw, gzip) = self.unpack(body)?;
        // Accepts exactly what the readers' decoder accepts (a test holds them to that), so
        // nothing is stored that could not be read back.
        let checked = otel_bridge::otlp::check_request(&raw)
            .map_err(|e| Rejected::Invalid(format!("invalid OTLP profiles request: {e}")))?;
        if checked.profiles == 0 {
            // Nothing to keep; OTLP says an empty request succeeds.
            return Ok(0);
        }
        let size = self.keep(Signal::Profiles, &raw, gzip)?;
        self.counters.bytes_stored.fetch_add(size, Relaxed);
        let c = &self.counters;
        c.profiles.fetch_add(checked.profiles as u64, Relaxed);
        c.samples.fetch_add(checked.samples as u64, Relaxed);
        Ok(checked.profiles)
    }

    /// Checks that a metrics request parses and stores it: HTTP server metrics give the
    /// request counts that per-request diffs divide by, and the agent's own metrics come
    /// to the same endpoint as its profiles.
    pub fn metrics(&self, body: Body<'_>) -> Result<(), Rejected> {
        let (raw, gzip) = self.unpack(body)?;
        let request = opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest::decode(
            raw.as_ref(),
        )
        .map_err(|e| {
            self.counters.rejected.fetch_add(1, Relaxed);
            Rejected::Invalid(format!("invalid OTLP metrics request: {e}"))
        })?;
        if request.resource_metrics.is_empty() {
            return Ok(());
        }
        self.keep(Signal::Metrics, &raw, gzip)?;
        self.counters.metric_requests.fetch_add(1, Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_the_token_is_not() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"BEARER   abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearerabc"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bearer"), None);
        let store = std::env::temp_dir().join(format!("otelprof-auth-{}", std::process::id()));
        let ingest = Ingest {
            store: Store::open(&store).unwrap(),
            max_bytes: 1 << 20,
            counters: Counters::default(),
            token: Some("Tok3n".to_owned()),
        };
        assert!(ingest.authorized(Some(b"bearer Tok3n")));
        assert!(!ingest.authorized(Some(b"Bearer tok3n")));
        assert!(!ingest.authorized(Some(b"Bearer Tok3n2")));
        assert!(!ingest.authorized(None));
        let _ = std::fs::remove_dir_all(&store);
    }
}
