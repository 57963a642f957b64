//! Grafana's traces-to-profiles, end to end as far as this side goes: the real OpenTelemetry
//! Java SDK (set up as autoconfigure does, so otelprof's span processor is in it) exports local
//! root spans carrying `pyroscope.profile.id` = their own span id, and with `links=local_root`
//! every sample of a request is linked to that id, which is what Grafana asks Pyroscope for
//! (docs/pyroscope.md). Spans are read from the exporter the program gives the SDK; samples
//! from the OTLP the agent sent, decoded by the independent receiver (tests/python).

use std::collections::HashMap;

use otelprof_tests::{
    jdk17, jdk25, otel_classes, otel_sdk_jar, Jdk, JvmRun, OtlpProtocol, Receiver,
};
use serde_json::Value;

const MAIN: &str = "otelprof.tests.otel.ProfileIdSpans";
const METHODS: [&str; 4] = ["rootWork", "dbWork", "rowWork", "renderWork"];

/// An exported span: trace, parent (None: no parent), parent remote, `pyroscope.profile.id`.
struct ExportedSpan {
    trace: String,
    parent: Option<String>,
    remote_parent: bool,
    profile_id: Option<String>,
}

struct Run {
    spans: HashMap<String, ExportedSpan>,
    /// Work method → the spans that worked in it.
    work: HashMap<String, Vec<String>>,
    summary: Value,
}

fn run(jdk: Jdk, options: &str) -> Run {
    let receiver = Receiver::start(OtlpProtocol::Http);
    let out = JvmRun::new(jdk, MAIN)
        .javaagent()
        .agent(&format!(
            "cpu=2ms,period=2s,{options},{}",
            receiver.agent_options()
        ))
        .classpath(&[otel_classes(), otel_sdk_jar()])
        .run();
    out.assert_clean_exit();
    assert!(
        out.stdout.contains("providers=1 customizers=1"),
        "otelprof's SPI provider must customize the SDK: {}",
        out.stdout.lines().last().unwrap_or("")
    );
    let mut spans = HashMap::new();
    let mut work: HashMap<String, Vec<String>> = HashMap::new();
    for l in out.stdout.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            ["span", id, trace, parent, remote, profile_id] => {
                let some = |s: &str| (s != "-").then(|| s.to_owned());
                spans.insert(
                    id.to_string(),
                    ExportedSpan {
                        trace: trace.to_string(),
                        parent: some(parent),
                        remote_parent: *remote == "1",
                        profile_id: some(profile_id),
                    },
                );
            }
            ["work", method, id] => work
                .entry(method.to_string())
                .or_default()
                .push(id.to_string()),
            _ => {}
        }
    }
    let summary = receiver.check();
    let v = summary["violations"].as_array().unwrap();
    assert!(v.is_empty(), "docs/output-format.md violations: {v:#?}");
    Run {
        spans,
        work,
        summary,
    }
}

impl Run {
    /// The local root of `span`: itself when its parent is absent or remote, else its parent's.
    fn local_root(&self, span: &str) -> String {
        let mut id = span.to_owned();
        for _ in 0..64 {
            let s = &self.spans[&id];
            match &s.parent {
                Some(p) if !s.remote_parent => id = p.clone(),
                _ => return id,
            }
        }
        panic!("no local root for {span}")
    }

    /// The span each work method's samples should be linked to, by the span working there
    /// (through `to_link`), and the share of the linked samples in work methods that are.
    fn linked_right(&self, to_link: impl Fn(&str) -> String) -> (f64, f64) {
        let mut expected: HashMap<String, (String, &'static str)> = HashMap::new();
        for method in METHODS {
            for span in &self.work[method] {
                expected.insert(span.clone(), (to_link(span), method));
            }
        }
        let (mut in_work, mut right) = (0.0, 0.0);
        for link in self.summary["links"].as_array().unwrap() {
            let (span, value) = (link[1].as_str().unwrap(), link[2].as_f64().unwrap());
            let frames: Vec<&str> = link[3]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let Some(method) = METHODS.iter().find(|m| {
                frames
                    .iter()
                    .any(|f| f.ends_with(&format!("ProfileIdSpans.{m}")))
            }) else {
                continue;
            };
            in_work += value;
            // Right if some span working in this method is to be linked as this sample is.
            if expected
                .values()
                .any(|(want, m)| m == method && want == span)
            {
                right += value;
            }
        }
        (in_work, right)
    }
}

/// Local roots, and only they, carry `pyroscope.profile.id` = their own span id, whether
/// their parent is absent or remote.
fn assert_profile_ids(r: &Run) {
    let (mut roots, mut remote_roots, mut others) = (0, 0, 0);
    for (id, s) in &r.spans {
        let root = s.parent.is_none() || s.remote_parent;
        if root {
            roots += 1;
            remote_roots += usize::from(s.remote_parent);
            assert_eq!(s.profile_id.as_deref(), Some(id.as_str()), "root {id}");
        } else {
            others += 1;
            assert_eq!(s.profile_id, None, "span {id} is not a local root");
        }
    }
    println!("{roots} local roots ({remote_roots} with a remote parent), {others} other spans");
    assert!(
        roots >= 30 && remote_roots >= 10,
        "{roots} roots, {remote_roots} remote"
    );
    assert_eq!(
        others,
        3 * roots,
        "a child, a grandchild and a pooled child per request"
    );
    for id in r.spans.keys() {
        assert_eq!(id.len(), 16);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
}

#[test]
fn local_roots_carry_their_profile_id_and_links_name_them() {
    for jdk in [jdk17(), jdk25()] {
        let r = run(jdk.clone(), "links=local_root");
        assert_profile_ids(&r);
        // Every sample of a request, in the root's own work, its child's, grandchild's and
        // the child on a pool thread, is linked to the root: found by the root's
        // pyroscope.profile.id. The trace is the SDK's.
        let (in_work, right) = r.linked_right(|span| r.local_root(span));
        println!(
            "{}: {right} of {in_work} linked samples in work methods name their local root",
            jdk.name
        );
        assert!(in_work >= 500.0, "too few samples: {in_work}");
        assert!(right >= 0.99 * in_work, "{right} of {in_work}");
        for link in r.summary["links"].as_array().unwrap() {
            let (trace, span) = (link[0].as_str().unwrap(), link[1].as_str().unwrap());
            if let Some(s) = r.spans.get(span) {
                assert_eq!(s.trace, trace);
                assert!(
                    s.profile_id.is_some(),
                    "a link names a span that is no local root"
                );
            }
        }
        assert_eq!(r.summary["links_without_trace"], 0);
    }
}

/// The default, `links=span`: each sample names the span that worked, so a root's id finds
/// only the root's own samples (why Grafana needs `links=local_root`); the preset sends local
/// roots without their trace ids.
#[test]
fn links_name_the_working_span_by_default_and_the_preset_drops_trace_ids() {
    let r = run(jdk17(), "links=span");
    assert_profile_ids(&r);
    let (in_work, right) = r.linked_right(|span| span.to_owned());
    assert!(
        right >= 0.99 * in_work && in_work >= 500.0,
        "{right} of {in_work}"
    );
    let (_, by_root) = r.linked_right(|span| r.local_root(span));
    assert!(
        by_root < 0.5 * in_work,
        "children's work is not found by the root's id: {by_root} of {in_work}"
    );

    let r = run(jdk17(), "backend=pyroscope");
    assert_profile_ids(&r);
    let (in_work, right) = r.linked_right(|span| r.local_root(span));
    assert!(
        right >= 0.99 * in_work && in_work >= 500.0,
        "{right} of {in_work}"
    );
    let links = r.summary["links"].as_array().unwrap();
    assert!(links.iter().all(|l| l[0] == ""), "trace ids left out");
    assert!(r.summary["links_without_trace"].as_u64().unwrap() > 0);
    assert_eq!(
        r.summary["sample_attribute_keys"],
        serde_json::json!(["span_name"])
    );
}
