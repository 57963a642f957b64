//! The mutations: on the message tree and on the encoded bytes.

use super::rng::Rng;
use super::tree::{
    encode, encode_field, kind, read_varint, unpack, Body, Field, Kind, Msg, END_GROUP, FIXED32,
    FIXED64, LEN, START_GROUP, VARINT,
};

/// Where a field is: the indices down to its parent message (whose length is the parent's depth,
/// the request being 0), its index there, and the parent's type.
#[derive(Clone, Debug)]
struct Site {
    parent: Vec<usize>,
    index: usize,
    message: Msg,
}

/// Every field of the tree.
fn sites(fields: &[Field], m: Msg, path: &mut Vec<usize>, out: &mut Vec<Site>) {
    for (i, f) in fields.iter().enumerate() {
        out.push(Site {
            parent: path.clone(),
            index: i,
            message: m,
        });
        if let Body::Msg(sub, inner, _) = &f.body {
            path.push(i);
            sites(inner, *sub, path, out);
            path.pop();
        }
    }
}

/// The fields of the message at `path`.
fn message_at<'a>(root: &'a mut Vec<Field>, path: &[usize]) -> &'a mut Vec<Field> {
    let mut cur = root;
    for &i in path {
        cur = match &mut cur[i].body {
            Body::Msg(_, inner, _) => inner,
            _ => unreachable!("sites only descend into messages"),
        };
    }
    cur
}

/// What a case did to its valid request. Those before [`Mutation::FlipBit`] change the message
/// tree, the others the encoded bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mutation {
    /// Nothing: the valid request itself.
    Unmutated,
    /// A field written once more, later in its message (a message field then merges, a scalar's
    /// last value counts, a repeated field gets one more element).
    Duplicate,
    Remove,
    /// A copy of a field put into another message, where its number means something else.
    Move,
    /// A message field written as two occurrences (which protobuf merges), sometimes with an
    /// earlier value of a scalar in the first.
    Split,
    /// Another wire type on a field's tag, the bytes after it unchanged.
    WrongWireTypeRaw,
    /// Another wire type with contents well formed for it (a known field then reads as unknown).
    WrongWireTypeWellFormed,
    /// A message field written as a group, closed by its own end-group tag or another's.
    AsGroup,
    /// A sequence that is not UTF-8 put into a `string` or a `bytes` field.
    InvalidUtf8,
    /// An unknown field of any wire type (groups, nested groups near the depth limit, stray
    /// end-group tags, 6 and 7), or field number 0.
    UnknownField,
    /// A tag or length padded to 5 or 6 bytes, a varint to 10 or 11.
    OverlongEncoding,
    /// An attribute value of arrays in arrays, just inside or just past the depth limit.
    DeepNesting,
    /// A packed repeated field written one element per field.
    Unpack,
    /// A varint set to an index or count in or out of range.
    Number,
    FlipBit,
    SetByte,
    InsertByte,
    DeleteBytes,
    Truncate,
    /// A range of bytes copied elsewhere.
    DuplicateBytes,
}

pub const MUTATIONS: [Mutation; 19] = [
    Mutation::Duplicate,
    Mutation::Remove,
    Mutation::Move,
    Mutation::Split,
    Mutation::WrongWireTypeRaw,
    Mutation::WrongWireTypeWellFormed,
    Mutation::AsGroup,
    Mutation::InvalidUtf8,
    Mutation::UnknownField,
    Mutation::OverlongEncoding,
    Mutation::DeepNesting,
    Mutation::Unpack,
    Mutation::Number,
    Mutation::FlipBit,
    Mutation::SetByte,
    Mutation::InsertByte,
    Mutation::DeleteBytes,
    Mutation::Truncate,
    Mutation::DuplicateBytes,
];

impl Mutation {
    pub fn on_bytes(self) -> bool {
        self >= Mutation::FlipBit
    }
}

/// Sequences that are not UTF-8: a stray continuation byte, a byte never used, an over-long
/// NUL, a surrogate, a code point past U+10FFFF, a cut-off sequence.
const NOT_UTF8: [&[u8]; 6] = [
    &[0x80],
    &[0xff],
    &[0xc0, 0x80],
    &[0xed, 0xa0, 0x80],
    &[0xf4, 0x90, 0x80, 0x80],
    &[0xe2, 0x82],
];

/// Numbers an index or a count could be: in range, just out of range, negative as int32 and as
/// int64, past 32 bits.
const NUMBERS: [u64; 10] = [0, 1, 2, 7, 40, 127, u64::MAX, 0xffff_ffff, 1 << 31, 1 << 40];

/// Field numbers for unknown fields: 0 (invalid), unused small ones, the reserved
/// implementation range, the largest valid one.
const UNKNOWN_NUMBERS: [u32; 7] = [0, 9, 15, 99, 19_000, 100_000, (1 << 29) - 1];

fn body_bytes(f: &Field) -> Vec<u8> {
    let mut out = Vec::new();
    encode_field(f, &mut out);
    let mut pos = 0;
    read_varint(&out, &mut pos);
    out.split_off(pos)
}

fn random_bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next() as u8).collect()
}

/// An AnyValue `depth` arrays deep around a string.
fn nested_any(depth: usize) -> Body {
    let mut v = vec![Field::new(1, Body::Len(b"deep".to_vec(), 0))];
    for _ in 0..depth {
        let array = vec![Field::new(1, Body::Msg(Msg::AnyValue, v, 0))];
        v = vec![Field::new(5, Body::Msg(Msg::ArrayValue, array, 0))];
    }
    Body::Msg(Msg::AnyValue, v, 0)
}

/// `depth` unknown groups nested in one another.
fn nested_groups(number: u32, depth: usize) -> Field {
    let mut f = Field::new(number, Body::Group(Vec::new(), number));
    for _ in 1..depth {
        f = Field::new(number, Body::Group(vec![f], number));
    }
    f
}

/// Applies `m` to the tree; false when the tree has no place for it (the case then tries
/// another mutation).
fn mutate_tree(root: &mut Vec<Field>, m: Mutation, rng: &mut Rng) -> bool {
    let mut all = Vec::new();
    sites(root, Msg::Request, &mut Vec::new(), &mut all);
    let fits = |s: &&Site| -> bool {
        let f = {
            let mut cur: &Vec<Field> = root;
            for &i in &s.parent {
                cur = match &cur[i].body {
                    Body::Msg(_, inner, _) => inner,
                    _ => unreachable!(),
                };
            }
            &cur[s.index]
        };
        let k = kind(s.message, f.number);
        match m {
            Mutation::Split => matches!(&f.body, Body::Msg(_, inner, _) if !inner.is_empty()),
            Mutation::AsGroup => matches!(f.body, Body::Msg(..)),
            Mutation::InvalidUtf8 => matches!(k, Some(Kind::Str | Kind::Bytes)),
            Mutation::DeepNesting => matches!(f.body, Body::Msg(Msg::AnyValue, ..)),
            Mutation::Unpack => {
                matches!(k, Some(Kind::PackedVarint | Kind::PackedFixed64))
                    && matches!(f.body, Body::Len(..))
            }
            Mutation::Number => matches!(f.body, Body::Varint(..)),
            _ => true,
        }
    };
    let candidates: Vec<&Site> = all.iter().filter(fits).collect();
    if candidates.is_empty() {
        return false;
    }
    let site = (*rng.pick(&candidates)).clone();
    // The depth of the field's own message, if it is one.
    let depth = site.parent.len() + 1;
    let other = rng.pick(&all).clone();
    let parent = message_at(root, &site.parent);
    let f = parent[site.index].clone();
    match m {
        Mutation::Duplicate => {
            let at = site.index + 1 + rng.below(parent.len() - site.index);
            parent.insert(at, f);
        }
        Mutation::Remove => {
            parent.remove(site.index);
        }
        Mutation::Move => {
            // A copy of one field into another message (or the same one), e.g. a Line into a
            // Sample: the same field number means something else there.
            let target = message_at(root, &other.parent);
            let at = rng.below(target.len() + 1);
            target.insert(at, f);
        }
        Mutation::Split => {
            let Body::Msg(sub, inner, pad) = f.body else {
                unreachable!()
            };
            let cut = rng.below(inner.len() + 1);
            let mut first = inner[..cut].to_vec();
            let second = inner[cut..].to_vec();
            // Sometimes the first part also holds an earlier value of a field of the second:
            // protobuf keeps the second's (the last one wins).
            if let Some(g) = second.iter().find(|g| matches!(g.body, Body::Varint(..))) {
                if rng.chance(50) {
                    let mut early = g.clone();
                    early.body = Body::Varint(*rng.pick(&NUMBERS), 0);
                    first.push(early);
                }
            }
            parent[site.index] = Field::new(f.number, Body::Msg(sub, first, pad));
            parent.insert(
                site.index + 1,
                Field::new(f.number, Body::Msg(sub, second, 0)),
            );
        }
        Mutation::WrongWireTypeRaw => {
            let wire = (f.wire + 1 + rng.below(7) as u8) % 8;
            parent[site.index] = Field {
                wire,
                body: Body::Raw(body_bytes(&f)),
                ..f
            };
        }
        Mutation::WrongWireTypeWellFormed => {
            let wire = *rng.pick(&[VARINT, FIXED64, LEN, FIXED32, START_GROUP]);
            let body = match wire {
                VARINT => Body::Varint(*rng.pick(&NUMBERS), 0),
                FIXED64 => Body::Fixed(random_bytes(rng, 8)),
                FIXED32 => Body::Fixed(random_bytes(rng, 4)),
                LEN => match f.body {
                    Body::Msg(..) => Body::Len(random_bytes(rng, 3), 0),
                    _ => Body::Len(body_bytes(&f), 0),
                },
                _ => match f.body {
                    Body::Msg(_, inner, _) => Body::Group(inner, f.number),
                    _ => Body::Group(Vec::new(), f.number),
                },
            };
            parent[site.index] = Field::new(f.number, body);
        }
        Mutation::AsGroup => {
            let Body::Msg(_, inner, _) = f.body else {
                unreachable!()
            };
            let end = if rng.chance(80) {
                f.number
            } else {
                f.number + 1
            };
            parent[site.index] = Field::new(f.number, Body::Group(inner, end));
        }
        Mutation::InvalidUtf8 => {
            let k = kind(site.message, f.number);
            let mut b = match f.body {
                Body::Len(b, _) => b,
                _ => body_bytes(&f),
            };
            let bad = *rng.pick(&NOT_UTF8);
            if k == Some(Kind::Bytes) && b.len() >= bad.len() {
                // Over bytes of the same length: ids keep the length OTLP wants, so only the
                // UTF-8 could matter (and must not, in a `bytes` field).
                let at = rng.below(b.len() - bad.len() + 1);
                b[at..at + bad.len()].copy_from_slice(bad);
            } else {
                let at = rng.below(b.len() + 1);
                b.splice(at..at, bad.iter().copied());
            }
            parent[site.index] = Field::new(f.number, Body::Len(b, 0));
        }
        Mutation::UnknownField => {
            let number = *rng.pick(&UNKNOWN_NUMBERS);
            let field = match rng.below(9) {
                0 => Field::new(number, Body::Varint(rng.next() >> rng.below(64), 0)),
                1 => Field::new(number, Body::Fixed(random_bytes(rng, 8))),
                2 => Field::new(number, Body::Fixed(random_bytes(rng, 4))),
                3 => {
                    let n = rng.below(6);
                    Field::new(number, Body::Len(random_bytes(rng, n), 0))
                }
                4 => {
                    // A group holding a copy of a field, closed by its own or (sometimes)
                    // another field number.
                    let end = if rng.chance(85) { number } else { number ^ 1 };
                    Field::new(number, Body::Group(vec![f], end))
                }
                // The deepest group just inside or just past the depth limit.
                5 => nested_groups(number, 95 - depth.min(95) + rng.below(10)),
                6 => Field {
                    wire: END_GROUP,
                    ..Field::new(number, Body::Raw(Vec::new()))
                },
                _ => Field {
                    wire: 6 + rng.below(2) as u8,
                    ..Field::new(number, Body::Raw(random_bytes(rng, 2)))
                },
            };
            let at = rng.below(parent.len() + 1);
            parent.insert(at, field);
        }
        Mutation::OverlongEncoding => {
            // Up to 5 bytes a tag or a length is valid, up to 10 a varint; one more is not.
            let g = &mut parent[site.index];
            match (&mut g.body, rng.below(2)) {
                (Body::Varint(_, pad), 0) => *pad = 8 + rng.below(3) as u8,
                (Body::Len(_, pad) | Body::Msg(_, _, pad), 0) => *pad = 3 + rng.below(3) as u8,
                _ => g.tag_pad = 3 + rng.below(3) as u8,
            }
        }
        Mutation::DeepNesting => {
            // An AnyValue whose innermost message is just inside or just past the parser's
            // depth limit of 100 (counted from the request).
            let limit = 100usize.saturating_sub(depth) / 2;
            let n = limit.saturating_sub(2) + rng.below(5);
            parent[site.index].body = nested_any(n);
        }
        Mutation::Unpack => {
            let Body::Len(b, _) = &f.body else {
                unreachable!()
            };
            let k = kind(site.message, f.number);
            // A cut-off fixed64 list stays packed (it is already malformed).
            if k == Some(Kind::PackedFixed64) && b.len() % 8 != 0 {
                return false;
            }
            let mut pos = 0;
            while k == Some(Kind::PackedVarint) && pos < b.len() {
                if read_varint(b, &mut pos).is_none() {
                    return false;
                }
            }
            let fields = unpack(f.number, k, b);
            parent.splice(site.index..=site.index, fields);
        }
        Mutation::Number => {
            parent[site.index].body = Body::Varint(*rng.pick(&NUMBERS), 0);
        }
        _ => unreachable!("{m:?} is a byte mutation"),
    }
    true
}

fn mutate_bytes(b: &mut Vec<u8>, m: Mutation, rng: &mut Rng) {
    if b.is_empty() {
        b.push(rng.next() as u8);
        return;
    }
    let at = rng.below(b.len());
    match m {
        Mutation::FlipBit => b[at] ^= 1 << rng.below(8),
        Mutation::SetByte => b[at] = rng.next() as u8,
        Mutation::InsertByte => b.insert(at, rng.next() as u8),
        Mutation::DeleteBytes => {
            let n = (1 + rng.below(4)).min(b.len() - at);
            b.drain(at..at + n);
        }
        Mutation::Truncate => b.truncate(at),
        Mutation::DuplicateBytes => {
            let n = (1 + rng.below(16)).min(b.len() - at);
            let copy = b[at..at + n].to_vec();
            let to = rng.below(b.len() + 1);
            b.splice(to..to, copy);
        }
        _ => unreachable!("{m:?} is a tree mutation"),
    }
}

/// One case: a base request and one to three mutations, the first one `first`.
pub fn make_case(base: &[Field], first: Mutation, rng: &mut Rng) -> Vec<u8> {
    let mut tree = base.to_vec();
    let mut byte_mutations = Vec::new();
    let extra = rng.below(3);
    for n in 0..=extra {
        let m = if n == 0 { first } else { *rng.pick(&MUTATIONS) };
        if m.on_bytes() {
            byte_mutations.push(m);
        } else if !mutate_tree(&mut tree, m, rng) {
            mutate_tree(&mut tree, Mutation::UnknownField, rng);
        }
    }
    let mut bytes = encode(&tree);
    for m in byte_mutations {
        mutate_bytes(&mut bytes, m, rng);
    }
    bytes
}
