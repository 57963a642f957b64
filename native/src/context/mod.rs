pub mod process_context;
pub mod record;
pub mod tls;
