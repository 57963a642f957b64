pub(crate) mod endpoints;
pub(crate) mod process_context;
pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod tls;
