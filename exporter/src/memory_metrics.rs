//! The JVM's memory figures over time, beside the agent's self-telemetry: heap used after
//! collection, collections, pauses (count, time, the longest of the last interval),
//! allocation, and the live heap's own state. Observable instruments over figures the agent
//! keeps ([`MemoryFigures`]), on the meter `otelprof`, exported with the other metrics.
//!
//! They are named `otelprof.jvm.*` rather than after the OpenTelemetry JVM semantic
//! conventions (`jvm.memory.used_after_last_gc`, `jvm.gc.duration`) on purpose: a service that
//! also runs the OpenTelemetry Java agent exports those already, measured differently (per
//! pool, and a duration histogram per collector and action, which JVMTI cannot give), and two
//! series of one name from two sources would collide in a dashboard. docs/metrics.md gives the
//! correspondence.

use opentelemetry::metrics::Meter;
use opentelemetry::KeyValue;

use std::sync::Arc;

/// Reads the figures; called on the export thread at each collection.
pub(crate) type MemorySource = Arc<dyn Fn() -> MemoryFigures + Send + Sync>;

/// Metric names.
pub mod names {
    pub const HEAP_AFTER_GC: &str = "otelprof.jvm.heap.used_after_gc";
    pub const COLLECTIONS: &str = "otelprof.jvm.gc.collections";
    pub const PAUSES: &str = "otelprof.jvm.gc.pauses";
    pub const PAUSE_TIME: &str = "otelprof.jvm.gc.pause.time";
    pub const PAUSE_MAX: &str = "otelprof.jvm.gc.pause.max";
    pub const ALLOCATED: &str = "otelprof.jvm.memory.allocated";
    pub const LIVE_ENTRIES: &str = "otelprof.live.entries";
    pub const LIVE_INTERVAL: &str = "otelprof.live.interval";
    pub const LIVE_THINNED: &str = "otelprof.live.thinned";
    pub const LIVE_DROPPED: &str = "otelprof.live.dropped";
}

/// The memory figures at one instant, as the agent reads them. `None`: not known (no
/// collection read yet, or the figure's source is off), and then not reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryFigures {
    /// Bytes of the heap in use after the last collection.
    pub heap_after_gc: Option<u64>,
    /// Collections the collectors counted.
    pub collections: Option<u64>,
    /// Garbage collection pauses, and their total time in nanoseconds.
    pub pauses: u64,
    pub pause_ns: u64,
    /// The longest pause of about the last metric interval, in nanoseconds.
    pub recent_pause_max_ns: u64,
    /// Allocated bytes estimated from the allocation samples (with `alloc=` or `live=`).
    pub allocated_bytes: Option<u64>,
    /// The live heap (with `live=`): tracked objects, the interval in force (bytes), objects
    /// thinned out when the table was near full, and samples lost by reason.
    pub live: Option<LiveFigures>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveFigures {
    pub entries: u64,
    pub interval: u64,
    pub thinned: u64,
    pub dropped: Vec<(&'static str, u64)>,
}

/// A gauge of what `read` returns at each collection, when it returns something.
/// How a whole-number figure is exported: a value now (gauge) or a running total (counter).
#[derive(Clone, Copy)]
enum Instrument {
    Gauge,
    Counter,
}

/// One whole-number figure: its name, instrument, description, unit and where it is read
/// (`None`: not known, nothing observed).
type Figure = (
    &'static str,
    Instrument,
    &'static str,
    &'static str,
    fn(&MemoryFigures) -> Option<u64>,
);

const FIGURES: [Figure; 7] = [
    (
        names::HEAP_AFTER_GC,
        Instrument::Gauge,
        "Heap in use after the last garbage collection (sum over the heap pools)",
        "By",
        |m| m.heap_after_gc,
    ),
    (
        names::COLLECTIONS,
        Instrument::Counter,
        "Garbage collections, as the JVM's collectors count them",
        "{collection}",
        |m| m.collections,
    ),
    (
        names::PAUSES,
        Instrument::Counter,
        "Garbage collection pauses (JVMTI GarbageCollectionStart/Finish)",
        "{pause}",
        |m| Some(m.pauses),
    ),
    (
        names::ALLOCATED,
        Instrument::Counter,
        "Bytes allocated, estimated from the allocation samples (its rate is the allocation rate)",
        "By",
        |m| m.allocated_bytes,
    ),
    (
        names::LIVE_ENTRIES,
        Instrument::Gauge,
        "Objects the live heap tracks",
        "{object}",
        |m| m.live.as_ref().map(|l| l.entries),
    ),
    (
        names::LIVE_INTERVAL,
        Instrument::Gauge,
        "The live heap's sampling interval in force (raised while its table is full)",
        "By",
        |m| m.live.as_ref().map(|l| l.interval),
    ),
    (
        names::LIVE_THINNED,
        Instrument::Counter,
        "Tracked objects dropped when the live heap's interval rose (estimates stay unbiased)",
        "{object}",
        |m| m.live.as_ref().map(|l| l.thinned),
    ),
];

fn register_figure(meter: &Meter, figure: Figure, source: MemorySource) {
    let (name, instrument, description, unit, read) = figure;
    let observe = move |o: &dyn opentelemetry::metrics::AsyncInstrument<u64>| {
        if let Some(v) = read(&source()) {
            o.observe(v, &[]);
        }
    };
    match instrument {
        Instrument::Gauge => {
            meter
                .u64_observable_gauge(name)
                .with_description(description)
                .with_unit(unit)
                .with_callback(observe)
                .build();
        }
        Instrument::Counter => {
            meter
                .u64_observable_counter(name)
                .with_description(description)
                .with_unit(unit)
                .with_callback(observe)
                .build();
        }
    }
}

pub(crate) fn register(meter: &Meter, source: MemorySource) {
    for figure in FIGURES {
        register_figure(meter, figure, source.clone());
    }
    let s = source.clone();
    meter
        .f64_observable_counter(names::PAUSE_TIME)
        .with_description("Time the application was stopped by garbage collection pauses")
        .with_unit("s")
        .with_callback(move |o| o.observe(s().pause_ns as f64 / 1e9, &[]))
        .build();
    let s = source.clone();
    meter
        .f64_observable_gauge(names::PAUSE_MAX)
        .with_description("The longest garbage collection pause of about the last interval")
        .with_unit("s")
        .with_callback(move |o| o.observe(s().recent_pause_max_ns as f64 / 1e9, &[]))
        .build();
    meter
        .u64_observable_counter(names::LIVE_DROPPED)
        .with_description("Live heap samples lost, by reason")
        .with_unit("{object}")
        .with_callback(move |o| {
            for (reason, n) in source().live.map(|l| l.dropped).unwrap_or_default() {
                o.observe(n, &[KeyValue::new("reason", reason)]);
            }
        })
        .build();
}
