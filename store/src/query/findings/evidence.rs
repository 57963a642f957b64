//! How a pattern rule reads a merge: which frames are the application's, which stacks show
//! the pattern, and what those stacks add up to (cost, endpoints, the responsible method and
//! the heaviest stacks). Rules describe a pattern with globs ([`Pattern`]); this file is the
//! one place that walks stacks for them.

use std::collections::HashMap;

use crate::focus::Glob;
use crate::merge::{Merged, NO_GROUP};
use otelprof_primitives::thread_role;

/// Package prefixes of the JDK, the JVM's own frames and the frameworks a service runs on:
/// a frame under none of them (and not native) is the application's.
const NOT_APPLICATION: &[&str] = &[
    "java.",
    "javax.",
    "jdk.",
    "sun.",
    "com.sun.",
    "jakarta.",
    "kotlin.",
    "scala.",
    "org.apache.catalina.",
    "org.apache.coyote.",
    "org.apache.tomcat.",
    "org.apache.juli.",
    "org.apache.logging.",
    "org.apache.commons.logging.",
    "org.slf4j.",
    "ch.qos.logback.",
    "org.springframework.",
    "org.eclipse.jetty.",
    "io.netty.",
    "io.undertow.",
    "io.opentelemetry.",
    "com.zaxxer.hikari.",
    "org.apache.commons.pool2.",
    "org.apache.commons.dbcp2.",
    "com.mchange.v2.",
    "otelprof.internal.",
    "otelprof.otel.",
];

/// Frames of logging libraries (the JDK's own included).
pub const LOGGING: &[&str] = &[
    "java.util.logging.*",
    "org.apache.logging.*",
    "org.apache.commons.logging.*",
    "org.apache.juli.*",
    "org.slf4j.*",
    "ch.qos.logback.*",
    "*.log.*",
    "*.logging.*",
    "*Logger.*",
];

/// Whether a frame is native code (a C/C++ symbol, a library, the kernel) rather than Java.
fn is_native(name: &str, file: &str) -> bool {
    if name.starts_with('[') || name.contains("::") || !name.contains('.') {
        return true;
    }
    !(file.is_empty()
        || file.ends_with(".java")
        || file.ends_with(".kt")
        || file.ends_with(".scala")
        || file.ends_with(".groovy"))
}

/// Whether frame `name` (from `file`) is the application's: Java, and neither JDK nor framework.
pub fn is_application(name: &str, file: &str) -> bool {
    !is_native(name, file) && !NOT_APPLICATION.iter().any(|p| name.starts_with(p))
}

/// Globs of a rule, compiled once.
pub fn globs(patterns: &[&str]) -> Vec<Glob> {
    patterns
        .iter()
        .filter_map(|p| Glob::parse(p).ok())
        .collect()
}

/// A pattern in the stacks: a trigger frame (the costly JDK machinery) with no application
/// frame below it, called from the application, optionally under one of `under` and never
/// with one of `unless` on the stack.
pub struct Pattern {
    pub triggers: Vec<Glob>,
    pub under: Vec<Glob>,
    pub unless: Vec<Glob>,
}

impl Pattern {
    pub fn new(triggers: &[&str], under: &[&str], unless: &[&str]) -> Pattern {
        Pattern {
            triggers: globs(triggers),
            under: globs(under),
            unless: globs(unless),
        }
    }
}

fn any(globs: &[Glob], name: &str) -> bool {
    globs.iter().any(|g| g.matches(name))
}

/// One of the heaviest stacks showing a pattern: frames root first, and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct EvidenceStack {
    pub frames: Vec<String>,
    pub value: f64,
}

/// What the stacks of a merge that show a pattern add up to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    pub value: f64,
    pub count: f64,
    /// The whole merge's total (the 100 % of the share).
    pub total: f64,
    /// The application frame nearest the pattern on the heaviest stacks, with its file.
    pub method: Option<(String, String)>,
    pub stacks: Vec<EvidenceStack>,
    /// Value per endpoint (`span_name`), largest first.
    pub endpoints: Vec<(String, f64)>,
    /// Value per application method, largest first (all of them, for the reader's `why`).
    pub methods: Vec<(String, f64)>,
}

impl Evidence {
    pub fn share(&self) -> f64 {
        if self.total > 0.0 {
            self.value / self.total
        } else {
            0.0
        }
    }
}

/// The stacks of `m` (in the groups `keep` accepts) that show `pattern`, added up.
pub fn find(m: &Merged, pattern: &Pattern, keep: impl Fn(&str) -> bool) -> Evidence {
    let n = m.frames.len();
    // With source lines a frame is `name (File.java:123)`: rules read the name.
    let names = |i: usize| m.frames.get(i).map_or("", |f| bare(f));
    let files = |i: usize| m.files.get(i).map_or("", String::as_str);
    let app: Vec<bool> = (0..n).map(|i| is_application(names(i), files(i))).collect();
    let trigger: Vec<bool> = (0..n).map(|i| any(&pattern.triggers, names(i))).collect();
    let under: Vec<bool> = (0..n).map(|i| any(&pattern.under, names(i))).collect();
    let unless: Vec<bool> = (0..n).map(|i| any(&pattern.unless, names(i))).collect();
    let flag = |v: &[bool], f: u32| v.get(f as usize).copied().unwrap_or(false);
    let mut e = Evidence {
        total: m.total(),
        ..Evidence::default()
    };
    let mut by_stack: HashMap<&[u32], f64> = HashMap::new();
    let mut by_endpoint: HashMap<&str, f64> = HashMap::new();
    let mut by_method: HashMap<u32, f64> = HashMap::new();
    for s in &m.stacks {
        let group = m.group(s.group);
        if !keep(group) {
            continue;
        }
        let Some(last_app) = s.frames.iter().rposition(|&f| flag(&app, f)) else {
            continue;
        };
        let below = s.frames.get(last_app + 1..).unwrap_or(&[]);
        let Some(t) = below.iter().position(|&f| flag(&trigger, f)) else {
            continue;
        };
        let above = s.frames.get(..last_app + 1 + t).unwrap_or(&[]);
        if !pattern.under.is_empty() && !above.iter().any(|&f| flag(&under, f)) {
            continue;
        }
        if s.frames.iter().any(|&f| flag(&unless, f)) {
            continue;
        }
        e.value += s.value;
        e.count += s.count;
        *by_stack.entry(&s.frames).or_default() += s.value;
        if group != NO_GROUP && !thread_role::is_role_frame(group) {
            *by_endpoint.entry(group).or_default() += s.value;
        }
        if let Some(&f) = s.frames.get(last_app) {
            *by_method.entry(f).or_default() += s.value;
        }
    }
    e.stacks = heaviest(by_stack, 3)
        .into_iter()
        .map(|(frames, value)| EvidenceStack {
            frames: frames.iter().map(|&f| m.frame(f).to_owned()).collect(),
            value,
        })
        .collect();
    e.endpoints = heaviest(by_endpoint, usize::MAX)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    let methods = heaviest(by_method, usize::MAX);
    e.method = methods
        .first()
        .map(|&(f, _)| (m.frame(f).to_owned(), m.file(f).to_owned()));
    e.methods = methods
        .into_iter()
        .map(|(f, v)| (m.frame(f).to_owned(), v))
        .collect();
    e
}

/// A frame's name without its source line (` (File.java:123)`).
pub fn bare(frame: &str) -> &str {
    frame.split_once(" (").map_or(frame, |(n, _)| n)
}

/// The source line of a frame of a merge by lines: `File.java:123` of `name (File.java:123)`.
pub fn line_of(frame: &str) -> Option<&str> {
    let (_, rest) = frame.split_once(" (")?;
    rest.strip_suffix(')').filter(|l| l.contains(':'))
}

/// The `limit` largest entries, largest first (ties by key, for a stable answer).
pub fn heaviest<K: Ord + Copy + std::hash::Hash>(
    map: HashMap<K, f64>,
    limit: usize,
) -> Vec<(K, f64)> {
    let mut v: Vec<(K, f64)> = map.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(limit);
    v
}

/// The application frame nearest the leaf of `frames` (root first), with its file.
pub fn nearest_application(m: &Merged, frames: &[u32]) -> Option<(String, String)> {
    frames
        .iter()
        .rev()
        .find(|&&f| is_application(m.frame(f), m.file(f)))
        .map(|&f| (m.frame(f).to_owned(), m.file(f).to_owned()))
}
