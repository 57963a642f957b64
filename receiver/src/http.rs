//! OTLP/HTTP: `POST /v1development/profiles` and `POST /v1/metrics` with binary protobuf
//! bodies, optionally gzip (`Content-Encoding: gzip`), as the Collector's `otlphttp`
//! exporter and the agent send them. Errors carry a `google.rpc.Status` body with the
//! reason, as the OTLP/HTTP specification asks.

use std::sync::Arc;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use prost::Message as _;

use super::deadline_body::timed_out;
use super::http_headers::{content_coding, is_protobuf, Coding, PROTOBUF};
use super::ingest::{Body, Ingest, Rejected};
use super::request_gate::RequestGate;

/// `google.rpc.Status`, the error body of OTLP/HTTP.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

fn reply(status: StatusCode, grpc_code: i32, message: &str) -> Response<Full<Bytes>> {
    let body = RpcStatus {
        code: grpc_code,
        message: message.to_owned(),
    }
    .encode_to_vec();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(PROTOBUF),
    );
    response
}

fn success() -> Response<Full<Bytes>> {
    // An empty Export*ServiceResponse encodes to no bytes.
    let mut response = Response::new(Full::new(Bytes::new()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(PROTOBUF),
    );
    response
}

/// gRPC status codes used in the error bodies.
const INVALID_ARGUMENT: i32 = 3;
const DEADLINE_EXCEEDED: i32 = 4;
const NOT_FOUND: i32 = 5;
const UNIMPLEMENTED: i32 = 12;
const UNAVAILABLE: i32 = 14;
const UNAUTHENTICATED: i32 = 16;

fn rejected(r: Rejected) -> Response<Full<Bytes>> {
    match r {
        Rejected::Invalid(m) => reply(StatusCode::BAD_REQUEST, INVALID_ARGUMENT, &m),
        // The gRPC code gRPC clients get for the same request (see grpc.rs): do not retry.
        Rejected::TooLarge(m) => reply(StatusCode::PAYLOAD_TOO_LARGE, INVALID_ARGUMENT, &m),
        Rejected::Storage(m) => unavailable(&format!("cannot store the request: {m}")),
    }
}

/// 503 with a Retry-After: OTLP clients retry it.
fn unavailable(message: &str) -> Response<Full<Bytes>> {
    let mut r = reply(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE, message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    r
}

/// What the request's head says: whether it is profiles (else metrics) and gzip, or the
/// answer that refuses it. Nothing of the body is read yet, so a refused client (a wrong
/// token above all) costs no more than its headers.
fn check_head<B>(
    ingest: &Ingest,
    request: &Request<B>,
) -> Result<(bool, bool), Box<Response<Full<Bytes>>>> {
    let profiles = match request.uri().path() {
        otel_bridge::otlp::HTTP_PATH => true,
        "/v1/metrics" => false,
        other => {
            return Err(Box::new(reply(
                StatusCode::NOT_FOUND,
                NOT_FOUND,
                &format!(
                    "no such path {other:?}: profiles go to {} (metrics to /v1/metrics)",
                    otel_bridge::otlp::HTTP_PATH
                ),
            )))
        }
    };
    if request.method() != Method::POST {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            UNIMPLEMENTED,
            "only POST is served here",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return Err(Box::new(r));
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    if !ingest.authorized(authorization.as_deref()) {
        return Err(Box::new(reply(
            StatusCode::UNAUTHORIZED,
            UNAUTHENTICATED,
            "missing or wrong token: send the header Authorization: Bearer <token>",
        )));
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if !is_protobuf(&content_type) {
        return Err(Box::new(reply(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            INVALID_ARGUMENT,
            &format!("Content-Type {content_type:?} is not served: send {PROTOBUF} (OTLP/JSON is not supported)"),
        )));
    }
    let encoding = request
        .headers()
        .get(header::CONTENT_ENCODING)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let gzip = match content_coding(encoding.as_deref()) {
        Ok(coding) => coding == Coding::Gzip,
        Err(reason) => {
            return Err(Box::new(reply(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                INVALID_ARGUMENT,
                &reason,
            )))
        }
    };
    let declared_too_large = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > ingest.max_bytes);
    if declared_too_large {
        return Err(Box::new(rejected(Rejected::TooLarge(format!(
            "the body is larger than the limit of {} bytes (receive --max-request-size)",
            ingest.max_bytes
        )))));
    }
    Ok((profiles, gzip))
}

/// Most of a refused request's body read (and dropped) before answering, and for how long.
const DRAIN_MAX: u64 = 64 << 10;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads what is left of a refused request's body when it is small. A server that closes
/// a connection with bytes unread makes the kernel reset it, and the client may lose the
/// answer (Python's urllib does); a large body is left unread, the connection closed: it is
/// not worth the receiver's time.
async fn drain_small<B>(body: B)
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.size_hint().upper().is_some_and(|n| n <= DRAIN_MAX) {
        let read = Limited::new(body, DRAIN_MAX as usize).collect();
        let _ = tokio::time::timeout(DRAIN_TIME, read).await;
    }
}

/// Serves one request.
pub async fn handle<B>(
    ingest: Arc<Ingest>,
    gate: Arc<RequestGate>,
    request: Request<B>,
) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (profiles, gzip) = match check_head(&ingest, &request) {
        Ok(checked) => checked,
        Err(refusal) => {
            drain_small(request.into_body()).await;
            return *refusal;
        }
    };
    let limit = ingest.max_bytes;
    let slot = match gate.enter().await {
        Ok(slot) => slot,
        Err(busy) => return unavailable(&busy.to_string()),
    };
    let body = match Limited::new(slot.read(request.into_body()), limit)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return rejected(Rejected::TooLarge(format!(
                    "the body is larger than the limit of {limit} bytes (receive --max-request-size)"
                )));
            }
            if timed_out(e.as_ref()) {
                return reply(
                    StatusCode::REQUEST_TIMEOUT,
                    DEADLINE_EXCEEDED,
                    &e.to_string(),
                );
            }
            return reply(
                StatusCode::BAD_REQUEST,
                INVALID_ARGUMENT,
                &format!("cannot read the body: {e}"),
            );
        }
    };
    // The slot is held until the request is stored: it also bounds the writes at once.
    let outcome = tokio::task::spawn_blocking(move || {
        let body = if gzip {
            Body::Gzip(&body)
        } else {
            Body::Raw(&body)
        };
        if profiles {
            ingest.profiles(body).map(|_| ())
        } else {
            ingest.metrics(body)
        }
    })
    .await;
    drop(slot);
    match outcome {
        Ok(Ok(())) => success(),
        Ok(Err(r)) => rejected(r),
        Err(e) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            UNAVAILABLE,
            &format!("the request handler failed: {e}"),
        ),
    }
}
