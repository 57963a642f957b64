//! OTLP/gRPC: `ProfilesService/Export` and `MetricsService/Export`, the services and paths
//! the Collector's `otlp` exporter calls.
//!
//! The request message is taken as raw bytes (a codec that does not parse), so the one
//! decoder every reading command uses is also the one that checks the request, and the bytes
//! are stored without encoding them again. tonic does the framing, gzip and the size limit.
//!
//! Before tonic reads a byte of the body, [`ExportService`] checks the token on the request's
//! headers (an unauthenticated client cannot make the receiver buffer its 30 MiB export) and
//! takes a request slot (see `request_gate`). A request over `--max-request-size` is answered
//! INVALID_ARGUMENT naming the limit: tonic's own answers (OUT_OF_RANGE for the declared
//! length, RESOURCE_EXHAUSTED once gzip inflates past it) are codes that OTLP clients retry
//! (OUT_OF_RANGE by the specification, RESOURCE_EXHAUSTED by some clients even without
//! RetryInfo), and retrying the same oversized request cannot succeed. INVALID_ARGUMENT is
//! the one "do not retry" code every OTLP client agrees on, as HTTP's 413 is.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf as _, Bytes};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use otel_bridge::otlp::ExportProfilesServiceResponse;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::server::{Grpc, UnaryService};
use tonic::{Code, Request, Response, Status};

use super::deadline_body::timed_out;
use super::ingest::{Body, Ingest, Rejected};
use super::request_gate::RequestGate;

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
    const PATH: &'static str;
    type Response: prost::Message + Default + Send + 'static;
    fn ingest(ingest: &Ingest, bytes: &[u8]) -> Result<(), Rejected>;
}

pub struct Profiles;
pub struct Metrics;

impl Signal for Profiles {
    const PATH: &'static str = otel_bridge::otlp::GRPC_EXPORT_PATH;
    type Response = ExportProfilesServiceResponse;
    fn ingest(ingest: &Ingest, bytes: &[u8]) -> Result<(), Rejected> {
        ingest.profiles(Body::Raw(bytes)).map(|_| ())
    }
}

impl Signal for Metrics {
    const PATH: &'static str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
    type Response = ExportMetricsServiceResponse;
    fn ingest(ingest: &Ingest, bytes: &[u8]) -> Result<(), Rejected> {
        ingest.metrics(Body::Raw(bytes))
    }
}

/// One OTLP export service.
pub struct ExportService<S> {
    ingest: Arc<Ingest>,
    gate: Arc<RequestGate>,
    signal: PhantomData<S>,
}

impl<S> Clone for ExportService<S> {
    fn clone(&self) -> Self {
        ExportService {
            ingest: self.ingest.clone(),
            gate: self.gate.clone(),
            signal: PhantomData,
        }
    }
}

impl<S: Signal> ExportService<S> {
    pub fn new(ingest: Arc<Ingest>, gate: Arc<RequestGate>) -> Self {
        ExportService {
            ingest,
            gate,
            signal: PhantomData,
        }
    }
}

pub fn status(rejected: Rejected) -> Status {
    match rejected {
        Rejected::Invalid(m) | Rejected::TooLarge(m) => Status::invalid_argument(m),
        Rejected::Storage(m) => Status::unavailable(format!("cannot store the request: {m}")),
    }
}

/// The message of a request over the size limit.
fn too_large(limit: usize) -> Status {
    Status::invalid_argument(format!(
        "the request is larger than the limit of {limit} bytes (receive --max-request-size); \
         it will not be accepted as it is"
    ))
}

/// tonic's answer to a request it could not read, made right for OTLP clients: the size
/// limit's codes become INVALID_ARGUMENT, a body that did not arrive in time
/// DEADLINE_EXCEEDED. Statuses from [`Unary`] (which never uses OUT_OF_RANGE or
/// RESOURCE_EXHAUSTED) pass as they are.
fn fix_decode_status(
    response: http::Response<tonic::body::Body>,
    limit: usize,
    body_timed_out: bool,
) -> http::Response<tonic::body::Body> {
    let code = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(Code::from_i32);
    match code {
        Some(Code::OutOfRange | Code::ResourceExhausted) => too_large(limit).into_http(),
        Some(Code::Ok) | None => response,
        Some(_) if body_timed_out => {
            Status::deadline_exceeded("the request body did not arrive in time: send it at once")
                .into_http()
        }
        Some(_) => response,
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
            // The token was checked on the headers, before the body was read.
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
    B: http_body::Body<Data = Bytes> + Send + 'static,
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
        let gate = self.gate.clone();
        Box::pin(async move {
            if request.uri().path() != S::PATH {
                return Ok(Status::unimplemented("no such method").into_http());
            }
            // On the headers, before tonic buffers the body.
            let authorization = request.headers().get(http::header::AUTHORIZATION);
            if !ingest.authorized(authorization.map(|v| v.as_bytes())) {
                return Ok(Status::unauthenticated(
                    "missing or wrong token: send the header authorization: Bearer <token>",
                )
                .into_http());
            }
            let slot = match gate.enter().await {
                Ok(slot) => slot,
                Err(busy) => return Ok(Status::unavailable(busy.to_string()).into_http()),
            };
            let body_timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = body_timed_out.clone();
            let request = request.map(|body| {
                // tonic turns a body error into a status of its own choosing; remember
                // whether it was the deadline.
                http_body_util::BodyExt::map_err(slot.read(body), move |e| {
                    if timed_out(e.as_ref()) {
                        flag.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    e
                })
            });
            let max = ingest.max_bytes;
            let mut grpc = Grpc::new(RawCodec::<S::Response>(PhantomData))
                .apply_compression_config(accept_gzip(), EnabledCompressionEncodings::default())
                .apply_max_message_size_config(Some(max), None);
            let response = grpc.unary(Unary::<S>(ingest, PhantomData), request).await;
            drop(slot);
            let timed_out = body_timed_out.load(std::sync::atomic::Ordering::Relaxed);
            Ok(fix_decode_status(response, max, timed_out))
        })
    }
}

/// Both export services behind one: what the gRPC listener serves.
#[derive(Clone)]
pub struct Router {
    profiles: ExportService<Profiles>,
    metrics: ExportService<Metrics>,
}

impl Router {
    pub fn new(ingest: Arc<Ingest>, gate: Arc<RequestGate>) -> Router {
        Router {
            profiles: ExportService::new(ingest.clone(), gate.clone()),
            metrics: ExportService::new(ingest, gate),
        }
    }

    pub async fn call<B>(&self, request: http::Request<B>) -> http::Response<tonic::body::Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        use tower_service::Service as _;
        let answer = match request.uri().path() {
            Profiles::PATH => self.profiles.clone().call(request).await,
            Metrics::PATH => self.metrics.clone().call(request).await,
            other => Ok(Status::unimplemented(format!(
                "no such method {other:?}: profiles go to {}",
                Profiles::PATH
            ))
            .into_http()),
        };
        match answer {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

fn accept_gzip() -> EnabledCompressionEncodings {
    let mut e = EnabledCompressionEncodings::default();
    e.enable(CompressionEncoding::Gzip);
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::time::Duration;

    use std::path::PathBuf;

    use http_body_util::Full;
    use tower_service::Service as _;

    use crate::ingest::Counters;

    /// The service over a fresh store (removed by the caller).
    fn service(token: Option<&str>, max_bytes: usize) -> (ExportService<Profiles>, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "otelprof-grpc-{}-{}",
            std::process::id(),
            max_bytes
        ));
        let ingest = Arc::new(Ingest {
            store: otelprof_store::Store::open(&dir).unwrap(),
            max_bytes,
            counters: Counters::default(),
            token: token.map(str::to_owned),
        });
        let gate = Arc::new(RequestGate::new(
            2,
            Duration::from_secs(1),
            Duration::from_secs(5),
        ));
        (ExportService::new(ingest, gate), dir)
    }

    fn grpc_status(response: &http::Response<tonic::body::Body>) -> (String, String) {
        let get = |k: &str| {
            response
                .headers()
                .get(k)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        (get("grpc-status"), get("grpc-message"))
    }

    /// A body that notes whether it was read, and never ends.
    struct Watched(Arc<AtomicBool>);

    impl http_body::Body for Watched {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
            self.0.store(true, Relaxed);
            Poll::Pending
        }
    }

    fn request<B>(body: B, authorization: Option<&str>) -> http::Request<B> {
        let mut r = http::Request::post(format!("http://x{}", Profiles::PATH))
            .header("content-type", "application/grpc");
        if let Some(a) = authorization {
            r = r.header("authorization", a);
        }
        r.body(body).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_token_is_checked_before_the_body_is_read() {
        let (mut svc, dir) = service(Some("s3cret"), 1 << 20);
        let read = Arc::new(AtomicBool::new(false));
        // A body that never ends: checking the token after reading it would never answer.
        let call = svc.call(request(Watched(read.clone()), Some("Bearer wrong")));
        let response = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("answered on the headers")
            .unwrap();
        let (code, message) = grpc_status(&response);
        assert_eq!(code, "16", "UNAUTHENTICATED: {message}");
        assert!(!read.load(Relaxed), "the body was read");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn too_large_is_invalid_argument_naming_the_limit() {
        let (mut svc, dir) = service(None, 1024);
        // A gRPC frame declaring a 1 MiB message: uncompressed, length 0x00100000.
        let frame = Bytes::from_static(&[0, 0, 0x10, 0, 0, 1, 2, 3]);
        let response = svc.call(request(Full::new(frame), None)).await.unwrap();
        let (code, message) = grpc_status(&response);
        assert_eq!(code, "3", "INVALID_ARGUMENT, not OUT_OF_RANGE: {message}");
        assert!(
            message.contains("1024") && message.contains("--max-request-size"),
            "{message}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
