//! `otelprof receive`: receive OTLP profiles and store them until Ctrl-C.

use std::net::{SocketAddr, ToSocketAddrs as _};

use anyhow::Context as _;

use crate::cli::ReceiveArgs;
use otelprof_receiver::{self as receiver, Limits, ReceiveConfig, DEFAULT_GRPC, DEFAULT_HTTP};

fn resolve(text: &str, what: &str) -> anyhow::Result<Option<SocketAddr>> {
    if text == "off" {
        return Ok(None);
    }
    let addr = text
        .to_socket_addrs()
        .with_context(|| {
            format!(
                "--{what} {} is not a listen address (e.g. {})",
                otelprof_primitives::escape::quote(text),
                if what == "grpc" {
                    DEFAULT_GRPC
                } else {
                    DEFAULT_HTTP
                }
            )
        })?
        .next()
        .with_context(|| {
            format!(
                "--{what} {} resolves to no address",
                otelprof_primitives::escape::quote(text)
            )
        })?;
    Ok(Some(addr))
}

/// The receiver's configuration from the command line, checked.
pub fn config(args: &ReceiveArgs) -> anyhow::Result<ReceiveConfig> {
    let config = ReceiveConfig {
        store: args.store.clone(),
        grpc: resolve(&args.grpc, "grpc")?,
        http: resolve(&args.http, "http")?,
        token: args.token.clone().filter(|t| !t.is_empty()),
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        max_bytes: args.max_request_size,
        limits: Limits {
            max_connections: args.max_connections.map(|n| n as usize),
            ..Limits::default()
        },
        keep: receiver::Keep {
            retention: args.retention,
            raw: args.keep_otlp.0,
        },
        maintenance: receiver::Maintenance {
            every: args.maintain_every,
            settle: args.settle,
        },
        cache: super::stores::cache().map(std::path::Path::to_path_buf),
    };
    config.check()?;
    Ok(config)
}

/// The `receive` command.
pub fn run(args: &ReceiveArgs) -> anyhow::Result<()> {
    let config = config(args)?;
    let running = receiver::start(&config)?;
    if !args.quiet {
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        errln!(
            "otelprof receive: storing OTLP profiles in {}",
            config.store.display()
        );
        if let Some(a) = running.grpc {
            errln!("  gRPC  {scheme}://{a}  (ProfilesService/Export; agent: endpoint={scheme}://{a},protocol=grpc)");
        }
        if let Some(a) = running.http {
            errln!(
                "  HTTP  {scheme}://{a}{}  (agent: endpoint={scheme}://{a})",
                otel_bridge::otlp::HTTP_PATH
            );
        }
        if config.token.is_some() {
            errln!("  every request needs the header Authorization: Bearer <token>");
        }
        errln!(
            "  at most {} connections at once (--max-connections; {} open files allowed)",
            running.max_connections,
            running.open_files
        );
        errln!(
            "  read it with: otelprof top {}   (Ctrl-C stops)",
            config.store.display()
        );
    }
    running.wait_for_signal(args.quiet)?;
    let line = running.summary();
    running.stop();
    if !args.quiet {
        errln!("otelprof receive: stopped; {line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_binds_need_a_token_or_tls() {
        let args = |grpc: &str, token: Option<&str>| ReceiveArgs {
            store: std::path::PathBuf::from("/tmp/x"),
            grpc: grpc.to_owned(),
            http: "off".to_owned(),
            token: token.map(str::to_owned),
            tls_cert: None,
            tls_key: None,
            max_request_size: 1 << 20,
            max_connections: None,
            retention: None,
            keep_otlp: crate::cli::Keep(Some(std::time::Duration::from_secs(3600))),
            maintain_every: std::time::Duration::from_secs(60),
            settle: std::time::Duration::from_secs(900),
            quiet: true,
        };
        assert!(config(&args("127.0.0.1:0", None)).is_ok());
        let err = config(&args("0.0.0.0:4317", None)).unwrap_err();
        assert!(format!("{err}").contains("--token"), "{err}");
        assert!(config(&args("0.0.0.0:4317", Some("s3cret"))).is_ok());
        assert!(config(&args("nonsense", None)).is_err());
        assert!(config(&args("off", None)).is_err());
    }
}
