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
use otelprof_opamp::capture::MAX_SECONDS;
use otelprof_opamp::engines::Engines;
use serde_json::{json, Value};

use crate::cli::CaptureArgs;
use otelprof_primitives::escape;

/// How often the capture's state is read.
const POLL: Duration = Duration::from_millis(500);
/// Largest answer read from the server.
const MAX_ANSWER: usize = 16 << 20;

/// Where the server is: `host:port`, the host alone (the TLS server name), the path prefix,
/// and whether it speaks TLS.
#[derive(Debug, PartialEq, Eq)]
struct Server {
    authority: String,
    host: String,
    prefix: String,
    tls: bool,
}

fn server_address(url: &str) -> anyhow::Result<Server> {
    let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(r), _) => (r, false),
        (_, Some(r)) => (r, true),
        _ => bail!(
            "--server {}: give the http:// or https:// URL of otelprof serve's UI, e.g. \
             http://127.0.0.1:4040",
            escape::quote(url)
        ),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    if authority.is_empty() || authority.contains('@') {
        bail!(
            "--server {}: no host (or credentials in the URL: use --token)",
            escape::quote(url)
        );
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            if p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty() {
                (h.to_owned(), p.to_owned())
            } else {
                (authority.to_owned(), String::new())
            }
        }
        _ => (authority.to_owned(), String::new()),
    };
    let port = if port.is_empty() {
        (if tls { "443" } else { "80" }).to_owned()
    } else {
        port
    };
    Ok(Server {
        authority: format!("{host}:{port}"),
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        prefix: path.to_owned(),
        tls,
    })
}

/// Any byte stream a request can go over: TCP, or TLS over TCP.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The TLS client of an https:// server: Mozilla's roots, and `--cacert`'s.
fn tls_connector(cacert: Option<&std::path::Path>) -> anyhow::Result<tokio_rustls::TlsConnector> {
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = cacert {
        let certs = rustls_pki_types::CertificateDer::pem_file_iter(path)
            .with_context(|| format!("cannot read --cacert {}", path.display()))?;
        for cert in certs {
            let cert =
                cert.with_context(|| format!("{} is not PEM certificates", path.display()))?;
            roots
                .add(cert)
                .with_context(|| format!("a certificate of {} is not usable", path.display()))?;
        }
    }
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS setup")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(
        config,
    )))
}

struct Client {
    server: Server,
    tls: Option<tokio_rustls::TlsConnector>,
    token: Option<String>,
}

impl Client {
    async fn connect(&self) -> anyhow::Result<Box<dyn Io>> {
        let authority = &self.server.authority;
        let tcp = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::net::TcpStream::connect(authority),
        )
        .await
        .map_err(|_| anyhow::anyhow!("connecting to {authority} timed out"))?
        .with_context(|| format!("cannot connect to otelprof serve at {authority}"))?;
        let Some(tls) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let name = rustls_pki_types::ServerName::try_from(self.server.host.clone())
            .with_context(|| format!("{} is not a TLS server name", self.server.host))?;
        let stream = tokio::time::timeout(Duration::from_secs(10), tls.connect(name, tcp))
            .await
            .map_err(|_| anyhow::anyhow!("the TLS handshake with {authority} timed out"))?
            .with_context(|| {
                format!("TLS with {authority} failed (give --cacert PEM for a private certificate)")
            })?;
        Ok(Box::new(stream))
    }

    /// One request on its own connection: `(status, JSON)`.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let stream = self.connect().await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.server.prefix))
            .header(http::header::HOST, &self.server.authority);
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
                self.server.authority
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
        ("live", &args.live),
        ("lock", &args.lock),
    ] {
        if let Some(v) = value {
            engines
                .set(key, v)
                .map_err(|r| anyhow::anyhow!("--{key}: {r}"))?;
        }
    }
    if engines.is_empty() {
        bail!("give at least one of --cpu, --wall, --alloc, --live, --lock");
    }
    if args.seconds == 0 || args.seconds > MAX_SECONDS {
        bail!(
            "--seconds {}: a capture lasts 1 to {MAX_SECONDS} seconds",
            args.seconds
        );
    }
    let server = server_address(&args.server)?;
    let tls = if server.tls {
        Some(tls_connector(args.cacert.as_deref())?)
    } else {
        None
    };
    let client = Client {
        server,
        tls,
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
        let s = server_address("http://127.0.0.1:4040").unwrap();
        assert_eq!(
            (
                s.authority.as_str(),
                s.host.as_str(),
                s.prefix.as_str(),
                s.tls
            ),
            ("127.0.0.1:4040", "127.0.0.1", "", false)
        );
        let s = server_address("https://profiles.example/otelprof/").unwrap();
        assert_eq!(
            (
                s.authority.as_str(),
                s.host.as_str(),
                s.prefix.as_str(),
                s.tls
            ),
            (
                "profiles.example:443",
                "profiles.example",
                "/otelprof",
                true
            )
        );
        let s = server_address("http://[::1]:4040").unwrap();
        assert_eq!(
            (s.authority.as_str(), s.host.as_str()),
            ("[::1]:4040", "::1")
        );
        assert!(server_address("127.0.0.1:4040").is_err());
        assert!(server_address("http://user:pw@h:1").is_err());
        assert!(server_address("ftp://h").is_err());
    }
}
