//! The OTLP profiles receiver (gRPC and HTTP, the Collector's wire) behind `otelprof receive`
//! and `otelprof demo`: it stores every accepted request durably in a directory (see
//! [`otelprof_store::Store`]).
//!
//! It binds to loopback by default. Any other address exposes it to the network, so it then
//! needs `--token` (clients send `Authorization: Bearer <token>`) or TLS, and refuses to
//! start otherwise. The same receiver runs inside `otelprof demo` (see [`start`]).
//!
//! Clients are not trusted to be quick or few: [`limits`] lists the rules (timeouts for each
//! phase of a connection, a connection limit below the file descriptors the process may
//! open, a bound on request bodies in memory), [`connection_limit`] who makes room at the
//! limit, [`accept`] and [`connection`] how each listener and each connection is served.
//! Both listeners are served the same way (hyper, with TLS in front when configured); gRPC
//! is the tonic services in [`grpc`] over HTTP/2.
//!
//! Module map, from the leaves up: `limits`, `fd_limit`, `connection_limit`,
//! `deadline_body`, `http_headers`, `ingest` (leaves); `request_gate` (reads
//! `deadline_body`); `grpc` and `http` (the two wires over `ingest` and `request_gate`);
//! `connection`, then `accept`; this file wires them.

// First: the other modules use its `errln!`.
#[macro_use]
mod stderr;

mod accept;
mod connection;
mod connection_limit;
mod deadline_body;
mod fd_limit;
mod grpc;
mod http;
mod http_headers;
mod ingest;
mod limits;
mod request_gate;
mod shared_maintain;

use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::sync::watch;

use accept::{accept_loop, Listener};
pub use connection::ResponseBody;
use connection_limit::{ConnectionCounters, ConnectionLimit};
pub use http_headers::{content_coding, is_protobuf, Coding};
use ingest::Counters;
pub use ingest::{token_matches, Ingest};
pub use limits::Limits;
use request_gate::RequestGate;

use otelprof_store::maintain::MaintainLock;
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
    pub limits: Limits,
    /// What the store keeps and for how long ([`otelprof_store::maintain`]).
    pub keep: Keep,
    /// When the store is converted and compacted.
    pub maintenance: Maintenance,
    /// Where a store in object storage is maintained from while this receiver holds its
    /// lease (`--cache`; `None`: the user's cache directory, [`otelprof_store::bucket::cache_base`]).
    pub cache: Option<PathBuf>,
}

/// When a receiver maintains its store ([`otelprof_store::maintain`]).
#[derive(Clone, Copy, Debug)]
pub struct Maintenance {
    /// How often (`--maintain-every`); a bucket store's lease lasts a few of these.
    pub every: Duration,
    /// How long after its end an hour is compacted, and the longest a request waits before
    /// it is converted (`--settle`; [`otelprof_store::maintain::Policy::receiving`]).
    pub settle: Duration,
}

impl Default for Maintenance {
    fn default() -> Maintenance {
        Maintenance {
            every: MAINTAIN_EVERY,
            settle: COMPACT_GRACE,
        }
    }
}

/// How long a receiver's store keeps what it received.
#[derive(Clone, Copy, Debug)]
pub struct Keep {
    /// Everything older is deleted, in whole hours and days (`--retention`); `None` keeps all.
    pub retention: Option<Duration>,
    /// Raw OTLP requests are removed this long after they arrived (`--keep-otlp`); their
    /// profiles stay in the columnar store. `None` keeps them.
    pub raw: Option<Duration>,
}

impl Default for Keep {
    fn default() -> Keep {
        Keep {
            retention: None,
            raw: Some(DEFAULT_KEEP_RAW),
        }
    }
}

/// How long raw requests are kept by default: long enough to replay the last hour into a
/// backend, short enough that the store stays smaller than what it received.
pub const DEFAULT_KEEP_RAW: Duration = Duration::from_secs(3600);

/// How long after its end an hour is compacted: the agents' period (60 s) and their export
/// retry window, after which no profile starts in it any more, with room to spare.
pub const COMPACT_GRACE: Duration = Duration::from_secs(15 * 60);

/// How often the store is maintained.
pub const MAINTAIN_EVERY: Duration = Duration::from_secs(60);

impl Maintenance {
    /// The maintenance policy of a receiver's store that keeps what `keep` says.
    pub(crate) fn policy(&self, keep: Keep) -> otelprof_store::maintain::Policy {
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        otelprof_store::maintain::Policy::receiving(
            nanos(self.settle),
            keep.retention.map(nanos),
            keep.raw.map(nanos),
        )
    }
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

/// What answers the requests of an [`ExtraListener`].
pub type Handler = Arc<
    dyn Fn(
            ::http::Request<hyper::body::Incoming>,
        ) -> Pin<Box<dyn Future<Output = ::http::Response<ResponseBody>> + Send>>
        + Send
        + Sync,
>;

/// One more listener served like the receiver's own (`serve`'s web UI): the same timeouts,
/// TLS and connection limit, so it adds no way around the receiver's rules.
pub struct ExtraListener {
    pub addr: SocketAddr,
    /// The flag that sets its address, for messages (`ui` for `--ui`).
    pub what: &'static str,
    pub handler: Handler,
}

/// Maintains the store every `maintenance.every` until shutdown: compacts the hours that are
/// over, applies the retention, removes raw requests past their time. One line per pass that
/// changed something; a failure is logged once until a pass succeeds again, and never stops
/// the receiver (the store stays readable, only larger or slower).
async fn maintain_loop(
    store: PathBuf,
    keep: Keep,
    maintenance: Maintenance,
    mut shutdown: watch::Receiver<bool>,
) {
    let policy = maintenance.policy(keep);
    let mut failing = false;
    // Held for the receiver's whole run once taken; while another process holds it, this
    // receiver only receives (said once), and tries again every pass.
    let mut lock: Option<Arc<MaintainLock>> = None;
    let mut said_busy = false;
    loop {
        if lock.is_none() {
            match MaintainLock::try_take(&store) {
                Ok(Some(l)) => lock = Some(Arc::new(l)),
                Ok(None) if !said_busy => {
                    said_busy = true;
                    eprintln!(
                        "otelprof: another otelprof process maintains this store (converts, \
                         compacts, expires it); this one only receives until that one stops"
                    );
                }
                Ok(None) => {}
                Err(e) => eprintln!(
                    "otelprof: cannot take the store's maintenance lock: {}",
                    otelprof_primitives::escape::escape(&otelprof_store::chain(&e))
                ),
            }
        }
        let pass = match lock.clone() {
            Some(lock) => {
                let store = store.clone();
                tokio::task::spawn_blocking(move || {
                    otelprof_store::maintain::maintain(
                        &store,
                        otelprof_store::now_unix_nanos(),
                        &policy,
                        &lock,
                    )
                })
                .await
            }
            None => Ok(Ok(otelprof_store::maintain::Done::default())),
        };
        match pass {
            Ok(Ok(done)) => {
                failing = false;
                report_pass(&done);
            }
            Ok(Err(e)) if !failing => {
                failing = true;
                report_failure(&e);
            }
            _ => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(maintenance.every) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

/// What a maintenance pass says: each request it could not convert, and a summary when it
/// compacted or expired something (a pass that converted only a few minutes stays quiet).
pub(crate) fn report_pass(done: &otelprof_store::maintain::Done) {
    for (path, err) in &done.unconvertible {
        eprintln!(
            "otelprof: cannot convert a stored request (kept as {}, not read): {}",
            otelprof_primitives::escape::path(path),
            otelprof_primitives::escape::escape(&otelprof_store::chain(err))
        );
    }
    if !done.compacted.is_empty() || !done.expired.is_empty() {
        eprintln!(
            "otelprof: store maintained: {} requests converted, {} hours compacted, {} hours or days expired, {} raw requests removed",
            done.converted,
            done.compacted.len(),
            done.expired.len(),
            done.raw_removed
        );
    }
}

/// The first failure of a run of failed passes, said once.
pub(crate) fn report_failure(e: &otelprof_store::Error) {
    eprintln!(
        "otelprof: cannot maintain the store (it stays readable; retried at the next pass): {}",
        otelprof_primitives::escape::escape(&otelprof_store::chain(e))
    );
}

/// A receiver running on its own runtime.
pub struct Running {
    pub grpc: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    /// The address of the [`ExtraListener`], when there is one.
    pub extra: Option<SocketAddr>,
    pub ingest: Arc<Ingest>,
    /// The connection limit in force, and the file descriptors it was derived from.
    pub max_connections: usize,
    pub open_files: u64,
    connections: Arc<ConnectionLimit>,
    shutdown: watch::Sender<bool>,
    runtime: tokio::runtime::Runtime,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    pub fn counters(&self) -> &Counters {
        &self.ingest.counters
    }

    pub fn connection_counters(&self) -> &ConnectionCounters {
        &self.connections.counters
    }

    /// The summary line of what was received, and of what was done to connections.
    pub fn summary(&self) -> String {
        summary(self.counters()) + &connection_summary(self.connection_counters())
    }

    /// Stops listening and lets requests in progress finish (at most 10 s). Every request
    /// acknowledged so far is on disk.
    pub fn stop(self) {
        let _ = self.shutdown.send(true);
        let tasks = self.tasks;
        let connections = self.connections;
        self.runtime.block_on(async move {
            for t in tasks {
                let _ = t.await;
            }
            connections.close_all();
            let drained = async {
                while connections.open() > 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            let bound = limits::CLOSE_GRACE + Duration::from_secs(1);
            let _ = tokio::time::timeout(bound, drained).await;
        });
        // Blocking tasks (a store write in progress) run to completion before this returns.
        self.runtime.shutdown_timeout(Duration::from_secs(10));
    }

    /// Waits for SIGINT or SIGTERM.
    pub fn wait_for_signal(&self, quiet: bool) -> anyhow::Result<()> {
        let ingest = self.ingest.clone();
        let connections = self.connections.clone();
        self.runtime.block_on(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .context("cannot watch SIGTERM")?;
            let mut ticker = tokio::time::interval(Duration::from_secs(10));
            // What changed, not every 10 s: a quiet receiver stays quiet.
            let state = || {
                let c = &ingest.counters;
                format!(
                    "{} {}{}",
                    c.requests.load(Relaxed),
                    c.rejected.load(Relaxed),
                    connection_summary(&connections.counters)
                )
            };
            let mut last = state();
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => break,
                    _ = term.recv() => break,
                    _ = ticker.tick() => {
                        let now = state();
                        if !quiet && now != last {
                            errln!(
                                "otelprof receive: {}{}",
                                summary(&ingest.counters),
                                connection_summary(&connections.counters)
                            );
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
        // An OTLP sample aggregates every observation of one stack, attribute set and link:
        // "sample records", lest they be read as CPU samples.
        "{} requests stored ({} profiles, {} sample records, {:.1} MiB), {} metrics requests, {} rejected",
        c.requests.load(Relaxed),
        c.profiles.load(Relaxed),
        c.samples.load(Relaxed),
        c.bytes_stored.load(Relaxed) as f64 / (1 << 20) as f64,
        c.metric_requests.load(Relaxed),
        c.rejected.load(Relaxed)
    )
}

/// What was done to connections, when anything was: the counts behind the one line said
/// when the connection limit was first reached, or accept() first failed.
fn connection_summary(c: &ConnectionCounters) -> String {
    let mut parts = Vec::new();
    for (n, what) in [
        (
            c.evicted.load(Relaxed),
            "idle connections closed to make room",
        ),
        (c.waited.load(Relaxed), "waits at the connection limit"),
        (c.timed_out.load(Relaxed), "connections timed out"),
        (c.accept_errors.load(Relaxed), "failed accepts"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
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

/// The connection limit: `--max-connections`, or derived from the file descriptors the
/// process may open (after raising its soft limit), and never more than they allow.
fn connection_limit(config: &ReceiveConfig, open_files: u64, slots: usize) -> usize {
    let allowed = fd_limit::connections_allowed(open_files, slots);
    match config.limits.max_connections {
        None => fd_limit::default_connections(open_files, slots),
        Some(n) if n > allowed => {
            errln!(
                "otelprof receive: --max-connections {n} lowered to {allowed}: the process may \
                 open {open_files} files, and the store needs some of them (raise `ulimit -n` \
                 for more)"
            );
            allowed
        }
        Some(n) => n,
    }
}

/// Opens the store, binds both listeners (so a port conflict fails here, not later) and
/// starts serving on a runtime of its own.
pub fn start(config: &ReceiveConfig) -> anyhow::Result<Running> {
    start_with(config, None)
}

/// [`start`], with one more listener served the same way.
pub fn start_with(config: &ReceiveConfig, extra: Option<ExtraListener>) -> anyhow::Result<Running> {
    // Before anything opens files: more descriptors for connections and the store.
    let open_files = fd_limit::raise_nofile().unwrap_or(1024);
    let store = Store::open(&config.store)?;
    let ingest = Arc::new(Ingest {
        store,
        max_bytes: config.max_bytes,
        counters: Counters::default(),
        token: config.token.clone(),
    });
    let limits = config.limits;
    let slots = limits::request_slots(config.max_bytes);
    let gate = Arc::new(RequestGate::new(
        slots,
        limits.slot_wait,
        limits.body_timeout,
    ));
    let max_connections = connection_limit(config, open_files, slots);
    let connections = ConnectionLimit::new(max_connections);
    let grpc_listener = config.grpc.map(|a| bind(a, "grpc")).transpose()?;
    let http_listener = config.http.map(|a| bind(a, "http")).transpose()?;
    let extra_listener = extra
        .map(|e| bind(e.addr, e.what).map(|l| (l, e)))
        .transpose()?;
    let tls = config
        .tls
        .as_ref()
        .map(|(c, k)| tls_server_config(c, k))
        .transpose()?
        .map(|c| tokio_rustls::TlsAcceptor::from(Arc::new(c)));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("otelprof-receive")
        .enable_all()
        .build()
        .context("cannot start the receiver's runtime")?;
    let (shutdown, stop) = watch::channel(false);
    let mut serving = Serving {
        runtime: &runtime,
        connections: connections.clone(),
        limits,
        tls,
        accept_error_said: Arc::new(AtomicBool::new(false)),
        stop: stop.clone(),
        tasks: Vec::new(),
    };
    let grpc = grpc_listener
        .map(|l| serving.grpc(l, &ingest, &gate))
        .transpose()?;
    match ingest.store.local_dir() {
        Some(dir) => serving.tasks.push(runtime.spawn(maintain_loop(
            dir.to_path_buf(),
            config.keep,
            config.maintenance,
            stop,
        ))),
        // A store in object storage: maintained by whichever receiver holds its lease.
        None => {
            if let Some((bucket, writer)) = ingest.store.bucket() {
                serving
                    .tasks
                    .push(runtime.spawn(shared_maintain::maintain_loop(
                        bucket.clone(),
                        writer.to_owned(),
                        config.keep,
                        config.maintenance,
                        config.cache.clone(),
                        stop,
                    )));
            }
        }
    }
    let http = http_listener
        .map(|l| serving.http(l, &ingest, &gate))
        .transpose()?;
    let extra = extra_listener
        .map(|(l, e)| serving.extra(l, e))
        .transpose()?;
    let tasks = serving.tasks;
    Ok(Running {
        grpc,
        http,
        extra,
        ingest,
        max_connections,
        open_files,
        connections,
        shutdown,
        runtime,
        tasks,
    })
}

/// What the listeners share as they start: the runtime they run on, and the rules and state
/// every connection is served with.
struct Serving<'a> {
    runtime: &'a tokio::runtime::Runtime,
    connections: Arc<ConnectionLimit>,
    limits: Limits,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Shared, so that running out of descriptors is said once, not once per listener.
    accept_error_said: Arc<AtomicBool>,
    stop: watch::Receiver<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Serving<'_> {
    /// Serves `listener` (`what`, for messages) with `handler`, over HTTP/2 only when
    /// `http2_only`.
    fn serve<H, F>(
        &mut self,
        listener: StdListener,
        what: &'static str,
        http2_only: bool,
        handler: H,
    ) -> anyhow::Result<()>
    where
        H: Fn(::http::Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = ::http::Response<ResponseBody>> + Send + 'static,
    {
        let tcp = {
            let _guard = self.runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .with_context(|| format!("{what} listener"))?
        };
        let listener = Listener {
            tcp,
            what,
            tls: self.tls.clone(),
            builder: Arc::new(connection::builder(&self.limits, http2_only)),
            handler,
        };
        self.tasks.push(self.runtime.spawn(accept_loop(
            listener,
            self.connections.clone(),
            self.limits,
            self.accept_error_said.clone(),
            self.stop.clone(),
        )));
        Ok(())
    }

    /// OTLP over gRPC (the tonic services of [`grpc`]); returns the address.
    fn grpc(
        &mut self,
        listener: StdListener,
        ingest: &Arc<Ingest>,
        gate: &Arc<RequestGate>,
    ) -> anyhow::Result<SocketAddr> {
        let addr = listener.local_addr().context("gRPC listener")?;
        let router = grpc::Router::new(ingest.clone(), gate.clone());
        self.serve(listener, "gRPC", true, move |request| {
            let router = router.clone();
            async move { router.call(request).await }
        })?;
        Ok(addr)
    }

    /// OTLP over HTTP ([`http`]); returns the address.
    fn http(
        &mut self,
        listener: StdListener,
        ingest: &Arc<Ingest>,
        gate: &Arc<RequestGate>,
    ) -> anyhow::Result<SocketAddr> {
        let addr = listener.local_addr().context("HTTP listener")?;
        let (ingest, gate) = (ingest.clone(), gate.clone());
        self.serve(listener, "HTTP", false, move |request| {
            let ingest = ingest.clone();
            let gate = gate.clone();
            async move {
                http::handle(ingest, gate, request)
                    .await
                    .map(connection::ResponseBody::new)
            }
        })?;
        Ok(addr)
    }

    /// The [`ExtraListener`]; returns the address.
    fn extra(&mut self, listener: StdListener, extra: ExtraListener) -> anyhow::Result<SocketAddr> {
        let addr = listener.local_addr().context("UI listener")?;
        let handler = extra.handler;
        self.serve(listener, extra.what, false, move |request| handler(request))?;
        Ok(addr)
    }
}
