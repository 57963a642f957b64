//! The two OTLP transports behind one interface.

use bytes::Bytes;

use crate::config::{OtlpConfig, Protocol};
use crate::error::{ExportError, StartError};

pub mod grpc;
pub mod http;
pub mod http_client;
pub mod sent;

use grpc::GrpcTransport;
use http::HttpTransport;
use http_client::HttpClient;
use sent::Sent;

pub enum Transport {
    Grpc(GrpcTransport),
    Http(HttpTransport),
}

impl Transport {
    /// Must run inside the exporter's tokio runtime.
    pub fn new(config: &OtlpConfig, http: &HttpClient) -> Result<Transport, StartError> {
        Ok(match config.protocol {
            Protocol::Grpc => Transport::Grpc(GrpcTransport::new(config)?),
            Protocol::HttpProtobuf => Transport::Http(HttpTransport::new(config, http.clone())?),
        })
    }

    pub async fn send(&mut self, body: Bytes) -> Result<Sent, ExportError> {
        match self {
            Transport::Grpc(t) => t.send(body).await,
            Transport::Http(t) => t.send(body).await,
        }
    }
}
