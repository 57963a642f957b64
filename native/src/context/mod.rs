pub mod process_context;
pub mod record;
