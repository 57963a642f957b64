//! `otelprof capture --instance ID --wall 20ms --seconds 60`: asks `otelprof serve`'s OpAMP
//! server to start a capture on a connected agent (what the Instances view's button does,
//! through the same JSON API, `POST /api/agents/capture`), then follows it in
//! `GET /api/agents` until the agent has answered (or, with `--wait`, until it is over).
//!
//! The request is checked here with the agent's own rules first, so a mistyped interval is
//! refused before anything is sent; the server and the agent check it again.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::rt::TokioIo;
use otelprof_profile::opamp::capture::MAX_SECONDS;
use otelprof_profile::opamp::engines::Engines;
use serde_json::{json, Value};

use crate::cli::CaptureArgs;
use crate::escape;

/// How often the capture's state is read.
const POLL: Duration = Duration::from_millis(500);
/// Largest answer read from the server.
const MAX_ANSWER: usize = 16 << 20;

/// `host:port` and the path prefix of an `http://` server URL.
fn server_address(url: &str) -> anyhow::Result<(String, String)> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!(
            "--server {}: give an http:// URL of otelprof serve's UI, e.g. http://127.0.0.1:4040 \
             (https is not spoken by this command yet: reach a TLS serve through an SSH tunnel)",
            escape::quote(url)
        );
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    if authority.is_empty() {
        bail!("--server {}: no host", escape::quote(url));
    }
    let authority = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Ok((authority, path.to_owned()))
}

struct Client {
    authority: String,
    prefix: String,
    token: Option<String>,
}

impl Client {
    /// One request on its own connection: `(status, JSON)`.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let stream = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::net::TcpStream::connect(&self.authority),
        )
        .await
        .map_err(|_| anyhow::anyhow!("connecting to {} timed out", self.authority))?
        .with_context(|| format!("cannot connect to otelprof serve at {}", self.authority))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(http::header::HOST, &self.authority);
        if let Some(t) = &self.token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let bytes = match body {
            Some(b) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        let response = tokio::time::timeout(
            Duration::from_secs(30),
            sender.send_request(request.body(Full::new(bytes))?),
        )
        .await
        .map_err(|_| anyhow::anyhow!("otelprof serve did not answer within 30s"))??;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
            .to_bytes();
        let value = serde_json::from_slice(&body).with_context(|| {
            format!(
                "the answer of {path} is not JSON (is {} otelprof serve?)",
                self.authority
            )
        })?;
        Ok((status, value))
    }
}

fn error_of(v: &Value) -> String {
    escape::escape(
        v.get("error")
            .and_then(Value::as_str)
            .unwrap_or("no reason given"),
    )
    .into_owned()
}

pub fn run(args: &CaptureArgs) -> anyhow::Result<u8> {
    let mut engines = Engines::default();
    for (key, value) in [
        ("cpu", &args.cpu),
        ("wall", &args.wall),
        ("alloc", &args.alloc),
        ("lock", &args.lock),
    ] {
        if let Some(v) = value {
            engines
                .set(key, v)
                .map_err(|r| anyhow::anyhow!("--{key}: {r}"))?;
        }
    }
    if engines.is_empty() {
        bail!("give at least one of --cpu, --wall, --alloc, --lock");
    }
    if args.seconds == 0 || args.seconds > MAX_SECONDS {
        bail!(
            "--seconds {}: a capture lasts 1 to {MAX_SECONDS} seconds",
            args.seconds
        );
    }
    let (authority, prefix) = server_address(&args.server)?;
    let client = Client {
        authority,
        prefix,
        token: args.token.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime")?;
    runtime.block_on(follow(&client, args, &engines))
}

async fn follow(client: &Client, args: &CaptureArgs, engines: &Engines) -> anyhow::Result<u8> {
    let mut request = json!({ "instance": args.instance, "seconds": args.seconds });
    for (key, v) in engines
        .text()
        .split(',')
        .filter_map(|kv| kv.split_once('='))
    {
        request[key] = Value::String(v.to_owned());
    }
    let (status, answer) = client
        .call("POST", "/api/agents/capture", Some(&request))
        .await?;
    if status == 401 {
        bail!("otelprof serve wants its token: give --token (or OTELPROF_RECEIVE_TOKEN)");
    }
    if !(200..300).contains(&status) {
        bail!("the capture was refused: {}", error_of(&answer));
    }
    let id = answer["id"].as_str().unwrap_or_default().to_owned();
    let uid = answer["instance_uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    outln!(
        "capture {id} queued for agent {uid}: {} for {}s",
        engines.text(),
        args.seconds
    )?;
    crate::output::flush_stdout()?;
    let started = Instant::now();
    let mut said = String::new();
    loop {
        let (status, list) = client.call("GET", "/api/agents", None).await?;
        if status != 200 {
            bail!("cannot read the agents: {}", error_of(&list));
        }
        let capture = list["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["instance_uid"] == uid.as_str())
            .flat_map(|a| a["captures"].as_array().into_iter().flatten())
            .find(|c| c["id"] == id.as_str())
            .cloned();
        let Some(c) = capture else {
            bail!("agent {uid} is gone from the server (it stopped polling, or disconnected)");
        };
        let state = c["state"].as_str().unwrap_or("?").to_owned();
        if state != said {
            let line = match state.as_str() {
                "running" => format!(
                    "capture {id}: running until {}",
                    c["ends"]
                        .as_i64()
                        .map(|s| otelprof_store::format_time(s.saturating_mul(1_000_000_000)))
                        .unwrap_or_default()
                ),
                "refused" | "failed" => format!(
                    "capture {id}: {state}: {}",
                    escape::escape(c["reason"].as_str().unwrap_or(""))
                ),
                s => format!("capture {id}: {s}"),
            };
            outln!("{line}")?;
            crate::output::flush_stdout()?;
            said = state.clone();
        }
        match state.as_str() {
            "refused" | "failed" => return Ok(1),
            "done" => return Ok(0),
            "running" if !args.wait => return Ok(0),
            _ => {}
        }
        let bound = if state == "running" {
            Duration::from_secs(args.seconds) + args.timeout
        } else {
            args.timeout
        };
        if started.elapsed() > bound {
            bail!(
                "capture {id} is still {state} after {:?}: the agent polls its server every few \
                 seconds; is it connected?",
                started.elapsed()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        assert_eq!(
            server_address("http://127.0.0.1:4040").unwrap(),
            ("127.0.0.1:4040".into(), String::new())
        );
        assert_eq!(
            server_address("http://localhost/otelprof/").unwrap(),
            ("localhost:80".into(), "/otelprof".into())
        );
        assert!(server_address("https://x:4040")
            .unwrap_err()
            .to_string()
            .contains("https"));
        assert!(server_address("127.0.0.1:4040").is_err());
    }
}
