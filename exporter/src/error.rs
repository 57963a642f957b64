//! Errors, one enum per operation, each grouped by what the caller does next.

use std::path::PathBuf;

use crate::retry::Failure;

/// Starting the exporter failed: OTLP export stays off (the caller logs one line).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("bad OTLP endpoint {url}: {reason}")]
    Endpoint { url: String, reason: String },
    #[error("header {0:?} is not a valid HTTP header or gRPC metadata entry")]
    Header(String),
    #[error("cannot read the CA certificate {}: {source}", path.display())]
    Certificate {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    #[error("cannot start the export thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("cannot start the export runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// One export attempt failed. The export thread classifies it, with a pure function of what
/// the server (or the network) said, as retryable, throttled or permanent: the data is
/// retried after a backoff, retried when the server asked, or dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// No connection could be made (refused, DNS, TLS, connect timeout).
    #[error("cannot connect: {0}")]
    Unreachable(String),
    /// Connected, but the exchange broke off before an answer.
    #[error("{0}")]
    Transport(String),
    #[error("gRPC status {code}: {message}")]
    Grpc {
        code: i32,
        message: String,
        retry_info: Option<std::time::Duration>,
    },
    #[error("HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        retry_after: Option<std::time::Duration>,
    },
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
}

impl ExportError {
    /// What [`crate::retry::classify`] reads.
    pub(crate) fn failure(&self) -> Failure {
        match self {
            ExportError::Unreachable(_) => Failure::Unreachable,
            ExportError::Transport(_) | ExportError::Timeout(_) => Failure::NoAnswer,
            ExportError::Grpc {
                code, retry_info, ..
            } => Failure::Grpc {
                code: tonic::Code::from_i32(*code),
                retry_info: *retry_info,
            },
            ExportError::Http {
                status,
                retry_after,
                ..
            } => Failure::Http {
                status: *status,
                retry_after: *retry_after,
            },
        }
    }

    /// A short name for the kind of failure, to log each kind once.
    pub(crate) fn kind(&self) -> String {
        match self {
            // One kind for all three: an outage is logged once, however its attempts failed.
            ExportError::Unreachable(_) | ExportError::Transport(_) | ExportError::Timeout(_) => {
                "unreachable".into()
            }
            ExportError::Grpc { code, .. } => format!("grpc-{code}"),
            ExportError::Http { status, .. } => format!("http-{status}"),
        }
    }
}

/// A profile could not be queued for export (it is dropped and counted).
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("cannot encode the profile: {0}")]
    Encode(#[from] otel_bridge::otlp::EncodeError),
    #[error("the exporter is shut down")]
    ShutDown,
}
