//! Regular expressions compiled on each call: `Pattern.compile` (directly or under
//! `String.matches`, `split`, `replaceAll`, `replaceFirst`) called from application code.

use super::evidence::Pattern;
use super::{cpu_and_alloc, Finding, Inputs, Thresholds};
use crate::query::requests::EndpointCounts;

pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.01,
    warning: 0.05,
    critical: 0.20,
};

pub fn compiled_per_call(inputs: &Inputs, requests: &EndpointCounts) -> Option<Finding> {
    let pattern = Pattern::new(
        &[
            "java.util.regex.Pattern.compile",
            "java.util.regex.Pattern.<init>",
        ],
        &[],
        &[],
    );
    cpu_and_alloc(
        inputs,
        requests,
        "regex-compiled-per-call",
        "Regular expression compiled on each call",
        "compile the pattern once into a static final java.util.regex.Pattern and reuse it \
         (String.matches/split/replaceAll compile on every call)",
        THRESHOLDS,
        &pattern,
    )
}
