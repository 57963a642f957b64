//! The agent's OpAMP client: a thread of its own (with a one-thread tokio runtime) that
//! polls the server every [`OpampConfig::interval`], sends what the [`Session`] says, and
//! sleeps. It never blocks the agent: the agent's only contact with it is [`Control`],
//! called on this thread.
//!
//! An unreachable server costs one log line, then polls back off (doubling, up to
//! [`MAX_BACKOFF`]) until it answers, which is told once too. Errors the server reports are
//! told once per distinct message. At stop, the client says goodbye (AgentDisconnect) within
//! a bound and exits.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::proto::{AgentDescription, AgentToServer, ServerToAgent};
use bytes::Bytes;
use prost::Message as _;
use tokio::sync::watch;

use super::config::OpampConfig;
use super::control::Control;
use super::session::Session;
use otelprof_exporter::config::shown_endpoint;
use otelprof_exporter::{ExportError, HttpClient, LogLevel, Logger, StartError};

/// Longest wait between polls of an unreachable server.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Longest wait for one exchange.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The running client; [`OpampClient::stop`] ends it.
pub struct OpampClient {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Why an exchange failed, by what the loop does next.
enum Failed {
    /// No connection: back off, say it once.
    Unreachable(String),
    /// The server answered with an HTTP error: say it once, poll at the interval (or when
    /// it says, for 429/503).
    Refused(String, Option<Duration>),
}

async fn exchange(
    http: &HttpClient,
    config: &OpampConfig,
    uid: [u8; 16],
    message: &AgentToServer,
) -> Result<ServerToAgent, Failed> {
    let mut request = http::Request::builder()
        .method("POST")
        .uri(&config.endpoint)
        .header(http::header::CONTENT_TYPE, "application/x-protobuf")
        .header("OpAMP-Instance-UID", uuid_text(&uid));
    for (k, v) in &config.headers {
        request = request.header(k.as_str(), v.as_str());
    }
    let request = request
        .body(Bytes::from(message.encode_to_vec()))
        .map_err(|e| Failed::Refused(format!("cannot build the request: {e}"), None))?;
    let response = match tokio::time::timeout(EXCHANGE_TIMEOUT, http.send(request)).await {
        Err(_) => {
            return Err(Failed::Unreachable(format!(
                "no answer within {EXCHANGE_TIMEOUT:?}"
            )))
        }
        // The answer came but could not be read whole: over the size bound, or cut.
        Ok(Err(ExportError::Transport(e))) if e.starts_with("reading the response") => {
            return Err(Failed::Refused(
                format!("the answer was over 1 MiB or broken off ({e})"),
                None,
            ))
        }
        Ok(Err(ExportError::Unreachable(e) | ExportError::Transport(e))) => {
            return Err(Failed::Unreachable(e))
        }
        Ok(Err(e)) => return Err(Failed::Unreachable(e.to_string())),
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    let decoded = ServerToAgent::decode(response.body().clone());
    if status.is_success() {
        return decoded.map_err(|e| {
            Failed::Refused(
                format!("the answer is not a ServerToAgent message: {e}"),
                None,
            )
        });
    }
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s.min(3600)));
    // The server's reason, when its error body is a ServerToAgent (otelprof serve's is).
    let reason = decoded
        .ok()
        .and_then(|m| m.error_response)
        .map(|e| format!(": {}", crate::engines::shown(&e.error_message)))
        .unwrap_or_default();
    Err(Failed::Refused(
        format!("HTTP {status}{reason}"),
        retry_after,
    ))
}

/// `f81d4fae-7dec-11d0-a765-00a0c91e6bf6`.
fn uuid_text(uid: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*uid).hyphenated().to_string()
}

impl OpampClient {
    /// Starts polling `config.endpoint` as the agent `uid`, described by `description`.
    pub fn start(
        config: OpampConfig,
        uid: [u8; 16],
        description: AgentDescription,
        control: Arc<dyn Control>,
        log: Logger,
    ) -> Result<OpampClient, StartError> {
        let (stop, stopped) = watch::channel(false);
        // The caller (the agent, at VMInit) does not wait for the thread to set up its runtime
        // and TLS roots: a failure there is the thread's one log line.
        let thread = std::thread::Builder::new()
            .name("otelprof-opamp".into())
            .spawn(move || {
                let log2 = log.clone();
                let run = std::panic::AssertUnwindSafe(move || {
                    if let Err(e) = run(config, uid, description, control, log.clone(), stopped) {
                        log(
                            LogLevel::Warn,
                            &format!("cannot start the OpAMP client: {e}; remote control is off"),
                        );
                    }
                });
                if std::panic::catch_unwind(run).is_err() {
                    log2(
                        LogLevel::Warn,
                        "internal error in the OpAMP client; remote control is off",
                    );
                }
            })
            .map_err(StartError::Thread)?;
        Ok(OpampClient {
            stop,
            thread: Some(thread),
        })
    }

    /// Says goodbye to the server (within `bound`) and ends the thread.
    pub fn stop(mut self, bound: Duration) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let deadline = std::time::Instant::now() + bound + Duration::from_millis(200);
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for OpampClient {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn run(
    config: OpampConfig,
    uid: [u8; 16],
    description: AgentDescription,
    control: Arc<dyn Control>,
    log: Logger,
    mut stopped: watch::Receiver<bool>,
) -> Result<(), StartError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(StartError::Runtime)?;
    runtime.block_on(async move {
        let http = HttpClient::with(config.certificate.as_deref(), EXCHANGE_TIMEOUT)?;
        let endpoint = shown_endpoint(&config.endpoint);
        let mut session = Session::new(uid, description, control, now_nanos());
        let mut backoff = config.interval;
        let mut unreachable = false;
        let mut last_error = String::new();
        loop {
            session.tick(now_nanos());
            let message = session.next_message(now_nanos());
            let wait = match exchange(&http, &config, session.uid(), &message).await {
                Ok(answer) => {
                    if unreachable {
                        unreachable = false;
                        log(
                            LogLevel::Info,
                            &format!("the OpAMP server {endpoint} answers again"),
                        );
                    }
                    backoff = config.interval;
                    let outcome = session.handle(answer, now_nanos());
                    match outcome.error {
                        Some(e) if e != last_error => {
                            log(LogLevel::Warn, &e);
                            last_error = e;
                        }
                        Some(_) => {}
                        None => last_error.clear(),
                    }
                    match (outcome.retry_after, outcome.send_now) {
                        (Some(d), _) => d,
                        (None, true) => Duration::ZERO,
                        (None, false) => config.interval,
                    }
                }
                Err(Failed::Unreachable(e)) => {
                    session.failed();
                    if !unreachable {
                        unreachable = true;
                        log(
                            LogLevel::Warn,
                            &format!(
                                "cannot reach the OpAMP server {endpoint} ({e}); retrying, \
                                 up to every {}s",
                                MAX_BACKOFF.as_secs()
                            ),
                        );
                    }
                    let wait = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    wait
                }
                Err(Failed::Refused(e, retry_after)) => {
                    session.failed();
                    let line = format!("the OpAMP server {endpoint} refused a message: {e}");
                    if line != last_error {
                        log(LogLevel::Warn, &line);
                        last_error = line;
                    }
                    retry_after.unwrap_or(config.interval).max(config.interval)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stopped.changed() => break,
            }
            if *stopped.borrow() {
                break;
            }
        }
        let bye = session.disconnect_message();
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            exchange(&http, &config, session.uid(), &bye),
        )
        .await;
        Ok(())
    })
}
