//! The system calls of `otelprof attach` that `std` does not wrap, as safe functions. Every
//! `unsafe` block of the attach module is in this file.
//!
//! Paths inside the target JVM are never walked as plain strings: its `/tmp` could be a
//! symbolic link to `/etc`, and a walk to its temporary directory through the target's
//! `root` link in proc(5) would resolve that absolute link against *our* root. So the
//! target's root is opened once as a directory ([`open_in_root`] then resolves every path
//! with `RESOLVE_IN_ROOT`, the way the JVM itself sees it), and files inside a directory are
//! opened one name at a time with `O_NOFOLLOW` ([`open_at`]).

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use libc::{c_int, c_long};

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
}

/// A name for `*at` calls: one path component, never `.`, `..` or empty.
fn component(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a single file name",
        ));
    }
    c_string(bytes)
}

fn fd_result(rc: c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = c_int::try_from(rc).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn unit_result(rc: c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A descriptor that refers to process `pid` itself (not to whichever process gets the
/// number next): signals sent through it can never reach a process that reused the pid.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new descriptor or -1.
    fd_result(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })
}

/// Sends `signal` (0: only checks that the process is alive) to the process of `pidfd`.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, signal: c_int) -> io::Result<()> {
    // SAFETY: a valid descriptor, a signal number, a null siginfo (the kernel fills in
    // SI_USER) and no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens `path` (absolute or relative, as the target sees it) inside the directory tree of
/// `root` as if `root` were `/`: `..` and absolute symbolic links stay inside it, and
/// `/proc` magic links are refused. Kernels before 5.6 lack `openat2`: there the path is
/// walked one name at a time and any symbolic link is refused.
pub fn open_in_root(
    root: BorrowedFd<'_>,
    path: &Path,
    flags: c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let relative = path
        .as_os_str()
        .as_bytes()
        .iter()
        .position(|&b| b != b'/')
        .map_or(&b"."[..], |i| &path.as_os_str().as_bytes()[i..]);
    let c_path = c_string(relative)?;
    // SAFETY: open_how is a plain C struct (three u64) for which all-zero bytes is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::try_from(flags | libc::O_CLOEXEC).unwrap_or(0);
    how.mode = u64::from(mode);
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a valid directory descriptor, a NUL-terminated path, and a pointer to an
    // open_how whose size we pass; the kernel only reads them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            c_path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    match fd_result(rc) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            walk_without_links(root, relative, flags, mode)
        }
        other => other,
    }
}

fn walk_without_links(
    root: BorrowedFd<'_>,
    relative: &[u8],
    flags: c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let names: Vec<&[u8]> = relative
        .split(|&b| b == b'/')
        .filter(|n| !n.is_empty() && *n != b".")
        .collect();
    let Some((last, dirs)) = names.split_last() else {
        return open_at(root, OsStr::new("."), flags, mode);
    };
    let mut dir: Option<OwnedFd> = None;
    for name in dirs {
        let parent = dir.as_ref().map_or(root, |d| d.as_fd());
        dir = Some(open_at(
            parent,
            OsStr::from_bytes(name),
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )?);
    }
    let parent = dir.as_ref().map_or(root, |d| d.as_fd());
    open_at(parent, OsStr::from_bytes(last), flags, mode)
}

/// Opens `name`, one file name inside `dir`, never following a symbolic link in its place
/// (`O_NOFOLLOW`; with `O_PATH` the link itself is opened, for a look at what it is).
pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let c_name = if name == OsStr::new(".") {
        c_string(b".")?
    } else {
        component(name)?
    };
    // SAFETY: a valid directory descriptor and a NUL-terminated name; mode is read only
    // with O_CREAT.
    let rc = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c_name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    };
    fd_result(c_long::from(rc))
}

/// Creates directory `name` inside `dir`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: libc::mode_t) -> io::Result<()> {
    let c_name = component(name)?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name.
    unit_result(unsafe { libc::mkdirat(dir.as_raw_fd(), c_name.as_ptr(), mode) })
}

/// Removes file `name` (not a directory) from `dir`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let c_name = component(name)?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name.
    unit_result(unsafe { libc::unlinkat(dir.as_raw_fd(), c_name.as_ptr(), 0) })
}

/// Renames `from` to `to` inside `dir`, failing with `EEXIST` when `to` exists.
pub fn rename_noreplace_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (c_from, c_to) = (component(from)?, component(to)?);
    // SAFETY: one valid directory descriptor for both names, two NUL-terminated names.
    unit_result(unsafe {
        libc::renameat2(
            dir.as_raw_fd(),
            c_from.as_ptr(),
            dir.as_raw_fd(),
            c_to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    })
}

/// Connects to the Unix socket at `path`, waiting at most `timeout` when its backlog is
/// full (a stream socket's connect waits for room, bounded by `SO_SNDTIMEO`).
pub fn connect_unix(path: &Path, timeout: Duration) -> io::Result<UnixStream> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is a plain C struct for which all-zero bytes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    // SAFETY: socket takes three integers and returns a new descriptor or -1.
    let fd = fd_result(c_long::from(unsafe {
        libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
    }))?;
    let tv = libc::timeval {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_usec: libc::suseconds_t::from(timeout.subsec_micros()).max(1),
    };
    // SAFETY: a valid socket, and a pointer to a timeval with its size.
    unit_result(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: a valid socket and a sockaddr_un holding a NUL-terminated path of `len` bytes.
    unit_result(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    })?;
    Ok(UnixStream::from(fd))
}

/// Who is at the other end of a connected Unix socket, as the kernel saw it when that end
/// called `listen` or `connect` (ids as seen from our namespaces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

pub fn peer_cred(stream: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket, and a ucred buffer with its size, which the kernel fills.
    unit_result(unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// Eight random bytes from the kernel, for file names nobody can guess.
pub fn random_u64() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if usize::try_from(n).ok() != Some(bytes.len()) {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(bytes))
}

/// This process's effective user and group ids.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// This process's supplementary groups.
pub fn groups() -> io::Result<Vec<libc::gid_t>> {
    // SAFETY: with a size of 0, getgroups only returns the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let mut groups = vec![0; usize::try_from(n).map_err(|_| io::Error::last_os_error())?];
    // SAFETY: the buffer holds `n` gids, as passed.
    let got = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(got).map_err(|_| io::Error::last_os_error())?);
    Ok(groups)
}

/// Sets the effective user id (real and saved ids unchanged). glibc applies it to every
/// thread of the process.
pub fn set_effective_uid(uid: u32) -> io::Result<()> {
    // SAFETY: setresuid takes three ids; u32::MAX (-1) leaves an id unchanged.
    unit_result(unsafe { libc::setresuid(u32::MAX, uid, u32::MAX) })
}

/// Sets the effective group id (real and saved ids unchanged), on every thread.
pub fn set_effective_gid(gid: u32) -> io::Result<()> {
    // SAFETY: setresgid takes three ids; u32::MAX (-1) leaves an id unchanged.
    unit_result(unsafe { libc::setresgid(u32::MAX, gid, u32::MAX) })
}

/// Replaces the supplementary groups (needs CAP_SETGID), on every thread.
pub fn set_groups(groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: the pointer and length describe `groups`, which the kernel only reads.
    unit_result(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) })
}
