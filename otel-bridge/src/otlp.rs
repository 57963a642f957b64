//! OTLP profiles (proto v1.10, `opentelemetry.proto.profiles.v1development`) encoding and
//! decoding of the profile [model](crate::model).
//!
//! The messages and their rules: profiles.proto,
//! <https://github.com/open-telemetry/opentelemetry-proto/blob/v1.10.0/opentelemetry/proto/profiles/v1development/profiles.proto>;
//! what otelprof sends, for its users: `docs/output-format.md`.
//!
//! # What goes on the wire
//!
//! One model [`Profile`](crate::Profile) becomes one `ExportProfilesServiceRequest` with one
//! `ResourceProfiles` (the resource the caller built, see [`crate::resource`]), one
//! `ScopeProfiles` (scope `otelprof`) and one OTLP `Profile` per emitted sample type, all
//! sharing one `ProfilesDictionary`. The rules, with where they come from:
//!
//! - Every dictionary table starts with its zero value (`string_table[0] == ""`,
//!   `mapping_table[0] == Mapping{}`, …) and every index is in range (profiles.proto,
//!   `ProfilesDictionary`; Pyroscope rejects the whole request otherwise). Tables are rebuilt
//!   from what the samples reference, so nothing is orphaned or duplicated.
//! - An OTLP `Profile` has exactly one sample type and every sample one value. The CPU model
//!   has two types, `samples/count` and `cpu/nanoseconds` (= samples × period); only
//!   `samples/count` is sent, with period type `cpu/nanoseconds`: that pair is what Pyroscope
//!   (`process_cpu`) and Elastic recognise as CPU, and the nanoseconds would only double the
//!   bytes. [`decode`] restores the derived type, so a round trip gives back the model.
//!   Generally: a sample type equal to the period type is left out when `samples/count` is
//!   present; every other type becomes its own OTLP `Profile`.
//! - Samples with the same {stack, attribute set, link} are merged (the sample identity of
//!   profiles.proto); stacks are leaf first; samples with nothing to say (value 0, no
//!   timestamps) are left out.
//! - Native and kernel locations carry their address and the index of their mapping (range,
//!   file offset, file name, and the GNU build id as `process.executable.build_id.gnu`), so
//!   that a backend can symbolise them again; Java frames and pseudo-frames have mapping 0.
//! - Locations carry `profile.frame.type` (`jvm`, `native`, `kernel`). Pseudo-frames (a
//!   stack that could not be walked, e.g. `[GC_active]`, or `[truncated]`) are typed `jvm`:
//!   they name JVM states reported by the JVM's own stack walker, every consumer knows `jvm`
//!   and shows the frame by its function name, whereas an invented type could be rejected or
//!   hidden. They also carry `otelprof.frame.pseudo = true`, so that [`decode`] (and anyone
//!   who cares) can tell them from real methods.
//! - Model labels become sample attributes: `thread_name` → `thread.name`, `thread_state` →
//!   `thread.state` (wall-clock samples), `span_name` → `span_name` (Pyroscope's key for span
//!   profiles). `thread_id` → `thread.id` (an int) and
//!   `local_root_span_id` are sent only when [`EncodeOptions`] asks: Pyroscope turns sample
//!   attributes into series labels, and ids multiply series. Trace and span ids travel as
//!   the sample's `Link`, never as attributes. Other labels keep their key.
//! - A sample's `Link` names the span the thread worked for, or its local root
//!   ([`LinkTarget`]); its trace id can be left out ([`EncodeOptions::no_link_trace_id`]).
//! - [`Bounds`] (none by default; Pyroscope's in [`pyroscope::BOUNDS`]) limit the sample
//!   attributes sent, cut stacks deeper than a bound at the root side with a `[truncated]`
//!   frame, and ([`encode_bounded`]) send a profile with too many samples or bytes in parts,
//!   each part a request of its own.
//! - Timestamps are optional ([`EncodeOptions::timestamps`]); see there for the trade-off.
//! - Model comments (pprof `comment`) are not sent: OTLP has no place for them, and the
//!   agent's counters go out as OTLP metrics instead.

pub mod bounds;
mod decode;
mod encode;
pub mod pyroscope;
#[cfg(any(test, feature = "reference-decoder"))]
pub mod reference;
mod schema;
mod wire;

pub use bounds::Bounds;

pub use decode::{check_request, decode, Checked, DecodeError, ErrorLayer, Limits};
pub(crate) use encode::resource_to_pb;
pub use encode::{encode, encode_bounded, encode_to_vec, EncodeError};

pub use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
pub use opentelemetry_proto::tonic::profiles::v1development as proto;

/// Location attribute naming what produced a frame (OTel semantic conventions).
pub const FRAME_TYPE: &str = "profile.frame.type";
/// Location attribute marking a pseudo-frame (a failed or truncated stack walk).
pub const PSEUDO_FRAME: &str = "otelprof.frame.pseudo";
/// Mapping attribute: the binary's GNU build id in hex (OTel semantic conventions).
pub const BUILD_ID: &str = "process.executable.build_id.gnu";
/// Sample attribute keys (OTel semantic conventions `thread.*`; Pyroscope's `span_name`).
pub const THREAD_NAME: &str = "thread.name";
pub const THREAD_ID: &str = "thread.id";
/// Java thread state of a wall-clock sample (`RUNNABLE`, `BLOCKED`, `WAITING`, `TIMED_WAITING`,
/// `NATIVE`, `GC_PAUSE`).
pub const THREAD_STATE: &str = "thread.state";
/// The thread's pool: its name with the last number folded (`otelprof_primitives::thread_pool`); a key
/// backends can group by (few values, unlike the thread name).
pub const THREAD_POOL: &str = "thread.pool";
pub const SPAN_NAME: &str = "span_name";
pub const LOCAL_ROOT_SPAN_ID: &str = "local_root_span_id";

/// Instrumentation scope of everything the encoder writes.
pub const SCOPE_NAME: &str = "otelprof";
pub const SCOPE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The gRPC method and the HTTP path OTLP receivers serve profiles on.
pub const GRPC_EXPORT_PATH: &str =
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";
pub const HTTP_PATH: &str = "/v1development/profiles";

/// Model label keys and the OTLP sample attribute keys they travel under.
const LABEL_KEYS: [(&str, &str); 6] = [
    ("thread_name", THREAD_NAME),
    ("thread_id", THREAD_ID),
    ("thread_state", THREAD_STATE),
    ("thread_pool", THREAD_POOL),
    ("span_name", SPAN_NAME),
    ("local_root_span_id", LOCAL_ROOT_SPAN_ID),
];

fn attribute_key_for_label(label_key: &str) -> &str {
    LABEL_KEYS
        .iter()
        .find(|(l, _)| *l == label_key)
        .map_or(label_key, |(_, a)| a)
}

/// The reference decoder undoes every renaming; the production decoder only the thread keys
/// (see `decode::label_key_for_attribute`), which is what readers of stored data see today.
#[cfg(any(test, feature = "reference-decoder"))]
fn label_key_for_attribute(attribute_key: &str) -> &str {
    LABEL_KEYS
        .iter()
        .find(|(_, a)| *a == attribute_key)
        .map_or(attribute_key, |(l, _)| l)
}

/// A profile id: 16 bytes, not all zero (profiles.proto: an all-zero id is invalid). The
/// caller draws them from a random source; this crate has none (sans-IO).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProfileId([u8; 16]);

impl ProfileId {
    /// `None` for the all-zero id.
    pub fn new(bytes: [u8; 16]) -> Option<ProfileId> {
        (bytes != [0; 16]).then_some(ProfileId(bytes))
    }

    /// An id from random bytes; the (astronomically unlikely) all-zero draw is nudged to a
    /// valid id rather than refused.
    pub fn from_random(mut bytes: [u8; 16]) -> ProfileId {
        if bytes == [0; 16] {
            bytes[15] = 1;
        }
        ProfileId(bytes)
    }

    pub fn bytes(&self) -> [u8; 16] {
        self.0
    }

    /// The id of the `n`-th OTLP profile made from one model profile (0 is `self`): still
    /// unique within the request and never all zero.
    fn nth(&self, n: usize) -> ProfileId {
        let mut b = self.0;
        b[0] ^= (n & 0xff) as u8;
        b[1] ^= ((n >> 8) & 0xff) as u8;
        if b == [0; 16] {
            b[15] = 1;
        }
        ProfileId(b)
    }
}

/// Choices the encoder cannot make alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Send when each observation was taken (`Sample.timestamps_unix_nano`). Off by default.
    ///
    /// With timestamps a sample is sent in the "timestamps only" shape (one timestamp per
    /// sampling interval, no values), which both Pyroscope and Elastic accept; Elastic's
    /// profiling backend requires it. The cost is 8 bytes per interval on the wire (fixed64,
    /// poorly compressible), which at 100 Hz dwarfs everything else in a profile: the
    /// aggregated shape (one value per distinct sample) is many times smaller and is what
    /// Pyroscope and pprof-based backends use, so it is the default. Turn timestamps on for
    /// Elastic or for per-request timelines.
    ///
    /// The model keeps one timestamp per signal and the summed weight; a signal stands for
    /// several intervals when the kernel folded timer overruns into it. The extra intervals
    /// are spread over the sample's timestamps (the model does not keep which signal carried
    /// them). Only `count` sample types can be sent this way; others, and samples whose
    /// weight is not between 1 and 64 times their timestamp count, keep the aggregated shape.
    pub timestamps: bool,
    /// Send the model's `thread_id` label as the `thread.id` sample attribute.
    pub thread_id: bool,
    /// Send the model's `local_root_span_id` label as a sample attribute.
    pub local_root_span_id: bool,
    /// Which span a sample's `Link` names.
    pub links: LinkTarget,
    /// Leave the trace id out of links (an empty `trace_id`): Pyroscope 1.20 to 2.0 make a
    /// link's 16-byte trace id a series label, one series per trace; it reads a link without
    /// one as a span id alone (see [`pyroscope`]).
    pub no_link_trace_id: bool,
    /// What each OTLP profile is kept within (attributes, stack depth, samples, bytes).
    pub bounds: Bounds,
}

/// The span a sample's OTLP `Link` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkTarget {
    /// The span the thread was working for (the model's link).
    #[default]
    Span,
    /// The local root of that span: the first span of its trace in the process, taken from
    /// the model's `local_root_span_id` label (a sample without it keeps its span). Every
    /// sample of a request then names the request's root span, which is what Grafana's
    /// traces-to-profiles asks Pyroscope for (the span attribute `pyroscope.profile.id`,
    /// matched exactly against each sample's span id).
    LocalRoot,
}

/// Most timestamps per observation-count of one sample before the encoder falls back to the
/// aggregated shape: a bound on what a decoded (untrusted) model can make it allocate.
const MAX_TIMESTAMP_EXPANSION: i64 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_attributes_map_both_ways() {
        for (label, attribute) in [
            ("thread_name", "thread.name"),
            ("thread_state", "thread.state"),
            ("span_name", "span_name"),
            ("other", "other"),
        ] {
            assert_eq!(attribute_key_for_label(label), attribute);
            assert_eq!(label_key_for_attribute(attribute), label);
        }
    }
}
