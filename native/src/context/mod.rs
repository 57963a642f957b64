pub mod endpoints;
pub mod process_context;
pub mod reader;
pub mod record;
pub mod tls;
