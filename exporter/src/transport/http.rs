//! OTLP/HTTP: `POST /v1development/profiles` with a binary protobuf body, over
//! [`HttpClient`].

use std::io::Write;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use prost::Message;

use crate::config::{Compression, OtlpConfig};
use crate::error::{ExportError, StartError};
use crate::retry::parse_retry_after;
use crate::transport::http_client::HttpClient;
use crate::transport::sent::Sent;
use otel_bridge::otlp::ExportProfilesServiceResponse;

pub(crate) struct HttpTransport {
    client: HttpClient,
    uri: http::Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    gzip: bool,
}

impl HttpTransport {
    pub(crate) fn new(
        config: &OtlpConfig,
        client: HttpClient,
    ) -> Result<HttpTransport, StartError> {
        let uri: http::Uri =
            config
                .profiles_endpoint
                .parse()
                .map_err(|e: http::uri::InvalidUri| StartError::Endpoint {
                    url: config.profiles_endpoint.clone(),
                    reason: e.to_string(),
                })?;
        let headers = header_list(&config.headers)?;
        Ok(HttpTransport {
            client,
            uri,
            headers,
            gzip: config.compression == Compression::Gzip,
        })
    }

    pub(crate) async fn send(&mut self, body: Bytes) -> Result<Sent, ExportError> {
        let body = if self.gzip { gzip(&body) } else { body };
        let mut builder =
            http::Request::post(self.uri.clone()).header(CONTENT_TYPE, "application/x-protobuf");
        if self.gzip {
            builder = builder.header(CONTENT_ENCODING, "gzip");
        }
        for (k, v) in &self.headers {
            builder = builder.header(k, v);
        }
        let request = builder
            .body(body)
            .map_err(|e| ExportError::Transport(format!("building the request: {e}")))?;
        let response = self.client.send(request).await?;
        let status = response.status();
        if status.is_success() {
            // An empty body is a full success (no partial_success).
            let response =
                ExportProfilesServiceResponse::decode(response.into_body()).unwrap_or_default();
            return Ok(Sent { response });
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        Err(ExportError::Http {
            status: status.as_u16(),
            message: error_text(response.body()),
            retry_after,
        })
    }
}

/// Header list from configured key/value pairs.
fn header_list(pairs: &[(String, String)]) -> Result<Vec<(HeaderName, HeaderValue)>, StartError> {
    pairs
        .iter()
        .map(|(k, v)| {
            let name =
                HeaderName::from_bytes(k.as_bytes()).map_err(|_| StartError::Header(k.clone()))?;
            let value = HeaderValue::from_str(v).map_err(|_| StartError::Header(k.clone()))?;
            Ok((name, value))
        })
        .collect()
}

/// The gist of an error body: a `google.rpc.Status` message (what OTLP/HTTP servers send),
/// else the start of the text.
fn error_text(body: &[u8]) -> String {
    if let Ok(s) = tonic_types::Status::decode(body) {
        if !s.message.is_empty() {
            return s.message;
        }
    }
    let text = String::from_utf8_lossy(body);
    text.chars().take(200).collect::<String>().trim().to_owned()
}

fn gzip(raw: &[u8]) -> Bytes {
    let mut e = flate2::write::GzEncoder::new(
        Vec::with_capacity(raw.len() / 3 + 64),
        flate2::Compression::default(),
    );
    match e.write_all(raw).and_then(|()| e.finish()) {
        Ok(v) => Bytes::from(v),
        // Writing to a Vec cannot fail; were it to, the caller would send a body that does
        // not match its Content-Encoding, so send an empty (rejected, logged) one instead.
        Err(_) => Bytes::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_prefers_rpc_status() {
        let body = tonic_types::Status {
            code: 3,
            message: "bad profile".into(),
            details: Vec::new(),
        }
        .encode_to_vec();
        assert_eq!(error_text(&body), "bad profile");
        assert_eq!(error_text(b"  Bad Request\n"), "Bad Request");
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let z = gzip(b"hello hello hello");
        let mut out = String::new();
        flate2::read::GzDecoder::new(&z[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "hello hello hello");
    }
}
