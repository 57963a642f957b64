//! The `otelprof` commands end to end on stores written by real JVMs: `demo`, `receive`, and
//! `diff` (regressions with a known truth, endpoints, the CI gate), `findings` (and its panel
//! in `serve`'s Explore view); stores in object storage.

mod demo;
mod diff_ci_gate;
mod diff_endpoints;
mod diff_regressions;
mod diff_short_runs;
mod diff_support;
mod findings;
mod findings_ui;
mod object_store;
mod receive;
mod shared_kill;
mod trend;
