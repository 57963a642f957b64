//! `/proc/PID/maps`: what is mapped where in a process (proc(5)).
#![forbid(unsafe_code)]

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// `rwxp`-style permissions.
    pub perms: [u8; 4],
    /// Offset in the file of `start`.
    pub offset: u64,
    /// Device (`major:minor`) and inode of the file; 0 for anonymous memory.
    pub dev: u64,
    pub inode: u64,
    /// The file, a pseudo-name such as `[vdso]` or `[stack]`, or empty. A file deleted since
    /// it was mapped ends in ` (deleted)`.
    pub path: String,
}

impl Mapping {
    pub fn executable(&self) -> bool {
        self.perms[2] == b'x'
    }

    pub fn readable(&self) -> bool {
        self.perms[0] == b'r'
    }

    pub fn writable(&self) -> bool {
        self.perms[1] == b'w'
    }

    /// Whether `address` lies in this mapping.
    pub fn contains(&self, address: u64) -> bool {
        (self.start..self.end).contains(&address)
    }

    /// Backed by a file (not anonymous memory or a pseudo-mapping).
    pub fn is_file(&self) -> bool {
        self.inode != 0 && self.path.starts_with('/')
    }

    /// The file name without its directories, as frames name an unknown address
    /// (`libfoo.so+0x1234`).
    pub fn file_name(&self) -> &str {
        let path = self.path.strip_suffix(" (deleted)").unwrap_or(&self.path);
        path.rsplit('/').next().unwrap_or(path)
    }
}

/// Parses one line; `None` for a line that is not a mapping.
pub fn parse_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (range, perms, offset, dev, inode) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let path = fields.next().unwrap_or("").trim_start().to_owned();
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let perms: [u8; 4] = perms.as_bytes().try_into().ok()?;
    Some(Mapping {
        start: hex(start)?,
        end: hex(end)?,
        perms,
        offset: hex(offset)?,
        dev: hex(major)? << 32 | hex(minor)?,
        inode: inode.parse().ok()?,
        path,
    })
}

/// Parses the whole text; lines that are not mappings are skipped.
pub fn parse(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

/// This process's mappings.
pub fn read_self() -> std::io::Result<Vec<Mapping>> {
    Ok(parse(&std::fs::read_to_string("/proc/self/maps")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_and_without_paths() {
        let text = "\
7f0c2c000000-7f0c2c021000 rw-p 00000000 00:00 0 \n\
7f0c30a28000-7f0c30bb0000 r-xp 00028000 fe:01 1183940                    /usr/lib/x86_64-linux-gnu/libc.so.6\n\
7ffd5a5f0000-7ffd5a5f2000 r-xp 00000000 00:00 0                          [vdso]\n\
7f0c30000000-7f0c30001000 r-xp 00001000 08:02 77 /tmp/lib with space.so (deleted)\n\
garbage\n";
        let maps = parse(text);
        assert_eq!(maps.len(), 4);
        let libc = &maps[1];
        assert_eq!((libc.start, libc.end), (0x7f0c30a28000, 0x7f0c30bb0000));
        assert_eq!(libc.offset, 0x28000);
        assert!(libc.executable() && libc.readable() && libc.is_file());
        assert_eq!(libc.file_name(), "libc.so.6");
        assert_eq!(libc.dev, 0xfe << 32 | 1);
        assert!(!maps[0].executable() && !maps[0].is_file());
        assert!(maps[0].writable() && !libc.writable());
        assert!(libc.contains(0x7f0c30a28000) && libc.contains(0x7f0c30baffff));
        assert!(!libc.contains(0x7f0c30bb0000) && !libc.contains(0x7f0c30a27fff));
        assert_eq!(maps[2].path, "[vdso]");
        assert!(!maps[2].is_file());
        assert_eq!(maps[3].file_name(), "lib with space.so");
    }

    #[test]
    fn this_process_has_its_libc_and_stack() {
        let maps = read_self().unwrap();
        assert!(maps.iter().any(|m| m.path == "[stack]"));
        assert!(maps
            .iter()
            .any(|m| m.executable() && m.file_name().starts_with("libc")));
    }
}
