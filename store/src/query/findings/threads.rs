//! Threads that sleep or spin inside requests: wall time in `Thread.sleep`,
//! `Thread.onSpinWait` or `Thread.yield` on samples that carry an endpoint (`span_name`).

use super::evidence::{find, Pattern};
use super::{method_line, Draft, Finding, Inputs, Thresholds};
use crate::merge::NO_GROUP;
use crate::query::requests::EndpointCounts;
use crate::select::ProfileType;
use otelprof_primitives::thread_role;

pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.02,
    warning: 0.10,
    critical: 0.30,
};

fn in_request(group: &str) -> bool {
    group != NO_GROUP && !thread_role::is_role_frame(group)
}

pub fn sleeping_in_requests(inputs: &Inputs, requests: &EndpointCounts) -> Option<Finding> {
    let pattern = Pattern::new(
        &[
            "java.lang.Thread.sleep*",
            "java.lang.Thread.onSpinWait",
            "java.lang.Thread.yield*",
        ],
        &[],
        &[],
    );
    let m = &inputs.wall;
    let mut evidence = find(m, &pattern, in_request);
    // The share is of the wall time spent in requests, not of every thread's.
    evidence.total = m
        .stacks
        .iter()
        .filter(|s| in_request(m.group(s.group)))
        .map(|s| s.value)
        .sum();
    let line = method_line(&inputs.lines.wall, &pattern, &evidence, in_request);
    let title = match &evidence.method {
        Some((method, _)) => format!("Sleeping or spinning in requests in {method}"),
        None => "Sleeping or spinning in requests".to_owned(),
    };
    Draft {
        rule: "sleep-in-request",
        title,
        fix: "wait on the event itself (a future, a condition, a blocking queue) instead of \
              sleeping or spinning, or move the wait off the request thread",
        thresholds: THRESHOLDS,
        ty: ProfileType::Wall,
        of: "wall time in requests",
        m,
        evidence,
        note: String::new(),
        line,
    }
    .finish(requests)
}
