//! `POST /v1/opamp`: OpAMP's plain-HTTP transport. The body is an `AgentToServer` (binary
//! protobuf, `Content-Type: application/x-protobuf`, optionally gzip), the answer a
//! `ServerToAgent` (`otelprof_opamp::server::exchange`). A body over [`MAX_BODY`]
//! (compressed or inflated) gets 413, which an OpAMP client must not retry; every refusal
//! is a `ServerToAgent` whose `error_response` is BAD_REQUEST and says why.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use otelprof_opamp::server::exchange::{self, bad_request, MAX_BODY};
use otelprof_opamp::server::Agents;
use prost::Message as _;

use otelprof_receiver::{content_coding, is_protobuf, Coding, ResponseBody};

/// A body must arrive within this.
const BODY_TIME: Duration = Duration::from_secs(30);

fn reply(
    status: StatusCode,
    message: &otelprof_opamp::proto::ServerToAgent,
) -> Response<ResponseBody> {
    let mut r = Response::new(ResponseBody::new(Full::new(Bytes::from(
        message.encode_to_vec(),
    ))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-protobuf"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A request refused before it reached the agents' table: the status, and why.
type Refusal = (StatusCode, String);

fn refused((status, why): Refusal) -> Response<ResponseBody> {
    let mut r = reply(status, &bad_request(why));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    r
}

fn too_large() -> Refusal {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the message is larger than {MAX_BODY} bytes"),
    )
}

pub async fn handle<B>(agents: &Agents, request: Request<B>, now: i64) -> Response<ResponseBody>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let gzip = match check_headers(&request) {
        Ok(gzip) => gzip,
        Err(refusal) => return refused(refusal),
    };
    let body = match read_body(request.into_body(), gzip).await {
        Ok(body) => body,
        Err(refusal) => return refused(refusal),
    };
    let (status, answer) = exchange::answer(agents, &body, now);
    let mut r = reply(status, &answer);
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    }
    r
}

/// The method, content type, content coding and declared length of `request`: whether its
/// body is gzip, or why it is refused.
fn check_headers<B>(request: &Request<B>) -> Result<bool, Refusal> {
    if request.method() != http::Method::POST {
        return Err((
            StatusCode::METHOD_NOT_ALLOWED,
            "OpAMP over HTTP is POST (WebSocket is not served)".into(),
        ));
    }
    let text = |name| {
        request
            .headers()
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let content_type = text(header::CONTENT_TYPE).unwrap_or_default();
    if !is_protobuf(&content_type) {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type {:?} is not served: OpAMP over plain HTTP sends application/x-protobuf",
                otelprof_opamp::engines::shown(&content_type)
            ),
        ));
    }
    let gzip = match content_coding(text(header::CONTENT_ENCODING).as_deref()) {
        Ok(c) => c == Coding::Gzip,
        Err(reason) => return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, reason)),
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(too_large());
    }
    Ok(gzip)
}

/// The body, read within [`MAX_BODY`] and [`BODY_TIME`] and inflated when `gzip`, or why
/// it is refused.
async fn read_body<B>(body: B, gzip: bool) -> Result<Bytes, Refusal>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let read = Limited::new(body, MAX_BODY).collect();
    let body = match tokio::time::timeout(BODY_TIME, read).await {
        Err(_) => {
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {BODY_TIME:?}"),
            ))
        }
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return Err(too_large())
        }
        Ok(Err(e)) => {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            ))
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    if !gzip {
        return Ok(body);
    }
    match otel_bridge::gzip::inflate(&body, MAX_BODY) {
        Ok(b) => Ok(Bytes::from(b)),
        Err(otel_bridge::gzip::InflateError::TooLarge { .. }) => Err(too_large()),
        Err(e) => Err((StatusCode::BAD_REQUEST, format!("bad gzip body: {e}"))),
    }
}
