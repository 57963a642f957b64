//! Bounded gzip inflation of untrusted input: the one helper every reader of profiles, requests
//! and stored files uses.
//!
//! A few KiB of gzip can inflate to gigabytes (a gzip bomb), so inflation stops one byte past
//! the caller's limit and fails, instead of trusting a size the input declares. Concatenated
//! gzip members are one stream (RFC 1952 §2.2, <https://www.rfc-editor.org/rfc/rfc1952>, and
//! what Go's and zlib's readers accept), so a file written in several appends reads whole.

use std::borrow::Cow;
use std::io::Read;

use flate2::read::MultiGzDecoder;

/// The first two bytes of every gzip member (RFC 1952 §2.3.1).
pub const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Largest input the decoders of this crate inflate: real profiles and export requests are a
/// few MiB; anything bigger is a gzip bomb or not a profile.
pub const MAX_INFLATED_BYTES: usize = 512 << 20;

/// Why gzip bytes could not be inflated.
#[derive(Debug, thiserror::Error)]
pub enum InflateError {
    /// Not gzip, or a corrupt or truncated stream.
    #[error("bad gzip stream")]
    Gzip(#[source] std::io::Error),
    /// The stream inflates to more than the caller allowed; nothing is returned.
    #[error("inflates to more than {limit} bytes")]
    TooLarge { limit: usize },
}

/// Whether `bytes` start like gzip (the magic number; the stream itself may still be bad).
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// `bytes` inflated if they are gzip ([`is_gzip`]), or `bytes` as they are (borrowed) if not:
/// for inputs that may come either way (files on disk, pprof profiles).
pub fn inflate_bounded(bytes: &[u8], limit: usize) -> Result<Cow<'_, [u8]>, InflateError> {
    if is_gzip(bytes) {
        inflate(bytes, limit).map(Cow::Owned)
    } else {
        Ok(Cow::Borrowed(bytes))
    }
}

/// Inflates `gzip`, which the caller knows to be gzip (e.g. an HTTP body sent with
/// `Content-Encoding: gzip`): bytes that are not gzip are an error, not passed through.
pub fn inflate(gzip: &[u8], limit: usize) -> Result<Vec<u8>, InflateError> {
    let limit_plus_one = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    // A guess for the common case (profiles compress about 4x); never trusted for the bound.
    let mut raw = Vec::with_capacity(gzip.len().saturating_mul(4).min(limit).min(16 << 20));
    MultiGzDecoder::new(gzip)
        .take(limit_plus_one)
        .read_to_end(&mut raw)
        .map_err(InflateError::Gzip)?;
    if raw.len() > limit {
        return Err(InflateError::TooLarge { limit });
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn raw_bytes_pass_through_borrowed() {
        let raw = b"\x0a\x02hi";
        assert!(matches!(inflate_bounded(raw, 1), Ok(Cow::Borrowed(b)) if b == raw));
        assert!(matches!(inflate_bounded(&[], 0), Ok(Cow::Borrowed([]))));
        // Known gzip that is not: an error, never the bytes back.
        assert!(matches!(inflate(raw, 100), Err(InflateError::Gzip(_))));
    }

    #[test]
    fn inflation_is_bounded_at_the_limit() {
        let data = vec![7u8; 10_000];
        let gz = gzip(&data);
        assert_eq!(inflate_bounded(&gz, data.len()).unwrap(), &data[..]);
        let err = inflate(&gz, data.len() - 1).unwrap_err();
        assert!(matches!(err, InflateError::TooLarge { limit } if limit == data.len() - 1));
        assert_eq!(err.to_string(), "inflates to more than 9999 bytes");
    }

    #[test]
    fn concatenated_members_are_one_stream() {
        let mut gz = gzip(b"first ");
        gz.extend(gzip(b"second"));
        assert_eq!(inflate(&gz, 100).unwrap(), b"first second");
    }

    #[test]
    fn corrupt_streams_are_errors() {
        let gz = gzip(b"some bytes to compress");
        let err = inflate_bounded(&gz[..gz.len() - 5], 100).unwrap_err();
        assert_eq!(err.to_string(), "bad gzip stream");
        assert!(std::error::Error::source(&err).is_some());
        assert!(inflate_bounded(&[0x1f, 0x8b, 0, 0], 100).is_err());
    }
}
