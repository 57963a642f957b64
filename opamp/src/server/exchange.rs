//! `POST /v1/opamp` past the HTTP layer: the body (an `AgentToServer`, already read and
//! inflated by the server's HTTP side, at most [`MAX_BODY`] bytes) in, the status and the
//! `ServerToAgent` to send back out. A body that does not decode gets 400 with a
//! `ServerToAgent` whose `error_response` is BAD_REQUEST and says why (the spec's Bad
//! Request), so the agents' table never sees it.

use http::StatusCode;
use prost::Message as _;

use super::agents::Agents;
use crate::proto::{AgentToServer, ServerErrorResponseType, ServerToAgent};

/// Largest request body, compressed or inflated. The spec recommends 64 MiB as a default
/// for general OpAMP; otelprof's agents send a few KiB, so a much smaller bound costs
/// nothing and keeps a hostile client's cost small.
pub const MAX_BODY: usize = 1 << 20;

/// The answer to a request refused before it reached the table, saying `why`.
pub fn bad_request(why: String) -> ServerToAgent {
    ServerToAgent::error(Vec::new(), ServerErrorResponseType::BadRequest, why)
}

/// Decodes `body`, lets `agents` answer it at `now`, and gives the HTTP status that goes
/// with the answer: 400 for a bad request, 503 when the table is full (the caller adds a
/// Retry-After), 200 otherwise.
pub fn answer(agents: &Agents, body: &[u8], now: i64) -> (StatusCode, ServerToAgent) {
    let message = match AgentToServer::decode(body) {
        Ok(m) => m,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                bad_request(format!("the body is not an AgentToServer message: {e}")),
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
    (status, answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_answer() {
        let agents = Agents::default();
        let (status, answer) = answer(&agents, b"\xff\xff", 0);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(answer.error_response.is_some());
        let hello = AgentToServer {
            instance_uid: vec![7; 16],
            ..Default::default()
        };
        let (status, answer) = super::answer(&agents, &hello.encode_to_vec(), 0);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer.instance_uid, vec![7; 16]);
        let short = AgentToServer {
            instance_uid: vec![7; 3],
            ..Default::default()
        };
        let (status, _) = super::answer(&agents, &short.encode_to_vec(), 0);
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}
