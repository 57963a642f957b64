//! The local profile store and its query engine.

pub mod merge;
pub mod query;
pub mod reader;
pub mod select;
pub mod writer;
