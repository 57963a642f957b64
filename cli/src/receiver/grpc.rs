//! OTLP/gRPC: `ProfilesService/Export` and `MetricsService/Export`, the services and paths
//! the Collector's `otlp` exporter calls.
//!
//! The request message is taken as raw bytes (a codec that does not parse), so the one
//! decoder every reading command uses is also the one that checks the request, and the bytes
//! are stored without encoding them again. tonic does the framing, gzip and the size limit.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf as _, Bytes};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use otelprof_profile::otlp::ExportProfilesServiceResponse;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};

use super::ingest::{Body, Ingest, Rejected};

/// Encodes the prost response, hands the request over as bytes.
struct RawCodec<R>(PhantomData<R>);

struct RawEncoder<R>(PhantomData<R>);
struct RawDecoder;

impl<R: prost::Message + Send + 'static> Codec for RawCodec<R> {
    type Encode = R;
    type Decode = Bytes;
    type Encoder = RawEncoder<R>;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        RawEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

impl<R: prost::Message> Encoder for RawEncoder<R> {
    type Item = R;
    type Error = Status;

    fn encode(&mut self, item: R, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// Which OTLP signal a service takes.
pub trait Signal: Send + Sync + 'static {
    const SERVICE: &'static str;
    const PATH: &'static str;
    type Response: prost::Message + Default + Send + 'static;
    fn ingest(ingest: &Ingest, bytes: &[u8]) -> Result<(), Rejected>;
}

pub struct Profiles;
pub struct Metrics;

impl Signal for Profiles {
    const SERVICE: &'static str =
        "opentelemetry.proto.collector.profiles.v1development.ProfilesService";
    const PATH: &'static str = otelprof_profile::otlp::GRPC_EXPORT_PATH;
    type Response = ExportProfilesServiceResponse;
    fn ingest(ingest: &Ingest, bytes: &[u8]) -> Result<(), Rejected> {
        ingest.profiles(Body::Raw(bytes)).map(|_| ())
    }
}

impl Signal for Metrics {
    const SERVICE: &'static str = "opentelemetry.proto.collector.metrics.v1.MetricsService";
    const PATH: &'static str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
    type Response = ExportMetricsServiceResponse;
    fn ingest(ingest: &Ingest, bytes: &[u8]) -> Result<(), Rejected> {
        ingest.metrics(Body::Raw(bytes))
    }
}

/// One OTLP export service.
pub struct ExportService<S> {
    ingest: Arc<Ingest>,
    signal: PhantomData<S>,
}

impl<S> Clone for ExportService<S> {
    fn clone(&self) -> Self {
        ExportService {
            ingest: self.ingest.clone(),
            signal: PhantomData,
        }
    }
}

impl<S: Signal> ExportService<S> {
    pub fn new(ingest: Arc<Ingest>) -> Self {
        ExportService {
            ingest,
            signal: PhantomData,
        }
    }
}

impl<S: Signal> NamedService for ExportService<S> {
    const NAME: &'static str = S::SERVICE;
}

pub fn status(rejected: Rejected) -> Status {
    match rejected {
        Rejected::Invalid(m) => Status::invalid_argument(m),
        Rejected::TooLarge(m) => Status::resource_exhausted(m),
        Rejected::Storage(m) => Status::unavailable(format!("cannot store the request: {m}")),
    }
}

struct Unary<S>(Arc<Ingest>, PhantomData<S>);

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'static>>;

impl<S: Signal> UnaryService<Bytes> for Unary<S> {
    type Response = S::Response;
    type Future = BoxFuture<Response<S::Response>, Status>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let ingest = self.0.clone();
        Box::pin(async move {
            let authorization = request
                .metadata()
                .get("authorization")
                .map(|v| v.as_bytes().to_vec());
            if !ingest.authorized(authorization.as_deref()) {
                return Err(Status::unauthenticated(
                    "missing or wrong token: send the header authorization: Bearer <token>",
                ));
            }
            let bytes = request.into_inner();
            // Decoding and the fsync block: keep them off the runtime's threads.
            let outcome = tokio::task::spawn_blocking(move || S::ingest(&ingest, &bytes))
                .await
                .map_err(|e| Status::internal(format!("the request handler failed: {e}")))?;
            outcome.map_err(status)?;
            Ok(Response::new(S::Response::default()))
        })
    }
}

impl<S: Signal, B> tower_service::Service<http::Request<B>> for ExportService<S>
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let ingest = self.ingest.clone();
        let path_matches = request.uri().path() == S::PATH;
        Box::pin(async move {
            if !path_matches {
                return Ok(Status::unimplemented("no such method").into_http());
            }
            let max = ingest.max_bytes;
            let mut grpc = Grpc::new(RawCodec::<S::Response>(PhantomData))
                .apply_compression_config(accept_gzip(), EnabledCompressionEncodings::default())
                .apply_max_message_size_config(Some(max), None);
            Ok(grpc.unary(Unary::<S>(ingest, PhantomData), request).await)
        })
    }
}

fn accept_gzip() -> EnabledCompressionEncodings {
    let mut e = EnabledCompressionEncodings::default();
    e.enable(CompressionEncoding::Gzip);
    e
}
