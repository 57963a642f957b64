//! The JIT compiler still busy: the `[JIT compiler]` threads' share of the process's CPU in the
//! later half of the selection, when it has not fallen from the earlier half. Compiling is
//! what a JVM does after start-up and after a deployment, and it fades as the code warms up; a
//! share that stays up means code that keeps being compiled again (deoptimisation loops, code
//! generated at run time, a code cache too small to keep what was compiled).

use super::{percent, Finding, Inputs, Thresholds, MIN_SAMPLES};
use crate::merge::Merged;
use crate::query::requests::EndpointCounts;
use crate::select::ProfileType;

pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.05,
    warning: 0.10,
    critical: 0.25,
};

/// The role frame of the JIT compiler's threads.
pub const JIT_ROLE: &str = "[JIT compiler]";

/// The least selection the rule looks at (ns): its later half starts 15 s or more after its
/// start. A JVM's first seconds compile most of what it runs, and a few large methods can keep
/// the second compiler busy for seconds after; a shorter selection cannot tell that from
/// trouble.
pub const MIN_WINDOW: i64 = 30_000_000_000;

/// Whether the later half's share must be at least this part of the earlier half's: a share
/// that halves from one half to the next is a warm-up fading, not trouble.
const STEADY: f64 = 0.5;

/// The JIT threads' CPU in `m` (value, samples) and `m`'s total.
pub fn jit_cpu(m: &Merged) -> (f64, f64, f64) {
    let (mut value, mut count) = (0.0, 0.0);
    for s in &m.stacks {
        if s.frames.first().is_some_and(|&f| m.frame(f) == JIT_ROLE) {
            value += s.value;
            count += s.count;
        }
    }
    (value, count, m.total())
}

pub fn busy(inputs: &Inputs, _requests: &EndpointCounts) -> Option<Finding> {
    let late = inputs.cpu_late.as_ref()?;
    let (jit, _, total) = jit_cpu(&inputs.cpu);
    let (jit_late, count_late, total_late) = jit_cpu(late);
    if count_late < MIN_SAMPLES || total_late <= 0.0 {
        return None;
    }
    let share = jit_late / total_late;
    let early_total = total - total_late;
    let early = if early_total > 0.0 {
        ((jit - jit_late) / early_total).max(0.0)
    } else {
        0.0
    };
    if share < STEADY * early {
        return None;
    }
    let severity = THRESHOLDS.severity(share)?;
    let why = format!(
        "JIT compiler threads used {} of the CPU in the later half of the selection \
         ({} samples) {}, {} in the earlier half: not a warm-up fading",
        percent(share),
        count_late.round(),
        THRESHOLDS.passed(share),
        percent(early)
    );
    // The compiler's own stacks (native frames under the role frame, when the agent records
    // them) are the evidence.
    let mut stacks: Vec<_> = late
        .stacks
        .iter()
        .filter(|s| s.frames.first().is_some_and(|&f| late.frame(f) == JIT_ROLE))
        .map(|s| super::EvidenceStack {
            frames: s.frames.iter().map(|&f| late.frame(f).to_owned()).collect(),
            value: s.value,
        })
        .collect();
    stacks.sort_by(|a, b| b.value.total_cmp(&a.value));
    stacks.truncate(3);
    Some(Finding {
        rule: "jit-busy",
        title: "JIT compiler busy past the warm-up".to_owned(),
        ty: ProfileType::Cpu,
        value: jit_late,
        unit: late.unit.clone(),
        share,
        of: "CPU",
        per_request: None,
        method: None,
        file: None,
        stacks,
        endpoints: Vec::new(),
        traces: Vec::new(),
        fix: "look for code compiled again and again: classes or lambdas generated per call, \
              deoptimisation loops (-Xlog:deoptimization), or a full code cache \
              (-XX:ReservedCodeCacheSize)",
        severity,
        why,
    })
}
