//! The two OTLP transports behind one interface.

use bytes::Bytes;

use crate::config::{OtlpConfig, Protocol};
use crate::error::{ExportError, StartError};
use otelprof_profile::otlp::ExportProfilesServiceResponse;

pub mod grpc;
pub mod http;

use grpc::GrpcTransport;
use http::{HttpClient, HttpTransport};

/// A request the server accepted, with its answer (which may report a partial success).
#[derive(Debug)]
pub struct Sent {
    pub response: ExportProfilesServiceResponse,
}

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
