//! `POST /v1/opamp`: OpAMP's plain-HTTP transport. The body is an `AgentToServer` (binary
//! protobuf, `Content-Type: application/x-protobuf`, optionally gzip), the answer a
//! `ServerToAgent`. A body over [`MAX_BODY`] (compressed or inflated) gets 413, which an OpAMP
//! client must not retry; one that does not decode gets 400 with a `ServerToAgent` whose
//! `error_response` is BAD_REQUEST and says why (the spec's Bad Request), so the agents'
//! table never sees it.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use otelprof_opamp::proto::{
    AgentToServer, ServerErrorResponse, ServerErrorResponseType, ServerToAgent,
};
use prost::Message as _;

use crate::receiver::{content_coding, is_protobuf, Coding, ResponseBody};
use otelprof_opamp::server::Agents;

/// Largest request body, compressed or inflated. The spec recommends 64 MiB as a default
/// for general OpAMP; otelprof's agents send a few KiB, so a much smaller bound costs
/// nothing and keeps a hostile client's cost small.
pub const MAX_BODY: usize = 1 << 20;
/// A body must arrive within this.
const BODY_TIME: Duration = Duration::from_secs(30);

fn reply(status: StatusCode, message: &ServerToAgent) -> Response<ResponseBody> {
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

fn bad(status: StatusCode, why: String) -> Response<ResponseBody> {
    reply(
        status,
        &ServerToAgent {
            error_response: Some(ServerErrorResponse {
                r#type: ServerErrorResponseType::BadRequest as i32,
                error_message: why,
                retry_info: None,
            }),
            ..Default::default()
        },
    )
}

pub async fn handle<B>(agents: &Agents, request: Request<B>, now: i64) -> Response<ResponseBody>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if request.method() != http::Method::POST {
        let mut r = bad(
            StatusCode::METHOD_NOT_ALLOWED,
            "OpAMP over HTTP is POST (WebSocket is not served)".into(),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let text = |name| {
        request
            .headers()
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let content_type = text(header::CONTENT_TYPE).unwrap_or_default();
    if !is_protobuf(&content_type) {
        return bad(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type {:?} is not served: OpAMP over plain HTTP sends application/x-protobuf",
                otelprof_opamp::engines::shown(&content_type)
            ),
        );
    }
    let gzip = match content_coding(text(header::CONTENT_ENCODING).as_deref()) {
        Ok(c) => c == Coding::Gzip,
        Err(reason) => return bad(StatusCode::UNSUPPORTED_MEDIA_TYPE, reason),
    };
    let too_large = || {
        bad(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the message is larger than {MAX_BODY} bytes"),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return too_large();
    }
    let read = Limited::new(request.into_body(), MAX_BODY).collect();
    let body = match tokio::time::timeout(BODY_TIME, read).await {
        Err(_) => {
            return bad(
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {BODY_TIME:?}"),
            )
        }
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return too_large()
        }
        Ok(Err(e)) => {
            return bad(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    let body = if gzip {
        match otel_bridge::gzip::inflate(&body, MAX_BODY) {
            Ok(b) => Bytes::from(b),
            Err(otel_bridge::gzip::InflateError::TooLarge { .. }) => return too_large(),
            Err(e) => return bad(StatusCode::BAD_REQUEST, format!("bad gzip body: {e}")),
        }
    } else {
        body
    };
    let message = match AgentToServer::decode(body) {
        Ok(m) => m,
        Err(e) => {
            return bad(
                StatusCode::BAD_REQUEST,
                format!("the body is not an AgentToServer message: {e}"),
            )
        }
    };
    let answer = agents.exchange(message, now);
    let status = match answer.error_response.as_ref().map(|e| e.r#type) {
        Some(t) if t == ServerErrorResponseType::BadRequest as i32 => StatusCode::BAD_REQUEST,
        Some(t) if t == ServerErrorResponseType::Unavailable as i32 => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::OK,
    };
    let mut r = reply(status, &answer);
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    }
    r
}
