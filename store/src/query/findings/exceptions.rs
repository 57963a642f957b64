//! Exceptions: thrown as control flow (a `Throwable` built, its stack trace filled in, under
//! an application method), and stack traces built for logging or to find a caller
//! (`StackTraceElement`s, `Throwable.getStackTrace`, `StackWalker`).

use super::evidence::{Pattern, LOGGING};
use super::{cpu_and_alloc, Finding, Inputs, Thresholds};
use crate::query::requests::EndpointCounts;

/// The frames that build a stack trace as data (not the exception's own capture).
const STACK_TRACE_AS_DATA: &[&str] = &[
    "java.lang.StackTraceElement.*",
    "java.lang.Throwable.getStackTrace",
    "java.lang.Throwable.getOurStackTrace",
    "java.lang.StackWalker.*",
    "java.lang.StackStreamFactory*",
];

pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.01,
    warning: 0.05,
    critical: 0.20,
};

pub fn control_flow(inputs: &Inputs, requests: &EndpointCounts) -> Option<Finding> {
    let mut unless: Vec<&str> = STACK_TRACE_AS_DATA.to_vec();
    unless.extend_from_slice(LOGGING);
    let pattern = Pattern::new(
        &[
            "java.lang.Throwable.fillInStackTrace",
            "java.lang.Throwable.<init>",
        ],
        &[],
        &unless,
    );
    cpu_and_alloc(
        inputs,
        requests,
        "exceptions-control-flow",
        "Exceptions used for control flow",
        "return a result (Optional, a status) instead of throwing, or throw a preallocated \
         exception without a stack trace (override fillInStackTrace)",
        THRESHOLDS,
        &pattern,
    )
}

pub fn stack_traces(inputs: &Inputs, requests: &EndpointCounts) -> Option<Finding> {
    let pattern = Pattern::new(STACK_TRACE_AS_DATA, &[], &[]);
    cpu_and_alloc(
        inputs,
        requests,
        "stack-traces-as-data",
        "Stack traces built for logging or caller lookup",
        "log without the caller's location (%C/%M/%L/%F, source class and method), or pass the \
         class and method explicitly instead of inferring them from the stack",
        THRESHOLDS,
        &pattern,
    )
}
