//! The profile types otelprof writes, and the sample and period types that identify each in
//! pprof and OTLP: one table, read by the agent (each kind of sample it records builds a
//! profile of one of these types) and by the docs (docs/profile-types.md).
//!
//! # Names a backend gives them
//!
//! The sample types are pprof's usual ones (Go's runtime profiles use the same pairs). The
//! period types are chosen for Grafana Pyroscope, which names an OTLP profile after its period
//! type: its OTLP ingest builds the key `sample_type:sample_unit:period_type:period_unit`
//! (the period half left empty when `period == 0`), turns `samples:count:cpu:nanoseconds` into
//! `process_cpu` (values multiplied by the period), and otherwise takes the third field, the
//! period type, as the profile's `__name__` (grafana/pyroscope `pkg/ingester/otlp/convert.go`,
//! `newProfileBuilder` and `profileType`). An empty name is refused
//! (`pkg/validation/validate.go`, `ValidateLabels`: "invalid metric name"). The stored type id
//! is then `__name__:sample_type:sample_unit:period_type:period_unit`
//! (`pkg/phlaredb/labels/labels.go`, `CreateProfileLabels`).
//!
//! Pyroscope's Java agent names its profiles through grafana/jfr-parser (`pprof/pprof.go`,
//! `profileBuilderForSampleType`): `process_cpu`, `wall`, `memory` (allocations, live objects),
//! `mutex` (contended monitors) and `block` (parks). So:
//!
//! | type  | sample types                                  | period type        | Pyroscope type ids (OTLP)                          | Pyroscope's Java agent |
//! |-------|-----------------------------------------------|--------------------|----------------------------------------------------|------------------------|
//! | cpu   | `samples/count` (+ `cpu/nanoseconds`, pprof)  | `cpu/nanoseconds`  | `process_cpu:cpu:nanoseconds:cpu:nanoseconds`       | the same |
//! | wall  | `wall/nanoseconds`                            | `wall/nanoseconds` | `wall:wall:nanoseconds:wall:nanoseconds`            | the same |
//! | alloc | `alloc_objects/count`, `alloc_space/bytes`    | `memory/bytes`     | `memory:alloc_objects:count:memory:bytes`, `memory:alloc_space:bytes:memory:bytes` | `memory:alloc_in_new_tlab_objects:count:space:bytes`, … |
//! | lock  | `contentions/count`, `delay/nanoseconds`      | `mutex/count`      | `mutex:contentions:count:mutex:count`, `mutex:delay:nanoseconds:mutex:count` | the same |
//! | live  | `inuse_objects/count`, `inuse_space/bytes`    | `memory/bytes`     | `memory:inuse_objects:count:memory:bytes`, `memory:inuse_space:bytes:memory:bytes` | `memory:live:count:objects:count` |
//!
//! CPU, wall and lock land exactly where the Java agent's profiles do. Allocations and live
//! objects get Java's name, `memory`, but not its type ids: through OTLP the name *is* the
//! period type, so `memory` as a name means `memory` as a period type, where Java's ids carry
//! `space` or `objects` there. The sample types stay pprof's: the agent's allocation samples
//! (JVMTI `SampledObjectAlloc`) cover allocations inside and outside TLABs alike, so Java's
//! `alloc_in_new_tlab_*` would misname them; `alloc_*` and `inuse_*` are the names Pyroscope
//! also files under `memory` for Go services.
//!
//! Rules every entry keeps (tested below): no `:` in any type or unit (a type id must split
//! into exactly five fields, grafana/pyroscope `pkg/model/profile.go`,
//! `ParseProfileTypeSelector`), no `-` in a sample type (`validate.go`, sample type check),
//! and a period type on every profile. Its period must be at least 1 when sent (an
//! allocation interval of 0, "every allocation", is sent as 1 byte): a zero period leaves the
//! name empty.
#![forbid(unsafe_code)]

/// A `(type, unit)` pair, e.g. `("cpu", "nanoseconds")`.
pub type TypeUnit = (&'static str, &'static str);

/// A profile type: what its samples measure and what its period counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileType {
    /// The agent's name for it: file prefix, `--type` of the CLI.
    pub name: &'static str,
    /// The value types of each sample, in order (pprof; OTLP sends one profile per type, the
    /// CPU's `cpu/nanoseconds` derived from `samples/count` × period).
    pub sample_types: &'static [TypeUnit],
    pub period_type: TypeUnit,
}

pub const CPU: ProfileType = ProfileType {
    name: "cpu",
    sample_types: &[("samples", "count"), ("cpu", "nanoseconds")],
    period_type: ("cpu", "nanoseconds"),
};

/// Wall samples have no `samples/count`: their weights are measured wall time, not a whole
/// number of intervals, so a count times the period would not give the time.
pub const WALL: ProfileType = ProfileType {
    name: "wall",
    sample_types: &[("wall", "nanoseconds")],
    period_type: ("wall", "nanoseconds"),
};

pub const ALLOC: ProfileType = ProfileType {
    name: "alloc",
    sample_types: &[("alloc_objects", "count"), ("alloc_space", "bytes")],
    period_type: ("memory", "bytes"),
};

pub const LOCK: ProfileType = ProfileType {
    name: "lock",
    sample_types: &[("contentions", "count"), ("delay", "nanoseconds")],
    period_type: ("mutex", "count"),
};

/// The live heap: objects sampled at allocation that are still reachable, a snapshot per
/// period (never summed over time); period = the allocation sampling interval in bytes.
pub const LIVE: ProfileType = ProfileType {
    name: "live",
    sample_types: &[("inuse_objects", "count"), ("inuse_space", "bytes")],
    period_type: ("memory", "bytes"),
};

/// Every profile type, in the order the agent lists them.
pub const ALL: [ProfileType; 5] = [CPU, WALL, ALLOC, LOCK, LIVE];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_can_be_named_and_queried_by_pyroscope() {
        for t in ALL {
            let (pt, pu) = t.period_type;
            assert!(!pt.is_empty() && !pu.is_empty(), "{}", t.name);
            for (ty, unit) in t.sample_types.iter().chain([&t.period_type]) {
                assert!(!ty.contains(':') && !unit.contains(':'), "{}", t.name);
            }
            for (ty, _) in t.sample_types {
                assert!(!ty.contains('-'), "{}: {ty}", t.name);
            }
        }
        let names: Vec<&str> = ALL.iter().map(|t| t.name).collect();
        assert_eq!(names, ["cpu", "wall", "alloc", "lock", "live"]);
    }
}
