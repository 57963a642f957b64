//! Grafana Pyroscope's OTLP ingest limits, and the [`Bounds`] and resource that keep an export
//! within them (the agent's `backend=pyroscope`).
//!
//! Sources: grafana/pyroscope on its main branch (after v2.2.1); file and function named at each
//! rule. The defaults are those of an open-source Pyroscope (`pkg/validation/limits.go`,
//! `RegisterFlags`); a tenant may be configured otherwise.
//!
//! How a request becomes series (`pkg/ingester/otlp/ingest_handler.go`, `export`): each OTLP
//! profile gets the labels `__delta__`, `__otel__`, `__name__` (its profile type's name, see
//! [`crate::profile_types`]), one per resource attribute whose value is a non-empty string, an
//! int or a one-element array of those (`stringValueFromAnyValue`), one per scope attribute,
//! and `service_name`. Every sample attribute then becomes a series label too: the distributor
//! splits a profile into one series per combination of sample-attribute values
//! (`pkg/model/pprofsplit/pprof_split.go`, `VisitSampleSeries`), keeping only `span_id` (and,
//! from v2.1, `trace_id`) on the samples. So label names add up per series, and sample
//! attribute values multiply series.

use opentelemetry::{Array, Value};
use opentelemetry_sdk::Resource;

use super::bounds::Bounds;
use super::SPAN_NAME;

/// Most label names per series (`-validation.max-label-names-per-series`, `limits.go`); a
/// series with more is refused (`validate.go`, `ValidateLabels`).
pub const MAX_LABEL_NAMES: usize = 30;
/// Most samples per profile (`-validation.max-profile-stacktrace-samples`); a profile with
/// more is refused whole (`validate.go`, `ValidateProfile`). Counted per OTLP profile: each
/// OTLP sample becomes one pprof sample (`convert.go`, `convertSampleBack`).
pub const MAX_SAMPLES: usize = 16_000;
/// Most frames per stack (`-validation.max-profile-stacktrace-depth`). Deeper stacks are not
/// refused but cut to their last 1,000 locations (`validate.go`, `ValidateProfile`): the root
/// end is kept and the leaf end, where the time is, dropped.
pub const MAX_STACK_DEPTH: usize = 1_000;
/// Most bytes per profile as converted pprof (`-validation.max-profile-size-bytes`, 4 MiB);
/// a larger one is refused.
pub const MAX_PROFILE_BYTES: usize = 4 << 20;
/// The rate limiter's burst (`-distributor.ingestion-burst-size-mb`, 2 MiB): each series push
/// is charged its labels and pprof size, and a push larger than the burst can never pass
/// (the limiter refuses any charge above its burst), so the real bound on one profile is this.
pub const BURST_BYTES: usize = 2 << 20;
/// Labels every series has before any resource or sample attribute
/// (`ingest_handler.go`, `export`).
pub const FIXED_LABELS: [&str; 4] = ["__delta__", "__otel__", "__name__", "service_name"];

/// What `backend=pyroscope` keeps each profile within: Pyroscope's sample and depth limits
/// as they are, the size with room below the burst for the estimate's error and the series
/// labels, and the endpoint (`span_name`, a few values, the key Pyroscope's own span
/// profiles use) as the only sample attribute. Thread names, pools and states would multiply
/// the series of every profile type (the default per-tenant limit of 1.x is 5,000 series,
/// `-ingester.max-global-series-per-tenant`).
pub const BOUNDS: Bounds = Bounds {
    max_samples: MAX_SAMPLES,
    max_profile_bytes: BURST_BYTES * 3 / 4,
    max_stack_depth: MAX_STACK_DEPTH,
    sample_attributes: Some(&[SPAN_NAME]),
};

/// Resource attributes left out first when a series would have more than
/// [`MAX_LABEL_NAMES`] label names: what the agent detected and the others repeat or do not
/// need (the runtime's long description, the SDK's, the executable), then what identifies the
/// process more finely than the service. `service.name` is never left out.
pub const DROPPED_FIRST: [&str; 10] = [
    "process.runtime.description",
    "telemetry.sdk.version",
    "telemetry.sdk.language",
    "telemetry.sdk.name",
    "process.executable.name",
    "process.runtime.name",
    "process.runtime.version",
    "process.pid",
    "host.name",
    "service.instance.id",
];

/// Whether a resource attribute of this value becomes a label (`ingest_handler.go`,
/// `stringValueFromAnyValue`): a non-empty string, an int, a one-element array of those.
fn is_label(v: &Value) -> bool {
    match v {
        Value::String(s) => !s.as_str().is_empty(),
        Value::I64(_) => true,
        Value::Array(Array::String(a)) => a.len() == 1 && !a[0].as_str().is_empty(),
        Value::Array(Array::I64(a)) => a.len() == 1,
        _ => false,
    }
}

/// The label names a series of this resource gets from Pyroscope, with `sample_keys` sample
/// attribute keys: the fixed ones, one per resource attribute that becomes a label (on 2.x
/// `service.name` beside `service_name`; 1.x merges them, one fewer), and the sample keys.
pub fn label_names(resource: &Resource, sample_keys: usize) -> usize {
    let from_resource = resource.iter().filter(|(_, v)| is_label(v)).count();
    FIXED_LABELS.len() + from_resource + sample_keys
}

/// `resource` with as few attributes left out as it takes for a series with `sample_keys`
/// sample attribute keys to have at most `budget` label names ([`DROPPED_FIRST`] first, then
/// the others by key, last first), and the keys left out.
pub fn fit_resource(
    resource: &Resource,
    sample_keys: usize,
    budget: usize,
) -> (Resource, Vec<String>) {
    let mut over = label_names(resource, sample_keys).saturating_sub(budget);
    if over == 0 {
        return (resource.clone(), Vec::new());
    }
    let mut labels: Vec<String> = resource
        .iter()
        .filter(|(k, v)| is_label(v) && k.as_str() != "service.name")
        .map(|(k, _)| k.as_str().to_owned())
        .collect();
    labels.sort_by(|a, b| b.cmp(a));
    let rank = |k: &String| {
        DROPPED_FIRST
            .iter()
            .position(|d| d == k)
            .unwrap_or(usize::MAX)
    };
    labels.sort_by_key(rank);
    let mut dropped = Vec::new();
    for k in labels {
        if over == 0 {
            break;
        }
        dropped.push(k);
        over -= 1;
    }
    let kept = resource
        .iter()
        .filter(|(k, _)| !dropped.iter().any(|d| d == k.as_str()))
        .map(|(k, v)| opentelemetry::KeyValue::new(k.clone(), v.clone()));
    let mut builder = Resource::builder_empty().with_attributes(kept);
    if let Some(url) = resource.schema_url() {
        builder = builder.with_schema_url(Vec::<opentelemetry::KeyValue>::new(), url.to_owned());
    }
    (builder.build(), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::KeyValue;

    fn resource(extra: usize) -> Resource {
        let mut kvs = vec![
            KeyValue::new("service.name", "shop"),
            KeyValue::new("process.pid", 42),
            KeyValue::new(
                "process.runtime.description",
                "Eclipse Adoptium OpenJDK 64-Bit 25",
            ),
            KeyValue::new("telemetry.sdk.name", "otelprof"),
            KeyValue::new("flag", true),
            KeyValue::new("ratio", 0.5),
            KeyValue::new("empty", ""),
        ];
        for i in 0..extra {
            kvs.push(KeyValue::new(format!("team.{i:02}"), "x"));
        }
        Resource::builder_empty().with_attributes(kvs).build()
    }

    #[test]
    fn labels_are_the_fixed_ones_strings_and_ints() {
        // service.name, process.pid, the description, the SDK name: bool, double and the
        // empty string make no label.
        assert_eq!(label_names(&resource(0), 1), 4 + 4 + 1);
    }

    #[test]
    fn a_resource_that_fits_is_kept_whole() {
        let (r, dropped) = fit_resource(&resource(0), 1, MAX_LABEL_NAMES);
        assert!(dropped.is_empty());
        assert_eq!(r.len(), resource(0).len());
    }

    #[test]
    fn detected_attributes_go_first_then_the_last_keys() {
        // 4 fixed + 4 + 24 extra + 1 sample key = 33: three too many.
        let (r, dropped) = fit_resource(&resource(24), 1, MAX_LABEL_NAMES);
        assert_eq!(
            dropped,
            [
                "process.runtime.description",
                "telemetry.sdk.name",
                "process.pid"
            ]
        );
        assert_eq!(label_names(&r, 1), MAX_LABEL_NAMES);
        // Past the detected ones, the user's go from the last key back; service.name stays.
        let (r, dropped) = fit_resource(&resource(27), 1, MAX_LABEL_NAMES);
        assert_eq!(dropped.len(), 6);
        assert_eq!(&dropped[3..], ["team.26", "team.25", "team.24"]);
        assert!(r.get(&"service.name".into()).is_some());
        assert_eq!(label_names(&r, 1), MAX_LABEL_NAMES);
    }
}
