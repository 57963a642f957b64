//! Contended locks: lock delay per lock class (the lock profile's leaf frame: the monitor's
//! class, or the blocker of a `java.util.concurrent` lock), as the average number of threads
//! kept waiting over the selection's time, with the synchronized collections
//! (`Collections.synchronizedMap`, `Hashtable`, `Vector`, `StringBuffer`) named as such.

use std::collections::HashMap;

use super::evidence::{heaviest, nearest_application, EvidenceStack};
use super::{per_request, percent, Finding, Inputs, Thresholds, MIN_SAMPLES};
use crate::merge::NO_GROUP;
use crate::query::requests::EndpointCounts;
use crate::select::ProfileType;
use otelprof_primitives::thread_role;

/// Thresholds on the lock delay over the selection's wall-clock time (threads waiting on
/// average: 0.05 is one thread waiting 5 % of the time).
pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.05,
    warning: 0.25,
    critical: 1.0,
};

/// Classes whose every method takes one lock: the collection is the bottleneck.
const SYNCHRONIZED_COLLECTIONS: &[&str] = &[
    "java.util.Collections$Synchronized",
    "java.util.Hashtable",
    "java.util.Properties",
    "java.util.Vector",
    "java.util.Stack",
    "java.lang.StringBuffer",
];

fn is_synchronized_collection(class: &str) -> bool {
    SYNCHRONIZED_COLLECTIONS
        .iter()
        .any(|p| class.starts_with(p))
}

#[derive(Default)]
struct PerLock<'a> {
    value: f64,
    count: f64,
    stacks: HashMap<&'a [u32], f64>,
    endpoints: HashMap<&'a str, f64>,
}

pub fn contended(inputs: &Inputs, requests: &EndpointCounts) -> Vec<Finding> {
    let m = &inputs.lock;
    let Some((start, end)) = m.window else {
        return Vec::new();
    };
    let elapsed = (end - start) as f64 * m.instances.len().max(1) as f64;
    if elapsed <= 0.0 {
        return Vec::new();
    }
    let mut locks: HashMap<u32, PerLock> = HashMap::new();
    for s in &m.stacks {
        let Some(&leaf) = s.frames.last() else {
            continue;
        };
        let l = locks.entry(leaf).or_default();
        l.value += s.value;
        l.count += s.count;
        *l.stacks.entry(&s.frames).or_default() += s.value;
        let group = m.group(s.group);
        if group != NO_GROUP && !thread_role::is_role_frame(group) {
            *l.endpoints.entry(group).or_default() += s.value;
        }
    }
    let mut out = Vec::new();
    for (leaf, l) in locks {
        let share = l.value / elapsed;
        let Some(severity) = THRESHOLDS.severity(share) else {
            continue;
        };
        if l.count < MIN_SAMPLES {
            continue;
        }
        let class = m.frame(leaf).to_owned();
        let stacks = heaviest(l.stacks, 3);
        // The leaf is the lock's class, not a method that took it.
        let method = stacks.first().and_then(|(frames, _)| {
            nearest_application(m, frames.split_last().map_or(&[][..], |(_, rest)| rest))
        });
        let endpoints: Vec<(String, f64)> = heaviest(l.endpoints, 5)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let kind = if is_synchronized_collection(&class) {
            "Contended synchronized collection"
        } else {
            "Contended lock"
        };
        let mut title = format!("{kind} {class}");
        if let Some((method, _)) = &method {
            title.push_str(&format!(" in {method}"));
        }
        let why = format!(
            "{:.3} threads waiting on average ({} of one thread's time over {:.1} s{}; {} \
             contentions) {}",
            share,
            percent(share),
            (end - start) as f64 / 1e9,
            if m.instances.len() > 1 {
                format!(" × {} instances", m.instances.len())
            } else {
                String::new()
            },
            l.count.round(),
            THRESHOLDS.passed(share)
        );
        out.push(Finding {
            rule: "contended-lock",
            title,
            ty: ProfileType::Lock,
            value: l.value,
            unit: m.unit.clone(),
            share,
            of: "one thread's time (threads waiting)",
            per_request: per_request(&endpoints, requests),
            method: method.as_ref().map(|(m, _)| m.clone()),
            file: method.map(|(_, f)| f).filter(|f| !f.is_empty()),
            stacks: stacks
                .into_iter()
                .map(|(frames, value)| EvidenceStack {
                    frames: frames.iter().map(|&f| m.frame(f).to_owned()).collect(),
                    value,
                })
                .collect(),
            endpoints,
            traces: Vec::new(),
            fix: if is_synchronized_collection(&class) {
                "replace the synchronized collection with a concurrent one (ConcurrentHashMap, \
                 CopyOnWriteArrayList, StringBuilder per thread)"
            } else {
                "hold the lock for less (move work out of the critical section), split it, or \
                 use a concurrent structure"
            },
            severity,
            why,
        });
    }
    out
}
