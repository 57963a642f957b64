//! Request counts per endpoint, for per-request comparisons: read from the OTLP metrics in a
//! store, namely the HTTP server duration histogram of the semantic conventions
//! (`http.server.request.duration`, attributes `http.request.method` and `http.route`), whose
//! count is the number of requests. The endpoint is `METHOD route`, the name the conventions
//! give the server span, which is the `span_name` of the samples.

use std::collections::HashMap;
use std::path::PathBuf;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, AggregationTemporality, Metric};
use otel_bridge::gzip;
use prost::Message as _;

use crate::layout::is_metrics_file;
use crate::select::{Op, Selector};
use crate::walk::walk;

pub const HTTP_SERVER_DURATION: &str = "http.server.request.duration";

/// The most of one stored metrics request read, and inflated (bytes).
const METRICS_LIMIT: u64 = 64 << 20;

/// Requests per endpoint on each side of a diff.
#[derive(Debug, Default)]
pub struct EndpointCounts {
    base: HashMap<String, f64>,
    head: HashMap<String, f64>,
}

impl EndpointCounts {
    pub fn get(&self, head: bool, endpoint: &str) -> Option<f64> {
        let side = if head { &self.head } else { &self.base };
        side.get(endpoint).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.base.is_empty() || self.head.is_empty()
    }

    /// The base side of `base` and the head side of `head`: counts of two sides read apart.
    pub fn sides(base: EndpointCounts, head: EndpointCounts) -> EndpointCounts {
        EndpointCounts {
            base: base.base,
            head: head.head,
        }
    }
}

/// The stored metrics requests under the store directories among `paths`.
fn metrics_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter(|p| p.is_dir())
        .flat_map(|p| walk(p, is_metrics_file).files)
        .collect()
}

fn text(kv: &KeyValue) -> Option<String> {
    match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        any_value::Value::DoubleValue(d) => Some(d.to_string()),
        _ => None,
    }
}

fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|kv| kv.key == key).and_then(text)
}

/// Whether the resource passes the selector's conditions on keys the resource has (sample
/// keys such as `span_name` say nothing about a resource).
fn resource_passes(resource: &[KeyValue], selector: &Selector) -> bool {
    selector
        .conditions
        .iter()
        .all(|c| match attr(resource, &c.key) {
            Some(v) => match c.op {
                Op::Eq => v == c.value,
                Op::Ne => v != c.value,
            },
            None => !(c.key.starts_with("service.") || c.key.starts_with("deployment.")),
        })
}

/// The metrics named `name` of the resources `selector` passes, each with its instance (its
/// resource, as text).
pub(crate) fn selected_metrics<'a>(
    requests: &'a [ExportMetricsServiceRequest],
    selector: &'a Selector,
    name: &'a str,
) -> impl Iterator<Item = (String, &'a Metric)> + 'a {
    requests
        .iter()
        .flat_map(|req| &req.resource_metrics)
        .filter_map(move |rm| {
            let resource: &[KeyValue] = rm.resource.as_ref().map_or(&[], |r| &r.attributes);
            resource_passes(resource, selector).then(|| (format!("{resource:?}"), rm))
        })
        .flat_map(move |(instance, rm)| {
            rm.scope_metrics
                .iter()
                .flat_map(|sm| &sm.metrics)
                .filter(move |m| m.name == name)
                .map(move |m| (instance.clone(), m))
        })
}

/// One cumulative series: the latest count before the window and the latest inside it.
#[derive(Default)]
struct Series {
    before: Option<(u64, u64)>,
    inside: Option<(u64, u64)>,
    endpoint: String,
}

fn count_side(
    requests: &[ExportMetricsServiceRequest],
    selector: &Selector,
) -> HashMap<String, f64> {
    let from = selector.from.map_or(0, |f| u64::try_from(f).unwrap_or(0));
    let to = selector
        .to
        .map_or(u64::MAX, |t| u64::try_from(t).unwrap_or(u64::MAX));
    let mut delta: HashMap<String, f64> = HashMap::new();
    let mut cumulative: HashMap<String, Series> = HashMap::new();
    for (instance, m) in selected_metrics(requests, selector, HTTP_SERVER_DURATION) {
        let Some(metric::Data::Histogram(h)) = &m.data else {
            continue;
        };
        let is_delta = h.aggregation_temporality == AggregationTemporality::Delta as i32;
        for p in &h.data_points {
            let (Some(method), Some(route)) = (
                attr(&p.attributes, "http.request.method"),
                attr(&p.attributes, "http.route"),
            ) else {
                continue;
            };
            let endpoint = format!("{method} {route}");
            let t = p.time_unix_nano;
            if is_delta {
                if t > from && t <= to.saturating_add(1) {
                    *delta.entry(endpoint).or_default() += p.count as f64;
                }
                continue;
            }
            let key = format!("{instance}|{:?}|{}", p.attributes, p.start_time_unix_nano);
            let s = cumulative.entry(key).or_default();
            s.endpoint = endpoint;
            let slot = if t < from {
                &mut s.before
            } else if t <= to {
                &mut s.inside
            } else {
                continue;
            };
            if slot.is_none_or(|(pt, _)| t >= pt) {
                *slot = Some((t, p.count));
            }
        }
    }
    for s in cumulative.into_values() {
        if let Some((_, last)) = s.inside {
            let first = s.before.map_or(0, |(_, c)| c);
            *delta.entry(s.endpoint).or_default() += last.saturating_sub(first) as f64;
        }
    }
    delta
}

/// The metrics requests stored under `paths` (those that cannot be read are passed over).
pub(crate) fn read_requests(paths: &[PathBuf]) -> Vec<ExportMetricsServiceRequest> {
    let mut requests = Vec::new();
    let mut bytes = Vec::new();
    for f in metrics_files(paths) {
        if crate::reader::read_bounded(&f, &mut bytes, METRICS_LIMIT).is_err() {
            continue;
        }
        let Ok(raw) = gzip::inflate_bounded(&bytes, METRICS_LIMIT as usize) else {
            continue;
        };
        if let Ok(r) = ExportMetricsServiceRequest::decode(raw.as_ref()) {
            requests.push(r);
        }
    }
    requests
}

/// Request counts per endpoint for both sides of a diff, from the metrics stored under `paths`.
pub fn endpoint_requests(paths: &[PathBuf], base: &Selector, head: &Selector) -> EndpointCounts {
    let requests = read_requests(paths);
    EndpointCounts {
        base: count_side(&requests, base),
        head: count_side(&requests, head),
    }
}

/// Requests in each of the contiguous `windows` (`[start, end)`) of `selector`'s selection:
/// of the endpoint it names (`span_name=…`), else of every endpoint. A request counts in the
/// window its metric point falls in, so windows shorter than the metrics' export interval
/// hold the requests of a whole interval or none. `None` everywhere when no request counts
/// are stored.
pub fn requests_in(
    paths: &[PathBuf],
    selector: &Selector,
    windows: &[(i64, i64)],
) -> Vec<Option<f64>> {
    counts_in(&read_requests(paths), selector, windows)
}

/// [`requests_in`] over the metrics requests `requests`.
fn counts_in(
    requests: &[ExportMetricsServiceRequest],
    selector: &Selector,
    windows: &[(i64, i64)],
) -> Vec<Option<f64>> {
    let endpoint = selector
        .conditions
        .iter()
        .find(|c| c.key == "span_name" && c.op == Op::Eq)
        .map(|c| c.value.as_str());
    let counts: Vec<HashMap<String, f64>> = windows
        .iter()
        .map(|&(start, end)| {
            let mut cut = selector.clone();
            // `count_side` takes points up to `to` inclusive: a point on a window's end is
            // the next window's.
            (cut.from, cut.to) = (Some(start), Some(end.saturating_sub(1).max(start)));
            count_side(requests, &cut)
        })
        .collect();
    if counts.iter().all(HashMap::is_empty) {
        return vec![None; windows.len()];
    }
    counts
        .into_iter()
        .map(|c| {
            Some(match endpoint {
                Some(e) => c.get(e).copied().unwrap_or(0.0),
                None => c.values().sum(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::AnyValue;
    use opentelemetry_proto::tonic::metrics::v1::{
        Histogram, HistogramDataPoint, Metric, ResourceMetrics, ScopeMetrics,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.into())),
            }),
            ..KeyValue::default()
        }
    }

    fn request(version: &str, points: &[(u64, u64)]) -> ExportMetricsServiceRequest {
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![kv("service.version", version)],
                    ..Resource::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        name: HTTP_SERVER_DURATION.into(),
                        data: Some(metric::Data::Histogram(Histogram {
                            aggregation_temporality: AggregationTemporality::Cumulative as i32,
                            data_points: points
                                .iter()
                                .map(|&(t, count)| HistogramDataPoint {
                                    attributes: vec![
                                        kv("http.request.method", "GET"),
                                        kv("http.route", "/cart"),
                                    ],
                                    start_time_unix_nano: 1,
                                    time_unix_nano: t,
                                    count,
                                    ..HistogramDataPoint::default()
                                })
                                .collect(),
                        })),
                        ..Metric::default()
                    }],
                    ..ScopeMetrics::default()
                }],
                ..ResourceMetrics::default()
            }],
        }
    }

    #[test]
    fn windows_count_the_points_in_them_once() {
        // Cumulative points at 10, 20 and 30: windows [0, 15), [15, 20), [20, 40).
        let reqs = [request("1", &[(10, 100), (20, 250), (30, 300)])];
        let windows = [(0, 15), (15, 20), (20, 40)];
        let all = Selector::default();
        assert_eq!(
            counts_in(&reqs, &all, &windows),
            [Some(100.0), Some(0.0), Some(200.0)]
        );
        let mut cart = Selector::default();
        cart.add_terms("span_name=GET /cart", 0).unwrap();
        assert_eq!(
            counts_in(&reqs, &cart, &windows),
            [Some(100.0), Some(0.0), Some(200.0)]
        );
        let mut other = Selector::default();
        other.add_terms("span_name=GET /other", 0).unwrap();
        assert_eq!(
            counts_in(&reqs, &other, &windows),
            [Some(0.0), Some(0.0), Some(0.0)]
        );
        assert_eq!(counts_in(&[], &all, &windows), [None, None, None]);
    }

    #[test]
    fn cumulative_counts_are_differenced_within_the_window() {
        let reqs = vec![
            request("1", &[(10, 100), (20, 250)]),
            request("2", &[(10, 7)]),
        ];
        let mut v1 = Selector::default();
        v1.add_terms("service.version=1", 0).unwrap();
        assert_eq!(count_side(&reqs, &v1).get("GET /cart"), Some(&250.0));
        let mut windowed = v1.clone();
        windowed.from = Some(15);
        assert_eq!(count_side(&reqs, &windowed).get("GET /cart"), Some(&150.0));
        let mut v2 = Selector::default();
        v2.add_terms("service.version=2,span_name=GET /cart", 0)
            .unwrap();
        assert_eq!(count_side(&reqs, &v2).get("GET /cart"), Some(&7.0));
    }
}
