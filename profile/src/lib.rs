//! Sans-IO core of otelprof: the profile model, its OTLP and pprof encodings, the resource
//! that describes the profiled process, and the naming rules for JVM frames.
//!
//! Nothing here does I/O, reads the clock or the environment: callers pass times in, get bytes
//! out. That keeps the encoders testable byte for byte and usable from the agent, the CLI and
//! the tests alike.
#![forbid(unsafe_code)]

pub mod frame_name;
pub mod gzip;
pub mod merge;
pub mod model;
pub mod otlp;
pub mod pprof;
pub mod process_context;
pub mod resource;
pub mod select;
pub mod units;

pub use model::{
    FrameKind, Function, FunctionId, Label, LabelValue, Line, Link, Location, LocationId, Profile,
    ProfileBuilder, Sample, StrId, ValueType,
};
