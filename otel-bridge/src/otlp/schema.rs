//! The messages of an OTLP profiles request as protobuf sees them: per message, each field's
//! number and kind. The decoder reads the fields it needs by hand and hands every other field
//! to [`skip_field`], which checks it as the official parser would before moving on: UTF-8 in
//! `string` fields (proto3), packed lists that end where their length says, sub-messages all the
//! way down (an attribute's array of arrays, the scope, the mapping table). A field the schema
//! does not know, or knows with another wire type, is skipped as an unknown field: protobuf
//! parsers keep such fields aside instead of rejecting them.
//!
//! Written from the proto files of opentelemetry-proto v1.10: profiles.proto
//! (<https://github.com/open-telemetry/opentelemetry-proto/blob/v1.10.0/opentelemetry/proto/profiles/v1development/profiles.proto>),
//! common.proto, resource.proto and the collector's profiles_service.proto.

use super::wire::{Wire, FIXED64, LEN, MAX_DEPTH, TOO_DEEP, VARINT};
use super::DecodeError;

type Result<T> = std::result::Result<T, DecodeError>;

/// What a field holds, as far as the validity of its encoding goes.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// int32, int64, uint32, uint64, bool: one varint.
    Varint,
    /// fixed64, double.
    Fixed64,
    /// `string` (also repeated): UTF-8.
    Str,
    /// `bytes`: anything.
    Bytes,
    /// A message (also repeated).
    Message(&'static Message),
    /// `repeated` int32 or int64: packed (proto3's default) or one varint per element.
    RepeatedVarint,
    /// `repeated fixed64`: packed or one fixed64 per element.
    RepeatedFixed64,
}

/// A message: its fields by number.
pub(super) struct Message {
    fields: &'static [(u32, Kind)],
}

impl Message {
    fn kind(&self, field: u32) -> Option<Kind> {
        self.fields
            .iter()
            .find(|(n, _)| *n == field)
            .map(|(_, k)| *k)
    }
}

use Kind::{Bytes, Fixed64, RepeatedFixed64, RepeatedVarint, Str, Varint};

/// `ExportProfilesServiceRequest` (and `ProfilesData`, which has the same fields).
pub(super) static REQUEST: Message = Message {
    fields: &[
        (1, Kind::Message(&RESOURCE_PROFILES)),
        (2, Kind::Message(&DICTIONARY)),
    ],
};
pub(super) static RESOURCE_PROFILES: Message = Message {
    fields: &[
        (1, Kind::Message(&RESOURCE)),
        (2, Kind::Message(&SCOPE_PROFILES)),
        (3, Str), // schema_url
    ],
};
pub(super) static RESOURCE: Message = Message {
    fields: &[
        (1, Kind::Message(&KEY_VALUE)),
        (2, Varint), // dropped_attributes_count
        (3, Kind::Message(&ENTITY_REF)),
    ],
};
pub(super) static KEY_VALUE: Message = Message {
    fields: &[
        (1, Str), // key
        (2, Kind::Message(&ANY_VALUE)),
        (3, Varint), // key_strindex
    ],
};
pub(super) static ANY_VALUE: Message = Message {
    fields: &[
        (1, Str),     // string_value
        (2, Varint),  // bool_value
        (3, Varint),  // int_value
        (4, Fixed64), // double_value
        (5, Kind::Message(&ARRAY_VALUE)),
        (6, Kind::Message(&KEY_VALUE_LIST)),
        (7, Bytes),  // bytes_value
        (8, Varint), // string_value_strindex
    ],
};
pub(super) static ARRAY_VALUE: Message = Message {
    fields: &[(1, Kind::Message(&ANY_VALUE))],
};
pub(super) static KEY_VALUE_LIST: Message = Message {
    fields: &[(1, Kind::Message(&KEY_VALUE))],
};
static ENTITY_REF: Message = Message {
    // schema_url, type, id_keys, description_keys
    fields: &[(1, Str), (2, Str), (3, Str), (4, Str)],
};
pub(super) static SCOPE_PROFILES: Message = Message {
    fields: &[
        (1, Kind::Message(&SCOPE)),
        (2, Kind::Message(&PROFILE)),
        (3, Str), // schema_url
    ],
};
static SCOPE: Message = Message {
    fields: &[
        (1, Str), // name
        (2, Str), // version
        (3, Kind::Message(&KEY_VALUE)),
        (4, Varint), // dropped_attributes_count
    ],
};
pub(super) static PROFILE: Message = Message {
    fields: &[
        (1, Kind::Message(&VALUE_TYPE)), // sample_type
        (2, Kind::Message(&SAMPLE)),
        (3, Fixed64),                    // time_unix_nano
        (4, Varint),                     // duration_nano
        (5, Kind::Message(&VALUE_TYPE)), // period_type
        (6, Varint),                     // period
        (7, Bytes),                      // profile_id
        (8, Varint),                     // dropped_attributes_count
        (9, Str),                        // original_payload_format
        (10, Bytes),                     // original_payload
        (11, RepeatedVarint),            // attribute_indices
    ],
};
pub(super) static VALUE_TYPE: Message = Message {
    // type_strindex, unit_strindex
    fields: &[(1, Varint), (2, Varint)],
};
pub(super) static SAMPLE: Message = Message {
    fields: &[
        (1, Varint),          // stack_index
        (2, RepeatedVarint),  // attribute_indices
        (3, Varint),          // link_index
        (4, RepeatedVarint),  // values
        (5, RepeatedFixed64), // timestamps_unix_nano
    ],
};
pub(super) static DICTIONARY: Message = Message {
    fields: &[
        (1, Kind::Message(&MAPPING)),
        (2, Kind::Message(&LOCATION)),
        (3, Kind::Message(&FUNCTION)),
        (4, Kind::Message(&LINK)),
        (5, Str), // string_table
        (6, Kind::Message(&KEY_VALUE_AND_UNIT)),
        (7, Kind::Message(&STACK)),
    ],
};
pub(super) static MAPPING: Message = Message {
    // memory_start, memory_limit, file_offset, filename_strindex, attribute_indices
    fields: &[
        (1, Varint),
        (2, Varint),
        (3, Varint),
        (4, Varint),
        (5, RepeatedVarint),
    ],
};
pub(super) static LOCATION: Message = Message {
    fields: &[
        (1, Varint), // mapping_index
        (2, Varint), // address
        (3, Kind::Message(&LINE)),
        (4, RepeatedVarint), // attribute_indices
    ],
};
pub(super) static LINE: Message = Message {
    // function_index, line, column
    fields: &[(1, Varint), (2, Varint), (3, Varint)],
};
pub(super) static FUNCTION: Message = Message {
    // name_strindex, system_name_strindex, filename_strindex, start_line
    fields: &[(1, Varint), (2, Varint), (3, Varint), (4, Varint)],
};
pub(super) static LINK: Message = Message {
    // trace_id, span_id
    fields: &[(1, Bytes), (2, Bytes)],
};
pub(super) static KEY_VALUE_AND_UNIT: Message = Message {
    fields: &[
        (1, Varint), // key_strindex
        (2, Kind::Message(&ANY_VALUE)),
        (3, Varint), // unit_strindex
    ],
};
pub(super) static STACK: Message = Message {
    fields: &[(1, RepeatedVarint)], // location_indices
};

/// Consumes one field of a `message` at `depth` that its reader did not read itself, checking
/// its contents if the schema knows it with this wire type, skipping it as unknown otherwise.
pub(super) fn skip_field(
    w: &mut Wire<'_>,
    field: u32,
    wire: u8,
    message: &Message,
    depth: u32,
) -> Result<()> {
    match (message.kind(field), wire) {
        (Some(Varint | RepeatedVarint), VARINT) => w.varint().map(drop),
        (Some(Fixed64 | RepeatedFixed64), FIXED64) => w.fixed64().map(drop),
        (Some(Str), LEN) => w.string().map(drop),
        (Some(Bytes), LEN) => w.bytes().map(drop),
        (Some(RepeatedVarint), LEN) => {
            let mut packed = Wire::new(w.bytes()?);
            while !packed.at_end() {
                packed.varint()?;
            }
            Ok(())
        }
        (Some(RepeatedFixed64), LEN) => {
            let mut packed = Wire::new(w.bytes()?);
            while !packed.at_end() {
                packed.fixed64()?;
            }
            Ok(())
        }
        (Some(Kind::Message(m)), LEN) => check_message(w.bytes()?, m, depth + 1),
        _ => w.skip(field, wire, depth),
    }
}

/// Checks the encoding of a whole `message` at `depth`. Sub-messages are checked in the same
/// loop (a stack of cursors), so that nesting (an array value of array values …) never deepens
/// the call stack; it stops at [`MAX_DEPTH`], as the official parser does.
pub(super) fn check_message(bytes: &[u8], message: &'static Message, depth: u32) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(TOO_DEEP);
    }
    let mut open: smallvec::SmallVec<[(Wire<'_>, &'static Message); 4]> =
        smallvec::smallvec![(Wire::new(bytes), message)];
    loop {
        let d = depth + open.len() as u32 - 1;
        let Some((w, m)) = open.last_mut() else {
            return Ok(());
        };
        let m: &'static Message = m;
        let Some((field, wire)) = w.key()? else {
            open.pop();
            continue;
        };
        match (m.kind(field), wire) {
            (Some(Kind::Message(sub)), LEN) => {
                let inner = w.bytes()?;
                if d + 1 > MAX_DEPTH {
                    return Err(TOO_DEEP);
                }
                open.push((Wire::new(inner), sub));
            }
            _ => skip_field(w, field, wire, m, d)?,
        }
    }
}
