pub mod setup;
pub use setup::*;
