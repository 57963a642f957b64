//! OTLP/gRPC: `ProfilesService/Export` over tonic, with the request already encoded.
//!
//! The queue holds encoded requests, so the client sends bytes as they are (a pass-through
//! codec) instead of decoding them back into messages; tonic frames them and compresses them
//! when gzip is on.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use prost::Message;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{MetadataKey, MetadataMap};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::config::{Compression, OtlpConfig};
use crate::error::{ExportError, StartError};
use crate::transport::sent::Sent;
use otel_bridge::otlp::{ExportProfilesServiceResponse, GRPC_EXPORT_PATH};

pub(crate) struct GrpcTransport {
    client: tonic::client::Grpc<Channel>,
    headers: MetadataMap,
}

/// A channel to `url` with the configured timeouts and TLS, for the profile transport and
/// the metrics exporter alike. Must run inside the exporter's tokio runtime (the channel's
/// worker task is spawned on it). Connects lazily: an absent collector is an export
/// failure, not a start one.
pub(crate) fn lazy_channel(config: &OtlpConfig, url: &str) -> Result<Channel, StartError> {
    let bad = |e: &dyn std::fmt::Display| StartError::Endpoint {
        url: url.to_owned(),
        reason: e.to_string(),
    };
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| bad(&e))?
        .connect_timeout(config.timeout.min(super::http_client::CONNECT_TIMEOUT))
        .timeout(config.timeout)
        .tcp_nodelay(true);
    if url.starts_with("https://") {
        endpoint = endpoint
            .tls_config(tls_config(config)?)
            .map_err(|e| bad(&e))?;
    }
    Ok(endpoint.connect_lazy())
}

/// The configured headers as gRPC metadata (gRPC wants lowercase keys).
pub(crate) fn metadata(headers: &[(String, String)]) -> Result<MetadataMap, StartError> {
    let mut metadata = MetadataMap::new();
    for (k, v) in headers {
        let key = MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
            .map_err(|_| StartError::Header(k.clone()))?;
        let value = v.parse().map_err(|_| StartError::Header(k.clone()))?;
        metadata.insert(key, value);
    }
    Ok(metadata)
}

/// TLS settings: the Mozilla and system roots, plus the configured CA certificate.
fn tls_config(config: &OtlpConfig) -> Result<ClientTlsConfig, StartError> {
    let mut tls = ClientTlsConfig::new()
        .with_webpki_roots()
        .with_native_roots();
    if let Some(path) = &config.certificate {
        let pem = std::fs::read(path).map_err(|e| StartError::Certificate {
            path: path.clone(),
            source: e,
        })?;
        tls = tls.ca_certificate(Certificate::from_pem(pem));
    }
    Ok(tls)
}

impl GrpcTransport {
    /// Must run inside the exporter's tokio runtime; see [`lazy_channel`].
    pub(crate) fn new(config: &OtlpConfig) -> Result<GrpcTransport, StartError> {
        let channel = lazy_channel(config, &config.profiles_endpoint)?;
        let mut client = tonic::client::Grpc::new(channel);
        if config.compression == Compression::Gzip {
            client = client.send_compressed(CompressionEncoding::Gzip);
        }
        client = client.accept_compressed(CompressionEncoding::Gzip);
        let headers = metadata(&config.headers)?;
        Ok(GrpcTransport { client, headers })
    }

    pub(crate) async fn send(&mut self, body: Bytes) -> Result<Sent, ExportError> {
        self.client
            .ready()
            .await
            .map_err(|e| ExportError::Unreachable(e.to_string()))?;
        let mut request = tonic::Request::new(body);
        *request.metadata_mut() = self.headers.clone();
        let path = http::uri::PathAndQuery::from_static(GRPC_EXPORT_PATH);
        match self.client.unary(request, path, PassThroughCodec).await {
            Ok(response) => Ok(Sent {
                response: response.into_inner(),
            }),
            Err(status) => Err(status_to_error(&status)),
        }
    }
}

fn status_to_error(status: &tonic::Status) -> ExportError {
    // A lazy channel connects on the first call; a failed connect comes back as a status
    // whose source chain holds tonic's ConnectError.
    if has_source::<tonic::ConnectError>(status) {
        return ExportError::Unreachable(format!("{}: {}", status.code(), status.message()));
    }
    // Other transport failures (a connection that broke) are UNAVAILABLE/UNKNOWN statuses
    // with a transport source: no server answered them.
    let from_transport = std::error::Error::source(status).is_some()
        && status.metadata().is_empty()
        && matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown
        );
    if from_transport {
        return ExportError::Transport(format!("{}: {}", status.code(), status.message()));
    }
    ExportError::Grpc {
        code: status.code() as i32,
        message: status.message().to_owned(),
        retry_info: retry_delay(status.details()),
    }
}

/// Whether `error`'s source chain holds an `E`.
fn has_source<E: std::error::Error + 'static>(error: &dyn std::error::Error) -> bool {
    let mut cause = error.source();
    while let Some(c) = cause {
        if c.is::<E>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The RetryInfo delay in a status's `grpc-status-details-bin`, if any (OTLP/gRPC
/// throttling: <https://opentelemetry.io/docs/specs/otlp/#otlpgrpc-throttling>).
///
/// Not `tonic_types::StatusExt::get_details_retry_info`: it turns a negative delay into
/// zero, so a server that sends one would be retried at once, again and again. Here an
/// invalid (negative) delay counts as none, and the backoff applies.
pub(crate) fn retry_delay(details: &[u8]) -> Option<Duration> {
    let status = tonic_types::Status::decode(details).ok()?;
    let info = status
        .details
        .iter()
        .find(|d| d.type_url == tonic_types::RetryInfo::TYPE_URL)?;
    let delay = tonic_types::pb::RetryInfo::decode(info.value.as_slice())
        .ok()?
        .retry_delay?;
    Duration::try_from(delay).ok()
}

/// Sends already-encoded request bytes; decodes the response with prost.
#[derive(Clone, Copy, Debug, Default)]
struct PassThroughCodec;

impl Codec for PassThroughCodec {
    type Encode = Bytes;
    type Decode = ExportProfilesServiceResponse;
    type Encoder = PassThroughCodec;
    type Decoder = ResponseDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        PassThroughCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        ResponseDecoder
    }
}

impl Encoder for PassThroughCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        dst.put(item);
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct ResponseDecoder;

impl Decoder for ResponseDecoder {
    type Item = ExportProfilesServiceResponse;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        let bytes = src.copy_to_bytes(src.remaining());
        ExportProfilesServiceResponse::decode(bytes)
            .map(Some)
            .map_err(|e| tonic::Status::internal(format!("bad ExportProfilesServiceResponse: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_retry_info_from_status_details() {
        use prost_types::{Any, Duration as ProtoDuration};
        use tonic_types::pb::{RetryInfo, Status};
        let retry_info = |seconds, nanos| Any {
            type_url: tonic_types::RetryInfo::TYPE_URL.into(),
            value: RetryInfo {
                retry_delay: Some(ProtoDuration { seconds, nanos }),
            }
            .encode_to_vec(),
        };
        let status = Status {
            code: 8,
            message: "slow down".into(),
            details: vec![
                Any {
                    type_url: "type.googleapis.com/google.rpc.DebugInfo".into(),
                    value: vec![1, 2, 3],
                },
                retry_info(3, 500_000_000),
            ],
        };
        assert_eq!(
            retry_delay(&status.encode_to_vec()),
            Some(Duration::from_millis(3500))
        );
        assert_eq!(retry_delay(&[]), None);
        assert_eq!(retry_delay(&[0xff, 0xff]), None);
        let negative = Status {
            code: 8,
            message: String::new(),
            details: vec![retry_info(-1, 0)],
        };
        assert_eq!(retry_delay(&negative.encode_to_vec()), None);
    }
}
