//! Publishes the OpenTelemetry process context (OTEP 4719) for out-of-process readers
//! (docs/context-protocol.md, Process context).
//!
//! A small mapping named `OTEL_CTX` (a memfd, or an anonymous mapping named with
//! `PR_SET_VMA_ANON_NAME` when memfd is not allowed) holds a 32-byte header followed by the
//! payload ([`otel_bridge::process_context::payload`]). The signature is written last,
//! after a fence, so a reader never sees a half-written header; the mapping is excluded from
//! `fork` children, who would otherwise expose the parent's identity.
//!
//! The mapping is never unmapped: readers may look at it until the process ends.

use std::io;
use std::sync::atomic::{fence, Ordering};
use std::sync::Mutex;

const SIGNATURE: &[u8; 8] = b"OTEL_CTX";
const VERSION: u32 = 2;
const HEADER_BYTES: usize = 32;

/// `PR_SET_VMA` / `PR_SET_VMA_ANON_NAME` (Linux 5.17+, `CONFIG_ANON_VMA_NAME`); failures are
/// expected on older kernels and ignored, as the OTEP says.
const PR_SET_VMA: libc::c_int = 0x53564d41;
const PR_SET_VMA_ANON_NAME: libc::c_ulong = 0;

/// The 32-byte header at the start of the mapping (OTEP 4719 "Header Structure").
#[repr(C)]
struct Header {
    signature: [u8; 8],
    version: u32,
    payload_size: u32,
    published_at_ns: u64,
    payload: *const u8,
}
const _: () = assert!(std::mem::size_of::<Header>() == HEADER_BYTES);

/// Where the context was published: (mapping address, its length).
static PUBLISHED: Mutex<Option<(usize, usize)>> = Mutex::new(None);
/// The payload published last.
static LAST_PAYLOAD: Mutex<Vec<u8>> = Mutex::new(Vec::new());

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        .max(1)
}

/// Maps `len` bytes for the context: a memfd named `OTEL_CTX` if allowed, else anonymous.
fn map(len: usize) -> io::Result<*mut u8> {
    // SAFETY: memfd_create with a NUL-terminated name; the fd is closed after mapping.
    let fd = unsafe { libc::memfd_create(c"OTEL_CTX".as_ptr(), libc::MFD_CLOEXEC) };
    // SAFETY: mapping a fresh memfd of the right size, or anonymous memory; both are plain
    // mmap calls whose results are checked.
    unsafe {
        let p = if fd >= 0 {
            let p = if libc::ftruncate(fd, len as libc::off_t) == 0 {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            } else {
                libc::MAP_FAILED
            };
            libc::close(fd);
            p
        } else {
            libc::MAP_FAILED
        };
        let p = if p == libc::MAP_FAILED {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } else {
            p
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        libc::madvise(p, len, libc::MADV_DONTFORK);
        Ok(p as *mut u8)
    }
}

fn name_mapping(addr: usize, len: usize) {
    // SAFETY: names our own mapping; an unsupported kernel returns EINVAL, which is fine.
    unsafe {
        libc::prctl(
            PR_SET_VMA,
            PR_SET_VMA_ANON_NAME,
            addr as libc::c_ulong,
            len as libc::c_ulong,
            c"OTEL_CTX".as_ptr() as libc::c_ulong,
        );
    }
}

/// Publishes (or, if already published, updates) the process context with `payload`.
pub(crate) fn publish(payload: &[u8]) -> io::Result<()> {
    let mut published = PUBLISHED.lock().unwrap_or_else(|p| p.into_inner());
    // A session started again with the same resource publishes nothing new (an update leaks
    // its payload on purpose: see below).
    let mut last = LAST_PAYLOAD.lock().unwrap_or_else(|p| p.into_inner());
    if published.is_some() && last.as_slice() == payload {
        return Ok(());
    }
    last.clear();
    last.extend_from_slice(payload);
    let page = 4096;
    let len = (HEADER_BYTES + payload.len()).div_ceil(page) * page;
    let size = u32::try_from(payload.len())
        .map_err(|_| io::Error::other("process context payload too large"))?;
    match *published {
        None => {
            let base = map(len)?;
            // SAFETY: `base` is a fresh, writable, page-aligned mapping of `len` bytes, large
            // enough for the header and the payload after it.
            unsafe {
                let payload_at = base.add(HEADER_BYTES);
                std::ptr::copy_nonoverlapping(payload.as_ptr(), payload_at, payload.len());
                let header = base as *mut Header;
                std::ptr::addr_of_mut!((*header).version).write_volatile(VERSION);
                std::ptr::addr_of_mut!((*header).payload_size).write_volatile(size);
                std::ptr::addr_of_mut!((*header).published_at_ns).write_volatile(now_unix_ns());
                std::ptr::addr_of_mut!((*header).payload).write_volatile(payload_at);
                fence(Ordering::SeqCst);
                std::ptr::addr_of_mut!((*header).signature).write_volatile(*SIGNATURE);
            }
            name_mapping(base as usize, len);
            *published = Some((base as usize, len));
            Ok(())
        }
        Some((base, mapped)) => {
            // Updating protocol: zero the timestamp, swap the payload, new timestamp. The new
            // payload goes to fresh memory that is never freed (updates are rare; a reader may
            // still be reading the old bytes, so they are never rewritten in place).
            let fresh: &'static [u8] = Box::leak(payload.to_vec().into_boxed_slice());
            // SAFETY: `base` is our published header.
            unsafe {
                let header = base as *mut Header;
                std::ptr::addr_of_mut!((*header).published_at_ns).write_volatile(0);
                fence(Ordering::SeqCst);
                std::ptr::addr_of_mut!((*header).payload).write_volatile(fresh.as_ptr());
                std::ptr::addr_of_mut!((*header).payload_size).write_volatile(size);
                fence(Ordering::SeqCst);
                std::ptr::addr_of_mut!((*header).published_at_ns).write_volatile(now_unix_ns());
            }
            name_mapping(base, mapped);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};

    /// Reads the context the way an external reader does: find the mapping in
    /// /proc/self/maps, read header and payload through /proc/self/mem.
    fn read_as_external_reader() -> Option<(u32, Vec<u8>)> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps.lines().find(|l| {
            l.contains("/memfd:OTEL_CTX")
                || l.contains("[anon_shmem:OTEL_CTX]")
                || l.contains("[anon:OTEL_CTX]")
        })?;
        let start = usize::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
        let mut mem = std::fs::File::open("/proc/self/mem").unwrap();
        let mut header = [0u8; HEADER_BYTES];
        mem.seek(SeekFrom::Start(start as u64)).unwrap();
        mem.read_exact(&mut header).unwrap();
        assert_eq!(&header[..8], SIGNATURE);
        let version = u32::from_ne_bytes(header[8..12].try_into().unwrap());
        let size = u32::from_ne_bytes(header[12..16].try_into().unwrap()) as usize;
        let published = u64::from_ne_bytes(header[16..24].try_into().unwrap());
        assert_ne!(published, 0);
        let payload_at = u64::from_ne_bytes(header[24..32].try_into().unwrap());
        let mut payload = vec![0u8; size];
        mem.seek(SeekFrom::Start(payload_at)).unwrap();
        mem.read_exact(&mut payload).unwrap();
        Some((version, payload))
    }

    #[test]
    fn published_context_is_readable_from_outside_and_updatable() {
        publish(b"first payload").unwrap();
        let (version, payload) =
            read_as_external_reader().expect("no OTEL_CTX mapping in /proc/self/maps");
        assert_eq!(version, 2);
        assert_eq!(payload, b"first payload");
        publish(b"second, longer payload").unwrap();
        let (_, payload) = read_as_external_reader().unwrap();
        assert_eq!(payload, b"second, longer payload");
    }
}
