//! A protobuf wire-format cursor (<https://protobuf.dev/programming-guides/encoding/>): the
//! fast decoder's only view of its input. Every read is bounds-checked and returns an error,
//! never panics, on truncated or malformed input.
//!
//! It accepts the encodings the official parser accepts and rejects the others. Where the
//! encoding guide leaves the limits open, these are upb's (the parser behind Google's protobuf
//! for Python, Ruby and PHP), as measured by `tests/tests/hostile/conformance`:
//!
//! - a varint has at most 10 bytes; bits past the 64th are dropped;
//! - a tag is a varint of at most 5 bytes whose value fits 32 bits, and field number 0 is
//!   invalid (except inside a group being skipped, where upb does not look at it);
//! - a length is a varint of at most 5 bytes, below 2^31 − 1;
//! - wire types 6 and 7 do not exist; a group (3) is skipped up to the end-group tag (4) of
//!   its own field number, and an end-group tag anywhere else is invalid;
//! - messages and groups nest at most [`MAX_DEPTH`] deep, the request being depth 0.

use super::DecodeError;

type Result<T> = std::result::Result<T, DecodeError>;

/// A protobuf wire-format cursor.
pub(super) struct Wire<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

pub(super) const VARINT: u8 = 0;
pub(super) const FIXED64: u8 = 1;
pub(super) const LEN: u8 = 2;
pub(super) const START_GROUP: u8 = 3;
pub(super) const END_GROUP: u8 = 4;
pub(super) const FIXED32: u8 = 5;

/// The deepest a message or group may be nested, the outermost message being at depth 0
/// (upb's default limit, which the official Python parser keeps).
pub(super) const MAX_DEPTH: u32 = 100;

/// The error for a message or group nested deeper than [`MAX_DEPTH`].
pub(super) const TOO_DEEP: DecodeError = DecodeError::Wire("messages nested more than 100 deep");

impl<'a> Wire<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Wire<'a> {
        Wire { buf, pos: 0 }
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline(always)]
    pub(super) fn varint(&mut self) -> Result<u64> {
        // Most varints here (keys, indices, lengths of small messages) are one byte; location
        // indices in stacks take two.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
            if let Some(&c) = self.buf.get(self.pos + 1) {
                if c < 0x80 {
                    self.pos += 2;
                    return Ok(u64::from(b & 0x7f) | u64::from(c) << 7);
                }
            }
        }
        self.varint_long::<10>("a varint longer than 10 bytes")
    }

    /// A varint of at most `MAX_BYTES` bytes (10 for values, 5 for tags and lengths); a
    /// constant, so that the loop unrolls as it did before tags and lengths had their own limit.
    #[inline(never)]
    fn varint_long<const MAX_BYTES: u32>(&mut self, too_long: &'static str) -> Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..7 * MAX_BYTES).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or(DecodeError::Wire("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Wire(too_long))
    }

    /// A varint with the fast path of [`Wire::varint`] but at most 5 bytes: tags and lengths.
    #[inline(always)]
    fn varint32(&mut self, too_long: &'static str) -> Result<u64> {
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
            if let Some(&c) = self.buf.get(self.pos + 1) {
                if c < 0x80 {
                    self.pos += 2;
                    return Ok(u64::from(b & 0x7f) | u64::from(c) << 7);
                }
            }
        }
        self.varint_long::<5>(too_long)
    }

    /// The next field's number and wire type, `None` at the end. Field number 0 and wire types
    /// 6 and 7 are returned as read: no arm of a reader matches them, and [`Wire::skip`]
    /// rejects them.
    #[inline(always)]
    pub(super) fn key(&mut self) -> Result<Option<(u32, u8)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let k = self.varint32("a tag longer than 5 bytes")?;
        let k = u32::try_from(k).map_err(|_| DecodeError::Wire("a tag over 32 bits"))?;
        Ok(Some((k >> 3, (k & 7) as u8)))
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or(DecodeError::Wire("truncated field"))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(DecodeError::Wire("truncated field"))?;
        self.pos = end;
        Ok(s)
    }

    /// A length-delimited field's contents.
    #[inline]
    pub(super) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.varint32("a length longer than 5 bytes")?;
        if n >= i32::MAX as u64 {
            return Err(DecodeError::Wire("a length of 2 GiB or more"));
        }
        // In range: just checked.
        self.take(n as usize)
    }

    /// A `string` field's contents, which proto3 requires to be UTF-8.
    #[inline]
    pub(super) fn string(&mut self) -> Result<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| DecodeError::Utf8)
    }

    #[inline]
    pub(super) fn fixed64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Consumes a field its reader does not read: an unknown field, or a known one with a wire
    /// type other than its own, which protobuf parsers keep as an unknown field rather than
    /// reject. `depth` is the depth of the message the field is in.
    pub(super) fn skip(&mut self, field: u32, wire: u8, depth: u32) -> Result<()> {
        if field == 0 {
            return Err(DecodeError::Wire("field number 0"));
        }
        self.skip_value(field, wire, depth)
    }

    fn skip_value(&mut self, field: u32, wire: u8, depth: u32) -> Result<()> {
        match wire {
            VARINT => self.varint().map(|_| ()),
            FIXED64 => self.take(8).map(|_| ()),
            LEN => self.bytes().map(|_| ()),
            FIXED32 => self.take(4).map(|_| ()),
            START_GROUP => self.skip_group(field, depth + 1),
            END_GROUP => Err(DecodeError::Wire("an end-group tag outside a group")),
            _ => Err(DecodeError::Wire("wire type 6 or 7")),
        }
    }

    /// Skips the fields of a group that started at `depth` with field number `field`, up to and
    /// including its end-group tag. Groups nested in it are skipped in the same loop (their
    /// field numbers on a stack), so the input's nesting never deepens the call stack.
    fn skip_group(&mut self, field: u32, depth: u32) -> Result<()> {
        let mut open = vec![field];
        loop {
            if depth + open.len() as u32 - 1 > MAX_DEPTH {
                return Err(TOO_DEEP);
            }
            let (f, wire) = self
                .key()?
                .ok_or(DecodeError::Wire("a group without its end-group tag"))?;
            match wire {
                START_GROUP => open.push(f),
                END_GROUP => {
                    if open.pop() != Some(f) {
                        return Err(DecodeError::Wire(
                            "a group closed by another field's end-group tag",
                        ));
                    }
                    if open.is_empty() {
                        return Ok(());
                    }
                }
                _ => self.skip_value(f, wire, depth)?,
            }
        }
    }

    /// An `int32` field: varints are sign-extended 64-bit on the wire.
    #[inline]
    pub(super) fn int32(&mut self) -> Result<i32> {
        Ok(self.varint()? as i64 as i32)
    }

    /// Appends the elements of a packed repeated int32 field's contents to `out`.
    #[inline]
    pub(super) fn packed_i32(&mut self, out: &mut Vec<i32>) -> Result<()> {
        let mut inner = Wire::new(self.bytes()?);
        while !inner.at_end() {
            out.push(inner.int32()?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip_all(b: &[u8]) -> Result<()> {
        let mut w = Wire::new(b);
        while let Some((f, wt)) = w.key()? {
            w.skip(f, wt, 0)?;
        }
        Ok(())
    }

    #[test]
    fn tags_have_at_most_five_bytes_and_32_bits() {
        // Field 1, varint 0, with the tag padded to 5 and 6 bytes.
        assert!(skip_all(&[0x88, 0x80, 0x80, 0x80, 0x00, 0]).is_ok());
        assert!(skip_all(&[0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0]).is_err());
        assert!(skip_all(&[0x80, 0x80, 0x80, 0x80, 0x10, 0]).is_err());
        // The largest field number.
        assert!(skip_all(&[0xf8, 0xff, 0xff, 0xff, 0x0f, 0]).is_ok());
    }

    #[test]
    fn varints_have_at_most_ten_bytes_and_lengths_five() {
        let mut ten = vec![0x08];
        ten.extend([0xff; 9]);
        ten.push(0x7f);
        assert!(skip_all(&ten).is_ok(), "bits past 64 are dropped");
        let mut eleven = vec![0x08];
        eleven.extend([0xff; 10]);
        eleven.push(0x01);
        assert!(skip_all(&eleven).is_err());
        assert!(skip_all(&[0x0a, 0x80, 0x80, 0x80, 0x80, 0x00]).is_ok());
        assert!(skip_all(&[0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]).is_err());
    }

    #[test]
    fn groups_are_skipped_to_their_own_end() {
        // 9: start group, 1: varint 1, 9: end group.
        assert!(skip_all(&[0x4b, 0x08, 0x01, 0x4c]).is_ok());
        // Closed by field 8's end-group tag; never closed; an end-group tag alone.
        assert!(skip_all(&[0x4b, 0x08, 0x01, 0x44]).is_err());
        assert!(skip_all(&[0x4b, 0x08, 0x01]).is_err());
        assert!(skip_all(&[0x4c]).is_err());
        // Field number 0 inside a group is not looked at (as in upb); outside it is invalid.
        assert!(skip_all(&[0x4b, 0x00, 0x00, 0x4c]).is_ok());
        assert!(skip_all(&[0x00, 0x00]).is_err());
        // Wire types 6 and 7, inside a group or not.
        assert!(skip_all(&[0x4e]).is_err());
        assert!(skip_all(&[0x4b, 0x0f, 0x4c]).is_err());
    }

    #[test]
    fn groups_nest_at_most_100_deep() {
        let nested = |n: usize| -> Vec<u8> {
            let mut b = vec![0x4b; n];
            b.extend(vec![0x4c; n]);
            b
        };
        assert!(skip_all(&nested(100)).is_ok());
        assert!(skip_all(&nested(101)).is_err());
    }
}
