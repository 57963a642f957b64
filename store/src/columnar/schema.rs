//! The two Parquet tables of the columnar store, their partitions' names and the stack id:
//! what writer, reader and outside engines agree on.

use std::fmt::Write as _;

/// Sample attributes with a value per thread or per request, which rollups and series drop
/// (they would keep a row per thread or request apart): a question that filters or groups by
/// one reads the sample rows. A thread's name leaves its pool behind (`thread.pool`).
pub const DROPPED_LABELS: [&str; 5] = [
    "thread.name",
    "thread_name",
    "thread.id",
    "thread_id",
    "local_root_span_id",
];

/// The version of what rollups, series and spans keep, in their footers (`otelprof.derived`): files
/// of another version are not used, and compaction writes them again.
pub(crate) const DERIVED_VERSION: &str = "5";

/// The slots (ns) an hour's slot rollup adds its profiles up by: ten an hour, the slices a
/// diff cuts an hour into, so that they answer a diff's noise estimate of a 1 h side.
pub const SLOT: i64 = HOUR / SLOTS as i64;
/// Slots an hour.
pub const SLOTS: usize = 10;

/// The slot of a profile that starts at `time` in its hour partition (`0..SLOTS`).
pub fn slot_of(time: i64) -> usize {
    usize::try_from(time.rem_euclid(HOUR) / SLOT)
        .unwrap_or(0)
        .min(SLOTS - 1)
}

/// The ticks (ns) a series sorts sample timestamps into: views it answers
/// share a time cut exactly down to this grain.
pub const SERIES_TICK: i64 = 10_000_000_000;

/// The columns of [`SAMPLES`], which [`SPANS`] extends: one definition for both.
macro_rules! sample_columns {
    () => {
        "
  required int64 profile;
  required int64 time_unix_nano;
  required int64 duration_nano;
  required binary type (STRING);
  required binary sample_types (STRING);
  required binary period_type (STRING);
  required int64 period;
  optional int64 value;
  optional int64 count;
  required group values (LIST) { repeated group list { required int64 element; } }
  required group resource (MAP) {
    repeated group key_value { required binary key (STRING); required binary value (STRING); }
  }
  required group attributes (MAP) {
    repeated group key_value { required binary key (STRING); required binary value (STRING); }
  }
  optional binary span_name (STRING);
  optional binary trace_id (STRING);
  optional binary span_id (STRING);
  required int64 stack_id;
  required group timestamps (LIST) { repeated group list { required int64 element; } }"
    };
}

/// One row per sample. Lists and maps follow Parquet's LogicalTypes.md three-level layout,
/// which DuckDB, Spark and Trino read as `LIST` and `MAP`.
pub const SAMPLES: &str = concat!(
    "
message otelprof_sample {",
    sample_columns!(),
    "
}"
);

/// The hour's spans ([`super::compact`]): [`SAMPLES`] with the trace link as three integers
/// (the trace id's high and low 8 bytes and the span id, big-endian, as signed), which a
/// reader decodes an order of magnitude faster than hex text; `trace_id` and `span_id` are
/// null.
pub const SPANS: &str = concat!(
    "
message otelprof_span {",
    sample_columns!(),
    "
  optional int64 trace_hi;
  optional int64 trace_lo;
  optional int64 span_bits;
}"
);

/// Leaf columns of [`SAMPLES`] (and [`SPANS`]), in schema order.
pub mod sample_col {
    pub const PROFILE: &str = "profile";
    pub const TIME: &str = "time_unix_nano";
    pub const DURATION: &str = "duration_nano";
    pub const TYPE: &str = "type";
    pub const SAMPLE_TYPES: &str = "sample_types";
    pub const PERIOD_TYPE: &str = "period_type";
    pub const PERIOD: &str = "period";
    pub const VALUE: &str = "value";
    pub const COUNT: &str = "count";
    pub const VALUES: &str = "values.list.element";
    pub const RESOURCE_KEY: &str = "resource.key_value.key";
    pub const RESOURCE_VALUE: &str = "resource.key_value.value";
    pub const ATTR_KEY: &str = "attributes.key_value.key";
    pub const ATTR_VALUE: &str = "attributes.key_value.value";
    pub const SPAN_NAME: &str = "span_name";
    pub const TRACE_ID: &str = "trace_id";
    pub const SPAN_ID: &str = "span_id";
    pub const STACK_ID: &str = "stack_id";
    pub const TIMESTAMPS: &str = "timestamps.list.element";
    /// [`super::SPANS`] only.
    pub const TRACE_HI: &str = "trace_hi";
    pub const TRACE_LO: &str = "trace_lo";
    pub const SPAN_BITS: &str = "span_bits";
}

/// A trace link as [`SPANS`] stores it: trace id high and low, span id.
pub fn link_bits(l: &otel_bridge::Link) -> (i64, i64, i64) {
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 8];
    for (i, b) in l.trace_id.iter().enumerate() {
        match (hi.get_mut(i), lo.get_mut(i.wrapping_sub(8))) {
            (Some(h), _) => *h = *b,
            (None, Some(o)) => *o = *b,
            (None, None) => {}
        }
    }
    (
        i64::from_be_bytes(hi),
        i64::from_be_bytes(lo),
        i64::from_be_bytes(l.span_id),
    )
}

/// The trace link [`link_bits`] stored.
pub fn link_of_bits(hi: i64, lo: i64, span: i64) -> otel_bridge::Link {
    let mut trace_id = [0u8; 16];
    for (t, b) in trace_id
        .iter_mut()
        .zip(hi.to_be_bytes().into_iter().chain(lo.to_be_bytes()))
    {
        *t = b;
    }
    otel_bridge::Link {
        trace_id,
        span_id: span.to_be_bytes(),
    }
}

/// One row per distinct stack of a partition; lists leaf first.
pub const STACKS: &str = "
message otelprof_stack {
  required int64 stack_id;
  required group function (LIST) { repeated group list { required binary element (STRING); } }
  required group file (LIST) { repeated group list { required binary element (STRING); } }
  required group line (LIST) { repeated group list { required int64 element; } }
}";

pub mod stack_col {
    pub const STACK_ID: &str = "stack_id";
    pub const FUNCTION: &str = "function.list.element";
    pub const FILE: &str = "file.list.element";
    pub const LINE: &str = "line.list.element";
}

/// `sample_types` and `period_type` hold `type/unit` pairs, comma-separated.
pub const TYPE_SEPARATOR: char = ',';

/// A frame as stored: function name (may be empty), source file, line (0: unknown).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub function: String,
    pub file: String,
    pub line: i64,
}

/// The id of a stack (frames leaf first): FNV-1a, 64 bits, over each frame's name, file and
/// line with separators no name holds, so that any writer computes the same id.
pub fn stack_id<'a>(frames: impl IntoIterator<Item = (&'a str, &'a str, i64)>) -> i64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    };
    for (function, file, line) in frames {
        eat(function.as_bytes());
        eat(&[0]);
        eat(file.as_bytes());
        eat(&[0]);
        eat(&line.to_le_bytes());
        eat(&[0xff]);
    }
    // Stored as Parquet INT64: the same 64 bits, signed.
    h as i64
}

/// The partition directory name of a service: `service=<name>`, bytes outside
/// `[A-Za-z0-9._-]` percent-encoded, and `.`/`..`/empty names encoded whole.
pub fn service_dir(service: &str) -> String {
    let mut out = String::from("service=");
    if service.is_empty() || service == "." || service == ".." {
        for b in service.bytes() {
            let _ = write!(out, "%{b:02X}");
        }
        if service.is_empty() {
            out.push_str("%00");
        }
        return out;
    }
    for b in service.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The service a partition directory name stands for, or `None` if it is not one.
pub fn service_of_dir(name: &str) -> Option<String> {
    let encoded = name.strip_prefix("service=")?;
    if encoded == "%00" {
        return Some(String::new());
    }
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut rest = encoded.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = tail.get(..2)?;
            let hex = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = tail.get(2..)?;
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

const HOUR_NANOS: i64 = 3_600_000_000_000;

/// The hour partition (`hour=2025-01-31T13`) of a profile starting at `unix_nanos`.
pub fn hour_dir(unix_nanos: i64) -> String {
    let start = unix_nanos.div_euclid(HOUR_NANOS) * HOUR_NANOS;
    let text = crate::time::format_time(start);
    // format_time gives RFC 3339 (`2025-01-31T13:00:00Z`); the hour is its first 13 bytes.
    format!("hour={}", text.get(..13).unwrap_or(&text))
}

/// The start (Unix ns) of the hour a partition directory name stands for.
pub fn hour_of_dir(name: &str) -> Option<i64> {
    let hour = name.strip_prefix("hour=")?;
    if hour.len() != 13 {
        return None;
    }
    crate::time::parse_time(&format!("{hour}:00:00Z"), 0).ok()
}

/// One hour in Unix nanoseconds.
pub const HOUR: i64 = HOUR_NANOS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_round_trip_as_integers() {
        let l = otel_bridge::Link::from_hex("80f7651916cd43dd8448eb211c80319c", "ffad6b7169203331")
            .unwrap();
        let (hi, lo, span) = link_bits(&l);
        assert_eq!(
            hi,
            i64::from_be_bytes([0x80, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd])
        );
        assert!(span < 0);
        assert_eq!(link_of_bits(hi, lo, span), l);
    }

    #[test]
    fn partition_names_round_trip_and_stay_one_path_component() {
        for s in ["shop", "a/b", "..", ".", "", "x=y", "café", "%41"] {
            let dir = service_dir(s);
            assert!(!dir.contains('/') && dir != "service=.." && dir != "service=.");
            assert_eq!(service_of_dir(&dir).as_deref(), Some(s), "{dir}");
        }
        assert_eq!(service_dir("shop-v1.2_x"), "service=shop-v1.2_x");
        assert_eq!(service_of_dir("service=%4"), None);
        assert_eq!(service_of_dir("hour=1"), None);
        // 1_738_324_800 s is 2025-01-31T12:00:00Z.
        let t = 1_738_324_800_000_000_000 + HOUR + 59 * 60_000_000_000;
        assert_eq!(hour_dir(t), "hour=2025-01-31T13");
        assert_eq!(
            hour_of_dir("hour=2025-01-31T13"),
            Some(1_738_324_800_000_000_000 + HOUR)
        );
        assert_eq!(hour_of_dir("hour=2025-01-31"), None);
    }

    #[test]
    fn stack_ids_tell_frames_apart() {
        let a = stack_id([("a.B.c", "B.java", 1), ("a.B.d", "B.java", 2)]);
        let b = stack_id([("a.B.c", "B.java", 1), ("a.B.d", "B.java", 3)]);
        let c = stack_id([("a.B.cB.java", "", 1), ("a.B.d", "B.java", 2)]);
        assert!(a != b && a != c && b != c);
        assert_eq!(
            a,
            stack_id([("a.B.c", "B.java", 1), ("a.B.d", "B.java", 2)])
        );
    }
}
