//! `otelprof serve` fed by real JVMs: the UI's answers against the CLI's, and the web UI in
//! a real browser.

mod browser;
mod ui;
