//! `otelprof serve`: the receiver of `otelprof receive` plus a web UI over its store, answered
//! by the same query engine as `top`, `flame`, `drilldown` and `diff`. The UI ([`Ui`]) is
//! handed in by `main`: it reads the other commands' answers, so no command names it.

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::path::PathBuf;

use anyhow::{bail, Context as _};

use crate::cli::{ServeArgs, DEFAULT_UI};
use otelprof_receiver::{self as receiver, ExtraListener, Handler};

/// The UI's address, checked against the receiver's rule: nothing beyond loopback without a
/// token. TLS alone is not enough for the UI: a browser has no client certificate to show,
/// so the token is what it proves itself with.
pub fn ui_address(text: &str, token: Option<&str>) -> anyhow::Result<SocketAddr> {
    let addr = text
        .to_socket_addrs()
        .with_context(|| {
            format!(
                "--ui {} is not a listen address (e.g. {DEFAULT_UI})",
                otelprof_primitives::escape::quote(text)
            )
        })?
        .next()
        .with_context(|| {
            format!(
                "--ui {} resolves to no address",
                otelprof_primitives::escape::quote(text)
            )
        })?;
    if !addr.ip().is_loopback() && token.is_none() {
        bail!(
            "serving the UI on {addr} would show the profiles to other machines with no \
             authentication: give --token TOKEN (the UI then asks for it), or use --ui {DEFAULT_UI}"
        );
    }
    Ok(addr)
}

/// Gives the calling thread the lowest scheduling priority (nice 19); a failure leaves it as
/// it is.
fn lowest_priority() {
    // SAFETY: gettid has no arguments and cannot fail; setpriority takes plain integers
    // (PRIO_PROCESS with a thread id renices that thread on Linux).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
    }
}

/// The web UI over a store, asking for a token when given one: the requests it answers.
pub type Ui = fn(store: PathBuf, token: Option<String>) -> Handler;

pub fn run(args: &ServeArgs, ui: Ui) -> anyhow::Result<()> {
    let config = super::receive::config(&args.receive)?;
    let addr = ui_address(&args.ui, config.token.as_deref())?;
    let extra = ExtraListener {
        addr,
        what: "ui",
        handler: ui(config.store.clone(), config.token.clone()),
    };
    let running = receiver::start_with(&config, Some(extra))?;
    // The stacks of the newest hours, read once in the background at the lowest priority
    // (questions asked meanwhile get the cores): the first question over them is then as
    // fast as the next ones (BENCHMARKS.md, the store at fleet scale).
    let store = config.store.clone();
    let _ = std::thread::Builder::new()
        .name("otelprof-warm".into())
        .spawn(move || {
            lowest_priority();
            otelprof_store::columnar::warm_stacks(&store)
        });
    let quiet = args.receive.quiet;
    if !quiet {
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        errln!(
            "otelprof serve: storing OTLP profiles in {}",
            config.store.display()
        );
        if let Some(a) = running.grpc {
            errln!("  gRPC  {scheme}://{a}  (agent: endpoint={scheme}://{a},protocol=grpc)");
        }
        if let Some(a) = running.http {
            errln!("  HTTP  {scheme}://{a}  (agent: endpoint={scheme}://{a})");
        }
        if config.token.is_some() {
            errln!("  every request needs the header Authorization: Bearer <token>; the UI asks for it");
        }
        if let Some(a) = running.extra {
            // Not through stderr alone: scripts (and the browser tests) read the URL.
            errln!(
                "  OpAMP {scheme}://{a}{}  (agent: opamp={scheme}://{a}{})",
                crate::opamp::PATH,
                crate::opamp::PATH
            );
            outln!("otelprof serve: UI on {scheme}://{a}/  (Ctrl-C stops)")?;
            crate::output::flush_stdout()?;
        }
    }
    running.wait_for_signal(quiet)?;
    let line = running.summary();
    running.stop();
    if !quiet {
        errln!("otelprof serve: stopped; {line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ui_beyond_loopback_needs_a_token() {
        assert!(ui_address("127.0.0.1:0", None).is_ok());
        let err = ui_address("0.0.0.0:4040", None).unwrap_err();
        assert!(format!("{err}").contains("--token"), "{err}");
        assert!(ui_address("0.0.0.0:4040", Some("s3cret")).is_ok());
        assert!(ui_address("nonsense", None).is_err());
    }
}
