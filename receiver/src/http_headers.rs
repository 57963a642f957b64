//! The OTLP/HTTP request headers the receiver reads, matched as HTTP says they compare:
//! media types and content codings case-insensitively (RFC 9110 §8.3.1, §8.4.1), media
//! type parameters apart from the type.

/// The media type OTLP/HTTP binary requests carry.
pub const PROTOBUF: &str = "application/x-protobuf";

/// Whether a `Content-Type` value is binary protobuf. Parameters (`; charset=utf-8`, which
/// some clients add) do not change what the bytes are, so any are accepted.
pub fn is_protobuf(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case(PROTOBUF)
}

/// How a body is encoded, from its `Content-Encoding`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Identity,
    Gzip,
}

/// The coding of a `Content-Encoding` value: a comma-separated list of codings in the order
/// they were applied, where `identity` means none and `x-gzip` is `gzip` (RFC 9110
/// §8.4.1.3). One gzip at most is undone; anything else is refused with the reason.
pub fn content_coding(value: Option<&str>) -> Result<Coding, String> {
    let mut coding = Coding::Identity;
    for c in value.unwrap_or("").split(',').map(str::trim) {
        if c.is_empty() || c.eq_ignore_ascii_case("identity") {
            continue;
        }
        if (c.eq_ignore_ascii_case("gzip") || c.eq_ignore_ascii_case("x-gzip"))
            && coding == Coding::Identity
        {
            coding = Coding::Gzip;
            continue;
        }
        return Err(format!(
            "Content-Encoding {:?} is not served: use gzip or none",
            value.unwrap_or("")
        ));
    }
    Ok(coding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_compare_without_case_and_parameters() {
        for ok in [
            "application/x-protobuf",
            "Application/X-Protobuf",
            "APPLICATION/X-PROTOBUF",
            " application/x-protobuf ",
            "application/x-protobuf; charset=utf-8",
            "application/x-protobuf;charset=UTF-8",
            "Application/X-Protobuf ; proto=opentelemetry",
        ] {
            assert!(is_protobuf(ok), "{ok:?}");
        }
        for no in [
            "",
            "application/json",
            "application/x-protobuf-json",
            "application/x-protobufx",
            "text/plain; application/x-protobuf",
        ] {
            assert!(!is_protobuf(no), "{no:?}");
        }
    }

    #[test]
    fn content_codings_compare_without_case() {
        use Coding::{Gzip, Identity};
        for (value, want) in [
            (None, Identity),
            (Some(""), Identity),
            (Some("identity"), Identity),
            (Some("IDENTITY"), Identity),
            (Some("gzip"), Gzip),
            (Some("GZIP"), Gzip),
            (Some("GZip "), Gzip),
            (Some("x-gzip"), Gzip),
            (Some("identity, gzip"), Gzip),
        ] {
            assert_eq!(content_coding(value), Ok(want), "{value:?}");
        }
        for bad in ["br", "gzip, gzip", "deflate", "gzip, br", "zstd"] {
            let err = content_coding(Some(bad)).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
