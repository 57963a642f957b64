//! The two OTLP transports behind one interface.

use bytes::Bytes;

use crate::config::{OtlpConfig, Protocol};
use crate::error::{ExportError, StartError};

mod grpc;
mod http;
mod http_client;
mod sent;

pub(crate) use grpc::{lazy_channel, metadata};
pub use http_client::HttpClient;
pub(crate) use sent::Sent;

use grpc::GrpcTransport;
use http::HttpTransport;

pub(crate) enum Transport {
    Grpc(GrpcTransport),
    Http(HttpTransport),
}

impl Transport {
    /// Must run inside the exporter's tokio runtime.
    pub(crate) fn new(config: &OtlpConfig, http: &HttpClient) -> Result<Transport, StartError> {
        Ok(match config.protocol {
            Protocol::Grpc => Transport::Grpc(GrpcTransport::new(config)?),
            Protocol::HttpProtobuf => Transport::Http(HttpTransport::new(config, http.clone())?),
        })
    }

    pub(crate) async fn send(&mut self, body: Bytes) -> Result<Sent, ExportError> {
        match self {
            Transport::Grpc(t) => t.send(body).await,
            Transport::Http(t) => t.send(body).await,
        }
    }
}
