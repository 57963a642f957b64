//! What a transport returns for a request the server accepted.

use otel_bridge::otlp::ExportProfilesServiceResponse;

/// A request the server accepted, with its answer (which may report a partial success).
#[derive(Debug)]
pub(crate) struct Sent {
    pub(crate) response: ExportProfilesServiceResponse,
}
