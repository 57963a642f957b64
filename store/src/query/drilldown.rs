//! What `drilldown` computes, the span-to-profile view: the samples of one trace, or one span
//! (and, with `children`, the spans it is the local root of), with the endpoint and the time
//! window they were taken in.
//!
//! Short spans often get no samples at all: a 2 ms request sampled every 10 ms of CPU is
//! missed most of the time. Then the honest answer is "no samples", and the useful one is the
//! profile of the span's endpoint, which aggregates every request like it.

use std::collections::BTreeSet;

use otel_bridge::Link;

use crate::error::Error;
use crate::merge::{Merged, SpanStats};
use crate::query::{self, Spec};
use crate::reader::Profiles;
use crate::select::{Measure, ProfileType, Selector};

/// What to drill into.
#[derive(Clone, Debug)]
pub struct Target {
    pub selector: Selector,
    pub children: bool,
    /// What to add up, and whether frames are lines ([`Spec::view`]).
    pub measure: Measure,
    pub lines: bool,
}

/// The result.
pub struct Drilldown {
    pub merged: Merged,
    /// Spans whose samples are included, with their stats.
    pub spans: Vec<(Link, SpanStats)>,
    pub notes: Vec<String>,
    /// The endpoint-level profile offered when the span got no samples.
    pub fallback: Option<(String, Merged)>,
}

/// Spans of the trace whose local root is one of `roots` (from the `local_root_span_id`
/// label, which pprof files carry; OTLP carries it only when the agent is asked to).
fn children_of(
    source: &impl Profiles,
    ty: Option<ProfileType>,
    target: &Target,
    base: &Selector,
    roots: &[[u8; 8]],
) -> Result<(Vec<[u8; 8]>, bool), Error> {
    let mut trace_only = base.clone();
    trace_only.span_ids.clear();
    let spec = Spec::new(ty, &trace_only).view(target.measure, target.lines);
    let (all, _) = query::merge(source, spec.spans())?;
    let mut found = BTreeSet::new();
    let mut any_root_label = false;
    for (link, stats) in &all.spans {
        if let Some(root) = &stats.local_root_span_id {
            any_root_label = true;
            if roots.iter().any(|r| otel_bridge::model::hex(r) == *root) {
                found.insert(link.span_id);
            }
        }
    }
    let mut spans: Vec<[u8; 8]> = roots.to_vec();
    spans.extend(found.into_iter().filter(|s| !roots.contains(s)));
    Ok((spans, any_root_label))
}

/// Drills into `target`. One pass over the files, or two with `--children`: the selection,
/// the whole trace (for its endpoint and other spans), and every endpoint (for the fallback).
pub fn drill(
    source: &impl Profiles,
    ty: Option<ProfileType>,
    target: &Target,
) -> Result<(Drilldown, ProfileType), Error> {
    let view = |spec: Spec| spec.view(target.measure, target.lines);
    let mut selector = target.selector.clone();
    let mut notes = Vec::new();
    if target.children && !selector.span_ids.is_empty() {
        add_children(source, ty, target, &mut selector, &mut notes)?;
    }
    let mut trace_only = selector.clone();
    trace_only.span_ids.clear();
    trace_only.conditions.clear();
    let endpoints = Selector {
        conditions: target.selector.conditions.clone(),
        from: target.selector.from,
        to: target.selector.to,
        ..Selector::default()
    };
    let [(merged, ty), (trace, _), (by_endpoint, _)] = query::merge_many(
        source,
        &[
            view(Spec::new(ty, &selector)).spans(),
            view(Spec::new(ty, &trace_only)).spans(),
            view(Spec::new(ty, &endpoints)).by(Some("span_name")),
        ],
    )?;
    let mut spans: Vec<(Link, SpanStats)> =
        merged.spans.iter().map(|(l, s)| (*l, s.clone())).collect();
    spans.sort_by(|a, b| b.1.value.total_cmp(&a.1.value));

    let mut fallback = None;
    if merged.stacks.is_empty() {
        let trace = if trace_only.trace_id.is_some() {
            trace
        } else {
            Merged::default()
        };
        fallback = no_samples(target, &trace, &by_endpoint, &mut notes);
    }
    Ok((
        Drilldown {
            merged,
            spans,
            notes,
            fallback,
        },
        ty,
    ))
}

/// With `--children`: adds to `selector` the spans whose local root is one of its spans, and
/// says in `notes` how many, or why none can be.
fn add_children(
    source: &impl Profiles,
    ty: Option<ProfileType>,
    target: &Target,
    selector: &mut Selector,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    let (spans, labelled) = children_of(source, ty, target, selector, &selector.span_ids)?;
    if !labelled {
        notes.push(
            "--children: these profiles carry no local_root_span_id, so only the span itself \
             is shown (pprof files from the agent's out= have it; drop --span-id to see the \
             whole trace)"
                .to_owned(),
        );
    } else if spans.len() > selector.span_ids.len() {
        notes.push(format!(
            "--children: {} spans with this local root included",
            spans.len() - selector.span_ids.len()
        ));
    }
    selector.span_ids = spans;
    Ok(())
}

/// When the selection got no samples: says so in `notes`, names the trace's other spans that
/// have some, and offers the profile of the endpoint (from the `trace`'s spans), or the
/// endpoints to pick from.
fn no_samples(
    target: &Target,
    trace: &Merged,
    by_endpoint: &Merged,
    notes: &mut Vec<String>,
) -> Option<(String, Merged)> {
    let endpoint = trace
        .spans
        .values()
        .flat_map(|s| s.endpoints.iter().cloned())
        .next();
    let what = match (target.selector.span_ids.first(), target.selector.trace_id) {
        (Some(s), _) => format!("span {}", otel_bridge::model::hex(s)),
        (None, Some(t)) => format!("trace {}", otel_bridge::model::hex(&t)),
        (None, None) => "the selection".to_owned(),
    };
    notes.push(format!(
        "{what} got no samples: spans shorter than the sampling interval (or waiting off-CPU) \
         are often missed, and unsampled traces carry no trace link"
    ));
    if !trace.stacks.is_empty() {
        let mut other: Vec<String> = trace
            .spans
            .keys()
            .map(|l| otel_bridge::model::hex(&l.span_id))
            .collect();
        other.sort();
        other.truncate(5);
        notes.push(format!(
            "other spans of this trace have samples: {}",
            other.join(", ")
        ));
    }
    match endpoint {
        Some(endpoint) => endpoint_profile(endpoint, by_endpoint, notes),
        None => {
            let mut names: Vec<&str> = by_endpoint
                .groups
                .iter()
                .map(String::as_str)
                .filter(|g| *g != crate::merge::NO_GROUP)
                .collect();
            names.truncate(10);
            if !names.is_empty() {
                notes.push(format!(
                    "its endpoint is not known from the profiles; pick one for the \
                     endpoint-level profile with --endpoint NAME (seen: {})",
                    names.join(", ")
                ));
            }
            None
        }
    }
}

/// The profile of `endpoint` (every request to it), from the merge grouped by endpoint.
fn endpoint_profile(
    endpoint: String,
    by_endpoint: &Merged,
    notes: &mut Vec<String>,
) -> Option<(String, Merged)> {
    let g = by_endpoint.groups.iter().position(|g| *g == endpoint)?;
    let mut m = by_endpoint.clone();
    let g = u32::try_from(g).unwrap_or(u32::MAX);
    m.stacks.retain(|s| s.group == g);
    notes.push(format!(
        "instead, the profile of its endpoint {endpoint:?} (every request to it) \
         follows; this is `otelprof top --where 'span_name={endpoint}'`"
    ));
    Some((endpoint, m))
}
