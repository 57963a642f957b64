//! The JVM's memory figures over a timeline: the heap in use after garbage collection and the
//! time collections stopped the application, per time window, from the agent's OTLP metrics in
//! a store (`otelprof.jvm.heap.used_after_gc`, a gauge; `otelprof.jvm.gc.pause.time`, a
//! cumulative sum in seconds). Instances are told apart by their resource, as the request
//! counts are ([`super::requests`]); the selection's resource conditions apply.

use std::collections::HashMap;
use std::path::PathBuf;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, NumberDataPoint};

use super::requests::{read_requests, selected_metrics};
use crate::select::Selector;

pub const HEAP_AFTER_GC: &str = "otelprof.jvm.heap.used_after_gc";
pub const PAUSE_TIME: &str = "otelprof.jvm.gc.pause.time";

/// The memory figures in each window of a timeline; `None` where no instance reported one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryLine {
    /// Bytes: each instance's last report in the window, summed over instances.
    pub heap_after_gc: Vec<Option<f64>>,
    /// Seconds the collections stopped the application in the window, summed over instances.
    pub gc_pause: Vec<Option<f64>>,
}

impl MemoryLine {
    /// Whether any window has a figure.
    pub fn is_empty(&self) -> bool {
        self.heap_after_gc
            .iter()
            .chain(&self.gc_pause)
            .all(Option::is_none)
    }
}

fn number(p: &NumberDataPoint) -> Option<f64> {
    match p.value? {
        number_data_point::Value::AsDouble(d) => Some(d),
        number_data_point::Value::AsInt(i) => Some(i as f64),
    }
}

/// The points of metric `name` per instance (its resource), each `(time, value)`.
fn points(
    requests: &[ExportMetricsServiceRequest],
    selector: &Selector,
    name: &str,
) -> HashMap<String, Vec<(i64, f64)>> {
    let mut out: HashMap<String, Vec<(i64, f64)>> = HashMap::new();
    for (instance, m) in selected_metrics(requests, selector, name) {
        let data = match &m.data {
            Some(metric::Data::Gauge(g)) => &g.data_points,
            Some(metric::Data::Sum(s)) => &s.data_points,
            _ => continue,
        };
        let series = out.entry(instance).or_default();
        for p in data {
            if let (Ok(t), Some(v)) = (i64::try_from(p.time_unix_nano), number(p)) {
                series.push((t, v));
            }
        }
    }
    for series in out.values_mut() {
        series.sort_by_key(|&(t, _)| t);
    }
    out
}

/// The memory figures of `selector`'s instances in each of `windows` (`[start, end)`), from
/// the metrics stored under `paths`.
pub fn memory_in(paths: &[PathBuf], selector: &Selector, windows: &[(i64, i64)]) -> MemoryLine {
    line(&read_requests(paths), selector, windows)
}

fn line(
    requests: &[ExportMetricsServiceRequest],
    selector: &Selector,
    windows: &[(i64, i64)],
) -> MemoryLine {
    let heap = points(requests, selector, HEAP_AFTER_GC);
    let pause = points(requests, selector, PAUSE_TIME);
    let mut out = MemoryLine::default();
    for &(start, end) in windows {
        let inside = |s: &[(i64, f64)]| {
            s.iter()
                .rev()
                .find(|&&(t, _)| t >= start && t < end)
                .map(|&(_, v)| v)
        };
        let heap_now: Vec<f64> = heap.values().filter_map(|s| inside(s)).collect();
        out.heap_after_gc
            .push((!heap_now.is_empty()).then(|| heap_now.iter().sum()));
        // A running total: the last value in the window less the last one before it (0 when
        // the instance started in it).
        let paused: Vec<f64> = pause
            .values()
            .filter_map(|s| {
                let last = inside(s)?;
                let before = s
                    .iter()
                    .rev()
                    .find(|&&(t, _)| t < start)
                    .map_or(0.0, |&(_, v)| v);
                Some((last - before).max(0.0))
            })
            .collect();
        out.gc_pause
            .push((!paused.is_empty()).then(|| paused.iter().sum()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::metrics::v1::{
        AggregationTemporality, Gauge, Metric, ResourceMetrics, ScopeMetrics, Sum,
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

    fn point(t: u64, v: number_data_point::Value) -> NumberDataPoint {
        NumberDataPoint {
            time_unix_nano: t,
            value: Some(v),
            ..NumberDataPoint::default()
        }
    }

    /// One instance's request: heap points (time, bytes) and pause totals (time, seconds).
    fn request(
        instance: &str,
        heap: &[(u64, i64)],
        pause: &[(u64, f64)],
    ) -> ExportMetricsServiceRequest {
        let heap = Metric {
            name: HEAP_AFTER_GC.into(),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: heap
                    .iter()
                    .map(|&(t, v)| point(t, number_data_point::Value::AsInt(v)))
                    .collect(),
            })),
            ..Metric::default()
        };
        let pause = Metric {
            name: PAUSE_TIME.into(),
            data: Some(metric::Data::Sum(Sum {
                data_points: pause
                    .iter()
                    .map(|&(t, v)| point(t, number_data_point::Value::AsDouble(v)))
                    .collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            })),
            ..Metric::default()
        };
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![kv("service.instance.id", instance)],
                    ..Resource::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![heap, pause],
                    ..ScopeMetrics::default()
                }],
                ..ResourceMetrics::default()
            }],
        }
    }

    #[test]
    fn the_last_heap_of_each_instance_and_the_pauses_in_each_window() {
        let reqs = [
            request(
                "a",
                &[(10, 100), (15, 120), (25, 130)],
                &[(10, 0.5), (15, 0.75), (25, 1.0)],
            ),
            request("b", &[(12, 1000)], &[(12, 2.0)]),
        ];
        let windows = [(0, 20), (20, 30), (30, 40)];
        let l = line(&reqs, &Selector::default(), &windows);
        assert_eq!(l.heap_after_gc, [Some(1120.0), Some(130.0), None]);
        assert_eq!(l.gc_pause, [Some(2.75), Some(0.25), None]);
        let mut only_b = Selector::default();
        only_b.add_terms("service.instance.id=b", 0).unwrap();
        let l = line(&reqs, &only_b, &windows);
        assert_eq!(l.heap_after_gc, [Some(1000.0), None, None]);
        assert!(line(&[], &Selector::default(), &windows).is_empty());
    }
}
