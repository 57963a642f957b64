//! The tables (strings, functions, locations, stacks) that the profiles read from one file
//! or one row group share, as an OTLP request's profiles do.

use otel_bridge::model::{
    Dictionary, Function, FunctionId, Line, Lines, Location, LocationId, StackId, StrId, ValueType,
};
use otel_bridge::FrameKind;
use parquet::data_type::ByteArray;
use rustc_hash::FxHashMap;

use super::columns::text;
use crate::columnar::schema::{self, Frame};
use crate::error::ColumnarFileError;

/// The tables of the profiles of one samples file, shared by them (as an OTLP request's).
#[derive(Clone, Default)]
pub(in crate::columnar) struct DictionaryBuilder {
    pub(in crate::columnar) dictionary: Dictionary,
    strings: FxHashMap<String, StrId>,
    functions: FxHashMap<(StrId, StrId), FunctionId>,
    locations: FxHashMap<(FunctionId, i64), LocationId>,
    stacks: FxHashMap<i64, StackId>,
    frames: Vec<LocationId>,
}

impl DictionaryBuilder {
    pub(in crate::columnar) fn intern(&mut self, s: &str) -> StrId {
        if s.is_empty() {
            return StrId(0);
        }
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = StrId(u32::try_from(self.dictionary.strings.len()).unwrap_or(u32::MAX));
        self.dictionary.strings.push(s.to_owned());
        self.strings.insert(s.to_owned(), id);
        id
    }

    pub(in crate::columnar) fn stack(
        &mut self,
        id: i64,
        stacks: &FxHashMap<i64, Vec<Frame>>,
    ) -> StackId {
        if let Some(&s) = self.stacks.get(&id) {
            return s;
        }
        // A stack id without a stored stack (a stacks file skipped as unreadable) becomes
        // the empty stack; its samples still count.
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        for f in stacks.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
            let name = self.intern(&f.function);
            let file = self.intern(&f.file);
            let next =
                FunctionId(u32::try_from(self.dictionary.functions.len()).unwrap_or(u32::MAX));
            let function = *self.functions.entry((name, file)).or_insert_with(|| {
                self.dictionary.functions.push(Function {
                    name,
                    system_name: name,
                    filename: file,
                    start_line: 0,
                });
                next
            });
            let next =
                LocationId(u32::try_from(self.dictionary.locations.len()).unwrap_or(u32::MAX));
            let location = *self.locations.entry((function, f.line)).or_insert_with(|| {
                self.dictionary.locations.push(Location {
                    lines: Lines::from_vec(vec![Line {
                        function,
                        line: f.line,
                    }]),
                    kind: FrameKind::Jvm,
                    address: 0,
                    mapping: Default::default(),
                });
                next
            });
            frames.push(location);
        }
        let s = self.dictionary.stacks.push(&frames);
        self.frames = frames;
        self.stacks.insert(id, s);
        s
    }
}

/// `type/unit` pairs, comma-separated, percent-encoded ([`crate::columnar::write`]).
pub(super) fn parse_types(text: &str, b: &mut DictionaryBuilder) -> Vec<ValueType> {
    let dec = |s: &str| {
        s.replace("%2F", "/")
            .replace("%2C", ",")
            .replace("%25", "%")
    };
    text.split(schema::TYPE_SEPARATOR)
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (ty, unit) = t.split_once('/').unwrap_or((t, ""));
            ValueType {
                ty: b.intern(&dec(ty)),
                unit: b.intern(&dec(unit)),
            }
        })
        .collect()
}

/// Interns the strings of a row group's columns: a value read from a column's dictionary
/// page shares that page's bytes with every other row holding it, so its address and length
/// find its id without hashing or checking the text again (a column written without a
/// dictionary misses and is interned by text, with the same result).
#[derive(Default)]
pub(in crate::columnar) struct Interned(FxHashMap<(usize, usize), StrId>);

impl Interned {
    pub(in crate::columnar) fn get(
        &mut self,
        bytes: &ByteArray,
        b: &mut DictionaryBuilder,
    ) -> Result<StrId, ColumnarFileError> {
        let data = bytes.data();
        let key = (data.as_ptr() as usize, data.len());
        if let Some(&id) = self.0.get(&key) {
            return Ok(id);
        }
        let id = b.intern(text(bytes)?);
        self.0.insert(key, id);
        Ok(id)
    }
}
