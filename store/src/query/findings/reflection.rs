//! Reflection and class loading or lookup on a hot path: the cost of `Method.invoke`,
//! `Constructor.newInstance`, `Class.forName` and method lookups themselves (what the invoked
//! method does is not counted: the pattern needs no application frame below it). Stacks in a
//! static initialiser (`<clinit>`) are left out: a class is initialised once, so what its
//! initialisation looks up is start-up, not a hot path.

use super::evidence::Pattern;
use super::{cpu_and_alloc, Finding, Inputs, Thresholds};
use crate::query::requests::EndpointCounts;

pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.02,
    warning: 0.05,
    critical: 0.20,
};

pub fn hot_path(inputs: &Inputs, requests: &EndpointCounts) -> Option<Finding> {
    let pattern = Pattern::new(
        &[
            "java.lang.reflect.Method.invoke",
            "java.lang.reflect.Constructor.newInstance",
            "java.lang.Class.forName",
            "java.lang.Class.getMethod",
            "java.lang.Class.getDeclaredMethod",
            "java.lang.Class.getMethods",
            "java.lang.Class.getDeclaredMethods",
            "java.lang.Class.getField",
            "java.lang.Class.getDeclaredField",
            "java.lang.ClassLoader.loadClass",
        ],
        &[],
        &["*.<clinit>"],
    );
    cpu_and_alloc(
        inputs,
        requests,
        "reflection-hot-path",
        "Reflection or class lookup on a hot path",
        "look the Method/Class up once and cache it, or use a MethodHandle or a direct call",
        THRESHOLDS,
        &pattern,
    )
}
