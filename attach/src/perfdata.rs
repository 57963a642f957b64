//! HotSpot's performance-data file (`/tmp/hsperfdata_<user>/<pid>`, what `jps` and `jstat`
//! read), for one counter: `sun.rt.jvmCapabilities`, whose first character is `1` when the
//! JVM's attach mechanism is available and `0` when it runs with
//! `-XX:+DisableAttachMechanism`. Reading it tells a disabled JVM apart before any signal is
//! sent (a SIGQUIT to such a JVM prints a thread dump on its standard output instead).
//!
//! Layout (HotSpot's `perfMemory.hpp`): a 32-byte prologue — magic `CA FE C0 C0`, byte order
//! (0 big endian, 1 little), major and minor version, an `accessible` flag, `used` and
//! `overflow` (4 bytes each), a modification time stamp (8), the offset of the first entry
//! and the number of entries (4 each) — then entries of: entry length, name offset, vector
//! length (4 bytes each), data type, flags, units, variability (1 byte each), data offset (4);
//! the name is NUL-terminated at `entry + name offset`, the data at `entry + data offset`,
//! a string being a byte vector of `vector length` bytes, NUL-padded. The file is the
//! JVM's to write and the user's to tamper with: every offset is bounds-checked.

const MAGIC: [u8; 4] = [0xca, 0xfe, 0xc0, 0xc0];
const PROLOGUE_LEN: usize = 32;
const ENTRY_HEADER_LEN: usize = 20;
const CAPABILITIES: &[u8] = b"sun.rt.jvmCapabilities";
/// Entries a well-formed file holds (a JDK 25 JVM has a few hundred).
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PerfDataError {
    #[error("not a HotSpot performance-data file")]
    NotPerfData,
    #[error("the performance-data file is malformed ({0})")]
    Malformed(&'static str),
}

fn read_u32(data: &[u8], at: usize, little: bool) -> Option<u32> {
    let bytes: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if little {
        u32::from_le_bytes(bytes)
    } else {
        u32::from_be_bytes(bytes)
    })
}

fn offset(data: &[u8], at: usize, little: bool) -> Result<usize, PerfDataError> {
    read_u32(data, at, little)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or(PerfDataError::Malformed("truncated"))
}

/// Whether the JVM that wrote `data` supports attach: `Ok(None)` when the counter is absent
/// (or the JVM had not finished creating it).
pub fn attach_supported(data: &[u8]) -> Result<Option<bool>, PerfDataError> {
    if data.len() < PROLOGUE_LEN || data[..4] != MAGIC {
        return Err(PerfDataError::NotPerfData);
    }
    let little = match data[4] {
        0 => false,
        1 => true,
        _ => return Err(PerfDataError::Malformed("byte order")),
    };
    let used = offset(data, 8, little)?.min(data.len());
    let mut entry = offset(data, 24, little)?;
    let count = offset(data, 28, little)?;
    if count > MAX_ENTRIES {
        return Err(PerfDataError::Malformed("entry count"));
    }
    for _ in 0..count {
        if entry
            .checked_add(ENTRY_HEADER_LEN)
            .is_none_or(|end| end > used)
        {
            return Err(PerfDataError::Malformed("entry out of bounds"));
        }
        let len = offset(data, entry, little)?;
        let name_at = entry.saturating_add(offset(data, entry + 4, little)?);
        let vector_len = offset(data, entry + 8, little)?;
        let data_type = data[entry + 12];
        let data_at = entry.saturating_add(offset(data, entry + 16, little)?);
        if len < ENTRY_HEADER_LEN {
            return Err(PerfDataError::Malformed("entry length"));
        }
        let name = data
            .get(name_at..used)
            .and_then(|rest| rest.split(|&b| b == 0).next())
            .ok_or(PerfDataError::Malformed("name out of bounds"))?;
        if name == CAPABILITIES {
            if data_type != b'B' {
                return Err(PerfDataError::Malformed("capabilities type"));
            }
            let value = data
                .get(data_at..data_at.saturating_add(vector_len).min(used))
                .ok_or(PerfDataError::Malformed("value out of bounds"))?;
            return match value.first() {
                Some(b'1') => Ok(Some(true)),
                Some(b'0') => Ok(Some(false)),
                _ => Err(PerfDataError::Malformed("capabilities value")),
            };
        }
        entry = entry.saturating_add(len);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file the way HotSpot writes it: the prologue, a long counter, then the capabilities.
    fn file(capabilities: &[u8], little: bool) -> Vec<u8> {
        let u32b = |v: u32| {
            if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        let mut entries = Vec::new();
        for (name, ty, value) in [
            (
                &b"sun.rt.createVmBeginTime"[..],
                b'J',
                &7u64.to_le_bytes()[..],
            ),
            (CAPABILITIES, b'B', capabilities),
        ] {
            let name_off = ENTRY_HEADER_LEN as u32;
            let data_off = (ENTRY_HEADER_LEN + name.len() + 1).next_multiple_of(8) as u32;
            let len = (data_off as usize + value.len()).next_multiple_of(8) as u32;
            let vector = if ty == b'B' { value.len() as u32 } else { 0 };
            let start = entries.len();
            entries.extend_from_slice(&u32b(len));
            entries.extend_from_slice(&u32b(name_off));
            entries.extend_from_slice(&u32b(vector));
            entries.extend_from_slice(&[ty, 0, 1, 1]);
            entries.extend_from_slice(&u32b(data_off));
            entries.extend_from_slice(name);
            entries.push(0);
            entries.resize(start + data_off as usize, 0);
            entries.extend_from_slice(value);
            entries.resize(start + len as usize, 0);
        }
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[u8::from(little), 2, 0, 1]);
        out.extend_from_slice(&u32b((PROLOGUE_LEN + entries.len()) as u32));
        out.extend_from_slice(&u32b(0));
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&u32b(PROLOGUE_LEN as u32));
        out.extend_from_slice(&u32b(2));
        out.extend_from_slice(&entries);
        out.resize(out.len() + 64, 0); // unused space after `used`
        out
    }

    #[test]
    fn reads_the_attach_capability_in_either_byte_order() {
        let caps = |first: u8| {
            let mut v = vec![b'0'; 64];
            v[0] = first;
            v[63] = 0;
            v
        };
        for little in [true, false] {
            assert_eq!(attach_supported(&file(&caps(b'1'), little)), Ok(Some(true)));
            assert_eq!(
                attach_supported(&file(&caps(b'0'), little)),
                Ok(Some(false))
            );
        }
    }

    #[test]
    fn a_file_without_the_counter_says_nothing() {
        let mut f = file(b"1", true);
        f[28..32].copy_from_slice(&1u32.to_le_bytes()); // only the first entry
        assert_eq!(attach_supported(&f), Ok(None));
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        assert_eq!(attach_supported(b""), Err(PerfDataError::NotPerfData));
        assert_eq!(
            attach_supported(&[0xca, 0xfe, 0xc0, 0xc0, 1]),
            Err(PerfDataError::NotPerfData)
        );
        let good = file(b"1000", true);
        // Every truncation, and every byte of the headers set to 0xff, must return.
        for cut in 0..good.len() {
            let _ = attach_supported(&good[..cut]);
        }
        for i in 0..PROLOGUE_LEN + 2 * ENTRY_HEADER_LEN + 64 {
            let mut bad = good.clone();
            if i < bad.len() {
                bad[i] = 0xff;
            }
            let _ = attach_supported(&bad);
        }
        let mut huge = good.clone();
        huge[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(attach_supported(&huge).is_err());
    }
}
