//! OTLP/HTTP: `POST /v1development/profiles` with a binary protobuf body, over hyper with
//! rustls (ring; no OpenSSL, so a fresh machine needs no -dev packages).

use std::io::Write;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prost::Message;

use crate::config::{Compression, OtlpConfig};
use crate::error::{ExportError, StartError};
use crate::retry::parse_retry_after;
use crate::transport::Sent;
use otelprof_profile::otlp::ExportProfilesServiceResponse;

/// Largest response body read (the OTLP response is a few bytes; an error page is not).
const MAX_RESPONSE_BYTES: usize = 1 << 20;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A small HTTP(S) client shared by the profile transport and the metrics exporter.
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
}

impl HttpClient {
    /// Must run inside the exporter's tokio runtime.
    pub fn new(config: &OtlpConfig) -> Result<HttpClient, StartError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        // The system's store adds corporate CAs; a machine without one still has Mozilla's.
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if let Some(path) = &config.certificate {
            use rustls_pki_types::pem::PemObject;
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(path).map_err(|e| {
                StartError::Certificate {
                    path: path.clone(),
                    source: std::io::Error::other(e.to_string()),
                }
            })?;
            for cert in certs {
                let cert = cert.map_err(|e| StartError::Certificate {
                    path: path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                roots.add(cert).map_err(|e| StartError::Certificate {
                    path: path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| StartError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(HttpClient { client })
    }

    /// Sends `request`, reading at most [`MAX_RESPONSE_BYTES`] of the answer.
    pub async fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, ExportError> {
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, Full::new(body));
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| ExportError::Transport(describe(&e)))?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| ExportError::Transport(format!("reading the response: {e}")))?
            .to_bytes();
        Ok(http::Response::from_parts(parts, body))
    }
}

/// The error and its causes on one line (hyper's top-level message alone says little).
fn describe(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// opentelemetry-otlp's metrics exporter sends through the same client.
#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for HttpClient {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        self.send(request).await.map_err(|e| e.to_string().into())
    }
}

pub struct HttpTransport {
    client: HttpClient,
    uri: http::Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    gzip: bool,
}

impl HttpTransport {
    pub fn new(config: &OtlpConfig, client: HttpClient) -> Result<HttpTransport, StartError> {
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

    pub async fn send(&mut self, body: Bytes) -> Result<Sent, ExportError> {
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
pub fn header_list(
    pairs: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, StartError> {
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
    #[derive(Clone, PartialEq, prost::Message)]
    struct Status {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    if let Ok(s) = Status::decode(body) {
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn error_text_prefers_rpc_status() {
        #[derive(Clone, PartialEq, prost::Message)]
        struct Status {
            #[prost(int32, tag = "1")]
            code: i32,
            #[prost(string, tag = "2")]
            message: String,
        }
        let body = Status {
            code: 3,
            message: "bad profile".into(),
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
