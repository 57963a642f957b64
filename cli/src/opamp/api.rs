//! The JSON API over the agents' table, for the Instances view and `otelprof capture`:
//!
//! - `GET /api/agents`: the connected agents, each with what it reported and its captures;
//! - `POST /api/agents/capture` `{"instance": ID, "wall": "20ms", "alloc": "256k", "seconds":
//!   60}` (any of `cpu`, `wall`, `alloc`, `lock`): queues a capture, answers `{"id": …}`;
//! - `POST /api/agents/settings` `{"instance": ID, "settings": "wall=50ms,alloc=off"}`.
//!
//! `ID` is the agent's OpAMP instance uid or its `service.instance.id`. A POST must say
//! `Content-Type: application/json`: a page elsewhere cannot send that without a CORS
//! preflight, which this server never grants, so it cannot start captures through a
//! visitor's browser.

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Limited};
use serde_json::{json, Value};

use otelprof_opamp::capture::{self, State};
use otelprof_opamp::engines::{self, Engines, Refused};

use otelprof_opamp::server::agents::{uid_text, Agent, Agents, ApiError, CaptureEntry};

/// Largest JSON body read.
const MAX_JSON: usize = 64 << 10;

/// An answer: status and JSON.
pub type Answer = (StatusCode, Value);

fn fail(status: StatusCode, message: &str) -> Answer {
    (status, json!({ "error": message }))
}

fn capture_json(c: &CaptureEntry) -> Value {
    let (ends, reason) = match &c.state {
        Some(State::Running { ends }) => (Some(*ends), None),
        Some(State::Refused { reason } | State::Failed { reason }) => (None, Some(reason.clone())),
        _ => (None, None),
    };
    json!({
        "id": c.capture.id,
        "request": c.capture.engines.text(),
        "types": c.capture.engines.types(),
        "seconds": c.capture.duration.as_secs(),
        "state": c.state_name(),
        "ends": ends,
        "reason": reason,
        "created": c.created,
    })
}

fn agent_json(a: &Agent) -> Value {
    let map = |v: &[(String, String)]| {
        v.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<serde_json::Map<_, _>>()
    };
    let health = a.health.as_ref().map(|h| {
        json!({
            "healthy": h.healthy,
            "status": h.status,
            "last_error": h.last_error,
            "start_time": h.start_time,
            "components": h.components.iter().map(|(k, (ok, status, err))| {
                (k.clone(), json!({"healthy": ok, "status": status, "last_error": err}))
            }).collect::<serde_json::Map<_, _>>(),
        })
    });
    let remote = a.remote_status.as_ref().map(
        |(_, status, err)| json!({"status": format!("{status:?}").to_lowercase(), "error": err}),
    );
    json!({
        "instance_uid": uid_text(&a.uid),
        "identifying": map(&a.identifying),
        "non_identifying": map(&a.non_identifying),
        "capabilities": a.capabilities,
        "custom_capabilities": a.custom_capabilities,
        "accepts_captures": a.accepts_captures(),
        "accepts_settings": a.accepts_settings(),
        "health": health,
        "effective_config": a.effective_config,
        "desired_settings": a.desired.as_ref().map(|(t, _)| t.clone()),
        "remote_config": remote,
        "captures": a.captures.iter().rev().map(capture_json).collect::<Vec<_>>(),
        "first_seen": a.first_seen,
        "last_seen": a.last_seen,
    })
}

/// What a capture may ask, for the UI's form and the CLI's messages.
fn bounds() -> Value {
    let min: serde_json::Map<String, Value> = engines::minimums()
        .into_iter()
        .map(|(key, min)| (key.to_owned(), Value::String(min)))
        .collect();
    json!({
        "max_seconds": capture::MAX_SECONDS,
        "min": min,
    })
}

/// The engines a JSON request asks for: string values in the options' grammar.
fn engines_of(body: &Value) -> Result<Engines, Refused> {
    let mut e = Engines::default();
    for key in engines::types() {
        match body.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if v.is_empty() => {}
            Some(Value::String(v)) => {
                e.set(key, v)?;
            }
            Some(_) => {
                return Err(Refused::new(format!(
                    "{key}: expected a string such as \"20ms\""
                )))
            }
        }
    }
    Ok(e)
}

fn instance(body: &Value) -> Result<&str, Answer> {
    body.get("instance")
        .and_then(Value::as_str)
        .ok_or_else(|| fail(StatusCode::BAD_REQUEST, "instance: expected the agent's id"))
}

fn api_error(e: ApiError) -> Answer {
    match e {
        ApiError::NotFound(m) => fail(StatusCode::NOT_FOUND, &m),
        ApiError::Refused(m) => fail(StatusCode::BAD_REQUEST, &m),
    }
}

/// Serves one request under `/api/agents`.
pub async fn handle<B>(agents: &Agents, request: Request<B>, now: i64) -> Answer
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let path = request.uri().path().to_owned();
    match (request.method(), path.as_str()) {
        (&Method::GET | &Method::HEAD, "/api/agents") => {
            let list: Vec<Value> = agents.list().iter().map(agent_json).collect();
            (
                StatusCode::OK,
                json!({ "agents": list, "bounds": bounds(), "now": now }),
            )
        }
        (&Method::POST, "/api/agents/capture" | "/api/agents/settings") => {
            let json_type = request
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
            if !json_type {
                return fail(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send Content-Type: application/json",
                );
            }
            let read = Limited::new(request.into_body(), MAX_JSON).collect();
            let body = match tokio::time::timeout(std::time::Duration::from_secs(10), read).await {
                Ok(Ok(b)) => b.to_bytes(),
                Ok(Err(e)) => {
                    return fail(
                        StatusCode::BAD_REQUEST,
                        &format!("cannot read the body: {e}"),
                    )
                }
                Err(_) => {
                    return fail(
                        StatusCode::REQUEST_TIMEOUT,
                        "the body did not arrive in 10s",
                    )
                }
            };
            let body: Value = match serde_json::from_slice(&body) {
                Ok(v @ Value::Object(_)) => v,
                _ => return fail(StatusCode::BAD_REQUEST, "the body is not a JSON object"),
            };
            let id = match instance(&body) {
                Ok(id) => id,
                Err(a) => return a,
            };
            if path.ends_with("/capture") {
                let engines = match engines_of(&body) {
                    Ok(e) => e,
                    Err(r) => return fail(StatusCode::BAD_REQUEST, &r.0),
                };
                let Some(seconds) = body.get("seconds").and_then(Value::as_u64) else {
                    return fail(StatusCode::BAD_REQUEST, "seconds: expected a whole number");
                };
                match agents.capture(id, engines, seconds, now) {
                    Ok((capture_id, uid)) => (
                        StatusCode::ACCEPTED,
                        json!({"id": capture_id, "instance_uid": uid_text(&uid), "state": "pending"}),
                    ),
                    Err(e) => api_error(e),
                }
            } else {
                let Some(text) = body.get("settings").and_then(Value::as_str) else {
                    return fail(
                        StatusCode::BAD_REQUEST,
                        "settings: expected text such as \"wall=50ms\"",
                    );
                };
                match agents.settings(id, text) {
                    Ok(uid) => (
                        StatusCode::ACCEPTED,
                        json!({"instance_uid": uid_text(&uid)}),
                    ),
                    Err(e) => api_error(e),
                }
            }
        }
        (_, "/api/agents" | "/api/agents/capture" | "/api/agents/settings") => fail(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /api/agents; POST capture and settings",
        ),
        _ => fail(StatusCode::NOT_FOUND, "no such API endpoint"),
    }
}
