//! `otelprof serve`'s OpAMP server: agents poll `POST /v1/opamp` ([`exchange`], OpAMP's
//! plain-HTTP transport) on the UI's listener, which gives them its TLS, connection limits
//! and `--token`; [`Agents`] (the opamp crate's, no I/O) keeps what they reported and what
//! waits for them; [`api`] serves that table as JSON to the Instances view and `otelprof
//! capture`. What travels in the messages is `otelprof_opamp`'s.
//!
//! Module map: `exchange` and `api` over the agents' table; this file routes.

mod api;
mod exchange;

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;

use otelprof_receiver::ResponseBody;

pub use otelprof_opamp::server::Agents;

/// The OpAMP path (the spec's default).
pub const PATH: &str = "/v1/opamp";

/// Whether `path` is served here rather than by the UI.
pub fn serves(path: &str) -> bool {
    path == PATH || path == "/api/agents" || path.starts_with("/api/agents/")
}

fn now() -> i64 {
    otelprof_store::now_unix_nanos()
}

/// Serves a request for which [`serves`] is true; the caller has checked the token and host.
pub async fn handle<B>(agents: Arc<Agents>, request: Request<B>) -> Response<ResponseBody>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if request.uri().path() == PATH {
        return exchange::handle(&agents, request, now()).await;
    }
    let (status, json) = api::handle(&agents, request, now()).await;
    let mut r = Response::new(ResponseBody::new(Full::new(Bytes::from(json.to_string()))));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// Refusals before routing (token, host), in the form the path's clients read.
pub fn refuse(path: &str, status: StatusCode, message: &str) -> Response<ResponseBody> {
    let (body, content_type) = if path == PATH {
        use prost::Message as _;
        let m = otelprof_opamp::server::exchange::bad_request(message.to_owned());
        (m.encode_to_vec(), "application/x-protobuf")
    } else {
        (
            serde_json::json!({ "error": message })
                .to_string()
                .into_bytes(),
            "application/json",
        )
    };
    let mut r = Response::new(ResponseBody::new(Full::new(Bytes::from(body))));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
