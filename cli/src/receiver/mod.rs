//! The OTLP profiles receiver (gRPC and HTTP, the Collector's wire) behind `otelprof receive`
//! and `otelprof demo`: it stores every accepted request durably in a directory (see
//! [`otelprof_store::Store`]).
//!
//! It binds to loopback by default. Any other address exposes it to the network, so it then
//! needs `--token` (clients send `Authorization: Bearer <token>`) or TLS, and refuses to
//! start otherwise. The same receiver runs inside `otelprof demo` (see [`start`]).

mod grpc;
mod http;
mod ingest;

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::watch;

use ingest::Counters;
pub use ingest::Ingest;

use otelprof_store::Store;

/// Default listen addresses: the OTLP ports, on loopback.
pub const DEFAULT_GRPC: &str = "127.0.0.1:4317";
pub const DEFAULT_HTTP: &str = "127.0.0.1:4318";

/// Everything a receiver needs to start.
#[derive(Clone, Debug)]
pub struct ReceiveConfig {
    pub store: PathBuf,
    pub grpc: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub token: Option<String>,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub max_bytes: usize,
}

impl ReceiveConfig {
    /// The receiver's rules: something to listen on, and no unauthenticated listener beyond
    /// loopback.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.grpc.is_none() && self.http.is_none() {
            bail!("both --grpc and --http are off: nothing would be received");
        }
        for addr in [self.grpc, self.http].into_iter().flatten() {
            if !addr.ip().is_loopback() && self.token.is_none() && self.tls.is_none() {
                bail!(
                    "listening on {addr} would accept profiles from other machines with no \
                     authentication: give --token TOKEN (clients then send the header \
                     `Authorization: Bearer TOKEN`, e.g. OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Bearer TOKEN\"), \
                     or --tls-cert/--tls-key, or listen on 127.0.0.1"
                );
            }
        }
        Ok(())
    }
}

/// A receiver running on its own runtime.
pub struct Running {
    pub grpc: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub ingest: Arc<Ingest>,
    shutdown: watch::Sender<bool>,
    runtime: tokio::runtime::Runtime,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    pub fn counters(&self) -> &Counters {
        &self.ingest.counters
    }

    /// Stops listening and lets requests in progress finish (at most 10 s). Every request
    /// acknowledged so far is on disk.
    pub fn stop(self) {
        let _ = self.shutdown.send(true);
        let tasks = self.tasks;
        self.runtime.block_on(async move {
            let all = async {
                for t in tasks {
                    let _ = t.await;
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(10), all).await;
        });
        // Blocking tasks (a store write in progress) run to completion before this returns.
        self.runtime.shutdown_timeout(Duration::from_secs(10));
    }

    /// Waits for SIGINT or SIGTERM.
    pub fn wait_for_signal(&self, quiet: bool) -> anyhow::Result<()> {
        let ingest = self.ingest.clone();
        self.runtime.block_on(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .context("cannot watch SIGTERM")?;
            let mut ticker = tokio::time::interval(Duration::from_secs(10));
            let mut last = (0, 0);
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => break,
                    _ = term.recv() => break,
                    _ = ticker.tick() => {
                        let c = &ingest.counters;
                        let now = (c.requests.load(Relaxed), c.rejected.load(Relaxed));
                        if !quiet && now != last {
                            errln!("otelprof receive: {}", summary(c));
                            last = now;
                        }
                    }
                }
            }
            Ok::<(), anyhow::Error>(())
        })
    }
}

pub fn summary(c: &Counters) -> String {
    format!(
        "{} requests stored ({} profiles, {} samples, {:.1} MiB), {} metrics requests, {} rejected",
        c.requests.load(Relaxed),
        c.profiles.load(Relaxed),
        c.samples.load(Relaxed),
        c.bytes_stored.load(Relaxed) as f64 / (1 << 20) as f64,
        c.metric_requests.load(Relaxed),
        c.rejected.load(Relaxed)
    )
}

fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<StdListener> {
    let l = StdListener::bind(addr).with_context(|| {
        format!("cannot listen on {addr} for {what} (in use? pick another with --{what})")
    })?;
    l.set_nonblocking(true)
        .with_context(|| format!("cannot listen on {addr}"))?;
    Ok(l)
}

fn tls_server_config(
    cert: &PathBuf,
    key: &PathBuf,
) -> anyhow::Result<tokio_rustls::rustls::ServerConfig> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("{} is not a PEM certificate chain", cert.display()))?;
    if certs.is_empty() {
        bail!("{} holds no certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("{} is not a PEM private key", key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS setup")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not fit together")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Opens the store, binds both listeners (so a port conflict fails here, not later) and
/// starts serving on a runtime of its own.
pub fn start(config: &ReceiveConfig) -> anyhow::Result<Running> {
    let store = Store::open(&config.store)?;
    let ingest = Arc::new(Ingest {
        store,
        max_bytes: config.max_bytes,
        counters: Counters::default(),
        token: config.token.clone(),
    });
    let grpc_listener = config.grpc.map(|a| bind(a, "grpc")).transpose()?;
    let http_listener = config.http.map(|a| bind(a, "http")).transpose()?;
    let tls = config
        .tls
        .as_ref()
        .map(|(c, k)| tls_server_config(c, k))
        .transpose()?;
    let grpc_tls = match &config.tls {
        Some((cert, key)) => {
            let read = |p: &PathBuf| {
                std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))
            };
            Some(tonic::transport::ServerTlsConfig::new().identity(
                tonic::transport::Identity::from_pem(read(cert)?, read(key)?),
            ))
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("otelprof-receive")
        .enable_all()
        .build()
        .context("cannot start the receiver's runtime")?;
    let (shutdown, watch_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut grpc_addr = None;
    let mut http_addr = None;

    if let Some(listener) = grpc_listener {
        grpc_addr = Some(listener.local_addr().context("gRPC listener")?);
        let ingest = ingest.clone();
        let mut stop = watch_rx.clone();
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).context("gRPC listener")?
        };
        // HTTP/2 flow-control windows sized for profiles (hundreds of KB per request): with
        // the 64 KiB default, a large export waits for several window updates.
        let mut builder = tonic::transport::Server::builder()
            .initial_stream_window_size(Some(4 << 20))
            .initial_connection_window_size(Some(16 << 20));
        if let Some(tls) = grpc_tls {
            builder = builder.tls_config(tls).context("TLS setup for gRPC")?;
        }
        let router = builder
            .add_service(grpc::ExportService::<grpc::Profiles>::new(ingest.clone()))
            .add_service(grpc::ExportService::<grpc::Metrics>::new(ingest));
        tasks.push(runtime.spawn(async move {
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            let signal = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(e) = router.serve_with_incoming_shutdown(incoming, signal).await {
                errln!("otelprof receive: the gRPC server stopped: {e}");
            }
        }));
    }

    if let Some(listener) = http_listener {
        http_addr = Some(listener.local_addr().context("HTTP listener")?);
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).context("HTTP listener")?
        };
        let acceptor = tls.map(|c| tokio_rustls::TlsAcceptor::from(Arc::new(c)));
        let mut stop = watch_rx.clone();
        let ingest = ingest.clone();
        tasks.push(
            runtime.spawn(async move {
                loop {
                    let (stream, _) = tokio::select! {
                        accepted = listener.accept() => match accepted {
                            Ok(a) => a,
                            Err(e) => {
                                errln!("otelprof receive: HTTP accept failed: {e}");
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                continue;
                            }
                        },
                        _ = stop.changed() => break,
                    };
                    let ingest = ingest.clone();
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let ingest = ingest.clone();
                            async move {
                                Ok::<_, std::convert::Infallible>(http::handle(ingest, req).await)
                            }
                        });
                        let builder =
                            hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                        let _ = match acceptor {
                            Some(acceptor) => match acceptor.accept(stream).await {
                                Ok(tls) => {
                                    builder.serve_connection(TokioIo::new(tls), service).await
                                }
                                Err(_) => return,
                            },
                            None => {
                                builder
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await
                            }
                        };
                    });
                }
            }),
        );
    }

    Ok(Running {
        grpc: grpc_addr,
        http: http_addr,
        ingest,
        shutdown,
        runtime,
        tasks,
    })
}
