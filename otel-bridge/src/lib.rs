//! Sans-IO core of otelprof: the profile model, its OTLP and pprof encodings, the resource
//! that describes the profiled process, and the naming rules for JVM frames.
//!
//! Nothing here does I/O, reads the clock or the environment: callers pass times in, get bytes
//! out. That keeps the encoders testable byte for byte and usable from the agent, the CLI and
//! the tests alike.
//!
//! # Where things are
//!
//! - The model: [`Profile`] and [`ProfileBuilder`] (re-exported here from [`model`]),
//!   [`profile_types`], the sample and period types of each profile type otelprof writes, and
//!   [`frame_name`], the rules that name JVM frames `package.Class.method`.
//! - Codecs: [`otlp`] (`otlp::encode`, `otlp::decode`, `otlp::check_request`; the prost-based
//!   `otlp::reference` decoder with the `reference-decoder` feature, for tests and the
//!   benchmark; `otlp::bounds` and `otlp::pyroscope`, what keeps a profile within a backend's
//!   limits), [`pprof`] (`pprof::encode_gzip`, `pprof::decode`), and [`gzip`], the one
//!   bounded inflater every reader uses.
//! - The process: [`resource`] (the OTel resource from options, environment values and facts
//!   the caller gathered) and [`process_context`] (its payload for out-of-process readers).
//!
//! Reading many profiles at once (selection, merge, the query engine) is the store crate's.
#![forbid(unsafe_code)]

pub mod frame_name;
pub mod gzip;
pub mod model;
pub mod otlp;
pub mod pprof;
pub mod process_context;
pub mod profile_types;
pub mod resource;

pub use model::{
    Dictionary, FrameKind, Function, FunctionId, Label, LabelValue, Line, Link, Location,
    LocationId, Profile, ProfileBuilder, Sample, StackId, Stacks, StrId, ValueType,
};
