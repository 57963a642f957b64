//! The HTTP(S) client under OTLP/HTTP: hyper with rustls (ring; no OpenSSL, so a fresh
//! machine needs no -dev packages), shared by the profile transport and the metrics exporter.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::config::OtlpConfig;
use crate::error::{ExportError, StartError};

/// Largest response body read (the OTLP response is a few bytes; an error page is not).
const MAX_RESPONSE_BYTES: usize = 1 << 20;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// Longest wait for a TCP connection, as for the gRPC channel.
pub(crate) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A small HTTP(S) client shared by the profile transport and the metrics exporter.
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
}

impl HttpClient {
    /// Must run inside the exporter's tokio runtime.
    pub(crate) fn new(config: &OtlpConfig) -> Result<HttpClient, StartError> {
        HttpClient::with(config.certificate.as_deref(), config.timeout)
    }

    /// A client trusting `certificate` too, connecting within `timeout` (at most
    /// [`CONNECT_TIMEOUT`]). Must run inside a tokio runtime.
    pub fn with(
        certificate: Option<&std::path::Path>,
        timeout: std::time::Duration,
    ) -> Result<HttpClient, StartError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        // The system's store adds corporate CAs; a machine without one still has Mozilla's.
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if let Some(path) = certificate {
            use rustls_pki_types::pem::PemObject;
            let path = path.to_path_buf();
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(&path).map_err(|e| {
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
        // A connect timeout of its own (as the gRPC channel has), so that an endpoint that
        // drops packets reads as unreachable, not as a request that got no answer: only the
        // latter spends the request's retry budget.
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout.min(CONNECT_TIMEOUT)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
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
        let response = self.client.request(request).await.map_err(|e| {
            if e.is_connect() {
                ExportError::Unreachable(error_chain(&e))
            } else {
                ExportError::Transport(error_chain(&e))
            }
        })?;
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
fn error_chain(e: &dyn std::error::Error) -> String {
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
