//! The messages of a request as the test knows them, and a message tree that keeps how each
//! field was written, so that a mutation changes exactly what it means to change.
//!
//! The schema is written here from profiles.proto v1.10, common.proto and resource.proto, not
//! shared with the decoder under test.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    Request,
    ResourceProfiles,
    Resource,
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
    EntityRef,
    ScopeProfiles,
    Scope,
    Profile,
    ValueType,
    Sample,
    Dictionary,
    Mapping,
    Location,
    Line,
    Function,
    Link,
    KeyValueAndUnit,
    Stack,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Msg(Msg),
    Str,
    Bytes,
    Varint,
    Fixed64,
    PackedVarint,
    PackedFixed64,
}

pub fn kind(m: Msg, field: u32) -> Option<Kind> {
    use Kind as K;
    Some(match (m, field) {
        (Msg::Request, 1) => K::Msg(Msg::ResourceProfiles),
        (Msg::Request, 2) => K::Msg(Msg::Dictionary),
        (Msg::ResourceProfiles, 1) => K::Msg(Msg::Resource),
        (Msg::ResourceProfiles, 2) => K::Msg(Msg::ScopeProfiles),
        (Msg::ResourceProfiles | Msg::ScopeProfiles, 3) => K::Str,
        (Msg::Resource, 1) => K::Msg(Msg::KeyValue),
        (Msg::Resource, 2) => K::Varint,
        (Msg::Resource, 3) => K::Msg(Msg::EntityRef),
        (Msg::KeyValue, 1) => K::Str,
        (Msg::KeyValue, 2) => K::Msg(Msg::AnyValue),
        (Msg::KeyValue, 3) => K::Varint,
        (Msg::AnyValue, 1) => K::Str,
        (Msg::AnyValue, 2 | 3 | 8) => K::Varint,
        (Msg::AnyValue, 4) => K::Fixed64,
        (Msg::AnyValue, 5) => K::Msg(Msg::ArrayValue),
        (Msg::AnyValue, 6) => K::Msg(Msg::KeyValueList),
        (Msg::AnyValue, 7) => K::Bytes,
        (Msg::ArrayValue, 1) => K::Msg(Msg::AnyValue),
        (Msg::KeyValueList, 1) => K::Msg(Msg::KeyValue),
        (Msg::EntityRef, 1..=4) => K::Str,
        (Msg::ScopeProfiles, 1) => K::Msg(Msg::Scope),
        (Msg::ScopeProfiles, 2) => K::Msg(Msg::Profile),
        (Msg::Scope, 1 | 2) => K::Str,
        (Msg::Scope, 3) => K::Msg(Msg::KeyValue),
        (Msg::Scope, 4) => K::Varint,
        (Msg::Profile, 1 | 5) => K::Msg(Msg::ValueType),
        (Msg::Profile, 2) => K::Msg(Msg::Sample),
        (Msg::Profile, 3) => K::Fixed64,
        (Msg::Profile, 4 | 6 | 8) => K::Varint,
        (Msg::Profile, 7 | 10) => K::Bytes,
        (Msg::Profile, 9) => K::Str,
        (Msg::Profile, 11) => K::PackedVarint,
        (Msg::ValueType, 1 | 2) => K::Varint,
        (Msg::Sample, 1 | 3) => K::Varint,
        (Msg::Sample, 2 | 4) => K::PackedVarint,
        (Msg::Sample, 5) => K::PackedFixed64,
        (Msg::Dictionary, 1) => K::Msg(Msg::Mapping),
        (Msg::Dictionary, 2) => K::Msg(Msg::Location),
        (Msg::Dictionary, 3) => K::Msg(Msg::Function),
        (Msg::Dictionary, 4) => K::Msg(Msg::Link),
        (Msg::Dictionary, 5) => K::Str,
        (Msg::Dictionary, 6) => K::Msg(Msg::KeyValueAndUnit),
        (Msg::Dictionary, 7) => K::Msg(Msg::Stack),
        (Msg::Mapping, 1..=4) => K::Varint,
        (Msg::Mapping, 5) => K::PackedVarint,
        (Msg::Location, 1 | 2) => K::Varint,
        (Msg::Location, 3) => K::Msg(Msg::Line),
        (Msg::Location, 4) => K::PackedVarint,
        (Msg::Line, 1..=3) => K::Varint,
        (Msg::Function, 1..=4) => K::Varint,
        (Msg::Link, 1 | 2) => K::Bytes,
        (Msg::KeyValueAndUnit, 1 | 3) => K::Varint,
        (Msg::KeyValueAndUnit, 2) => K::Msg(Msg::AnyValue),
        (Msg::Stack, 1) => K::PackedVarint,
        _ => return None,
    })
}

pub const VARINT: u8 = 0;
pub const FIXED64: u8 = 1;
pub const LEN: u8 = 2;
pub const START_GROUP: u8 = 3;
pub const END_GROUP: u8 = 4;
pub const FIXED32: u8 = 5;

#[derive(Clone, Debug)]
pub struct Field {
    pub number: u32,
    pub wire: u8,
    /// Extra continuation bytes in the tag (an over-long but, up to 5 bytes, valid encoding).
    pub tag_pad: u8,
    pub body: Body,
}

#[derive(Clone, Debug)]
pub enum Body {
    /// A varint and its extra continuation bytes.
    Varint(u64, u8),
    /// 4 or 8 bytes.
    Fixed(Vec<u8>),
    /// A length-delimited string, bytes or packed field, and the length's extra bytes.
    Len(Vec<u8>, u8),
    /// A length-delimited known sub-message, parsed, and the length's extra bytes.
    Msg(Msg, Vec<Field>, u8),
    /// Fields between a start-group tag and an end-group tag of `.1`.
    Group(Vec<Field>, u32),
    /// Whatever bytes follow the tag, verbatim.
    Raw(Vec<u8>),
}

impl Field {
    pub fn new(number: u32, body: Body) -> Field {
        let wire = match &body {
            Body::Varint(..) => VARINT,
            Body::Fixed(b) if b.len() == 4 => FIXED32,
            Body::Fixed(_) => FIXED64,
            Body::Len(..) | Body::Msg(..) | Body::Raw(_) => LEN,
            Body::Group(..) => START_GROUP,
        };
        Field {
            number,
            wire,
            tag_pad: 0,
            body,
        }
    }
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64, pad: u8) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            if pad == 0 {
                out.push(b);
            } else {
                out.push(b | 0x80);
                out.extend(std::iter::repeat_n(0x80, usize::from(pad) - 1));
                out.push(0);
            }
            return;
        }
        out.push(b | 0x80);
    }
}

pub fn read_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub fn encode(fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        encode_field(f, &mut out);
    }
    out
}

pub fn encode_field(f: &Field, out: &mut Vec<u8>) {
    put_varint(out, u64::from(f.number) << 3 | u64::from(f.wire), f.tag_pad);
    match &f.body {
        Body::Varint(v, pad) => put_varint(out, *v, *pad),
        Body::Fixed(b) | Body::Raw(b) => out.extend(b),
        Body::Len(b, pad) => {
            put_varint(out, b.len() as u64, *pad);
            out.extend(b);
        }
        Body::Msg(_, fields, pad) => {
            let b = encode(fields);
            put_varint(out, b.len() as u64, *pad);
            out.extend(b);
        }
        Body::Group(fields, end) => {
            out.extend(encode(fields));
            put_varint(out, u64::from(*end) << 3 | u64::from(END_GROUP), 0);
        }
    }
}

/// Parses a valid message (the encoder's output) into a tree; known sub-messages are parsed
/// too.
pub fn parse(b: &[u8], m: Msg) -> Vec<Field> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let key = read_varint(b, &mut pos).unwrap();
        let (number, wire) = ((key >> 3) as u32, (key & 7) as u8);
        let body = match wire {
            VARINT => Body::Varint(read_varint(b, &mut pos).unwrap(), 0),
            FIXED64 | FIXED32 => {
                let n = if wire == FIXED64 { 8 } else { 4 };
                pos += n;
                Body::Fixed(b[pos - n..pos].to_vec())
            }
            LEN => {
                let n = read_varint(b, &mut pos).unwrap() as usize;
                pos += n;
                let inner = &b[pos - n..pos];
                match kind(m, number) {
                    Some(Kind::Msg(sub)) => Body::Msg(sub, parse(inner, sub), 0),
                    _ => Body::Len(inner.to_vec(), 0),
                }
            }
            _ => panic!("the encoder wrote wire type {wire}"),
        };
        out.push(Field {
            number,
            wire,
            tag_pad: 0,
            body,
        });
    }
    out
}

/// The fields a packed repeated field `number` of `kind` stands for, one per element.
pub fn unpack(number: u32, kind: Option<Kind>, packed: &[u8]) -> Vec<Field> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < packed.len() {
        if kind == Some(Kind::PackedFixed64) {
            out.push(Field::new(
                number,
                Body::Fixed(packed[pos..pos + 8].to_vec()),
            ));
            pos += 8;
        } else {
            let v = read_varint(packed, &mut pos).unwrap();
            out.push(Field::new(number, Body::Varint(v, 0)));
        }
    }
    out
}
