//! GC pressure: the garbage collector's threads' share of the process's CPU (the `[GC]` role
//! frame), with the allocation rate and the top allocating sites from the alloc profile.

use std::collections::HashMap;

use super::evidence::{heaviest, nearest_application, EvidenceStack};
use super::{per_request, percent, Finding, Inputs, Thresholds, MIN_SAMPLES};
use crate::merge::NO_GROUP;
use crate::query::requests::EndpointCounts;
use crate::select::ProfileType;
use otelprof_primitives::thread_role;

pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.05,
    warning: 0.10,
    critical: 0.25,
};

const GC_ROLE: &str = "[GC]";

pub fn pressure(inputs: &Inputs, requests: &EndpointCounts) -> Option<Finding> {
    let m = &inputs.cpu;
    let (mut gc, mut count) = (0.0, 0.0);
    for s in &m.stacks {
        if s.frames.first().is_some_and(|&f| m.frame(f) == GC_ROLE) {
            gc += s.value;
            count += s.count;
        }
    }
    let total = m.total();
    if total <= 0.0 || count < MIN_SAMPLES {
        return None;
    }
    let share = gc / total;
    let severity = THRESHOLDS.severity(share)?;
    // Where the allocations come from: the alloc profile's heaviest stacks and endpoints.
    let a = &inputs.alloc;
    let mut stacks: HashMap<&[u32], f64> = HashMap::new();
    let mut endpoints: HashMap<&str, f64> = HashMap::new();
    for s in &a.stacks {
        *stacks.entry(&s.frames).or_default() += s.value;
        let group = a.group(s.group);
        if group != NO_GROUP && !thread_role::is_role_frame(group) {
            *endpoints.entry(group).or_default() += s.value;
        }
    }
    let stacks = heaviest(stacks, 3);
    let method = stacks
        .first()
        .and_then(|(frames, _)| nearest_application(a, frames));
    let endpoints: Vec<(String, f64)> = heaviest(endpoints, 5)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    let mut why = format!(
        "GC threads used {} of the CPU ({} samples) {}",
        percent(share),
        count.round(),
        THRESHOLDS.passed(share)
    );
    if let Some((start, end)) = a.window.filter(|(s, e)| e > s) {
        let seconds = (end - start) as f64 / 1e9 * a.instances.len().max(1) as f64;
        why.push_str(&format!(
            "; allocation rate {:.1} MB/s",
            a.total() / seconds / 1e6
        ));
    }
    let evidence: Vec<EvidenceStack> = stacks
        .into_iter()
        .map(|(frames, value)| EvidenceStack {
            frames: frames.iter().map(|&f| a.frame(f).to_owned()).collect(),
            value,
        })
        .collect();
    Some(Finding {
        rule: "gc-pressure",
        title: match &method {
            Some((method, _)) => format!("GC pressure (most allocated in {method})"),
            None => "GC pressure".to_owned(),
        },
        ty: ProfileType::Cpu,
        value: gc,
        unit: m.unit.clone(),
        share,
        of: "CPU",
        per_request: per_request(&endpoints, requests),
        method: method.as_ref().map(|(m, _)| m.clone()),
        file: method.map(|(_, f)| f).filter(|f| !f.is_empty()),
        stacks: evidence,
        endpoints,
        traces: Vec::new(),
        fix: "allocate less on the hot path (reuse buffers, avoid boxing and temporary \
              collections), or give the heap more room",
        severity,
        why,
    })
}
