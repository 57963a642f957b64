//! A protobuf wire-format cursor (<https://protobuf.dev/programming-guides/encoding/>): the
//! fast decoder's only view of its input. Every read is bounds-checked and returns an error,
//! never panics, on truncated or malformed input.

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
pub(super) const FIXED32: u8 = 5;

impl<'a> Wire<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Wire<'a> {
        Wire { buf, pos: 0 }
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
        self.varint_long()
    }

    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
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
        Err(DecodeError::Wire("varint too long"))
    }

    /// The next field's number and wire type, `None` at the end.
    #[inline(always)]
    pub(super) fn key(&mut self) -> Result<Option<(u32, u8)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let k = self.varint()?;
        let field = u32::try_from(k >> 3).map_err(|_| DecodeError::Wire("field number"))?;
        Ok(Some((field, (k & 7) as u8)))
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

    #[inline]
    pub(super) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = usize::try_from(self.varint()?).map_err(|_| DecodeError::Wire("length"))?;
        self.take(n)
    }

    #[inline]
    pub(super) fn fixed64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub(super) fn skip(&mut self, wire: u8) -> Result<()> {
        match wire {
            VARINT => self.varint().map(|_| ()),
            FIXED64 => self.take(8).map(|_| ()),
            LEN => self.bytes().map(|_| ()),
            FIXED32 => self.take(4).map(|_| ()),
            _ => Err(DecodeError::Wire("unsupported wire type")),
        }
    }

    /// An `int32` field: varints are sign-extended 64-bit on the wire.
    #[inline]
    pub(super) fn int32(&mut self) -> Result<i32> {
        Ok(self.varint()? as i64 as i32)
    }

    /// Appends a repeated int32 field (packed or not) to `out`.
    #[inline]
    pub(super) fn repeated_i32(&mut self, wire: u8, out: &mut Vec<i32>) -> Result<()> {
        if wire == LEN {
            let mut inner = Wire::new(self.bytes()?);
            while inner.pos < inner.buf.len() {
                out.push(inner.int32()?);
            }
            Ok(())
        } else if wire == VARINT {
            out.push(self.int32()?);
            Ok(())
        } else {
            Err(DecodeError::Wire("bad repeated int32"))
        }
    }
}
