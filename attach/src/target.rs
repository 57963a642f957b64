//! The process to attach to: what `/proc` says about it, checked before anything is sent to
//! it, and descriptors that keep pointing at it (its pidfd, its root and working directories)
//! whatever happens to its pid afterwards.
//!
//! The checks, in order, each with its own message: the pid exists and is not a zombie; we
//! may attach (root, or the JVM's own user and group: HotSpot checks both); it is a HotSpot
//! JVM (`libjvm.so` is mapped: never signal a process that is not, SIGQUIT's default action
//! kills it).

use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::creds::Ids;
use super::error::AttachError;
use super::procfs::{self, Status};
use super::{perfdata, sys};
use otelprof_primitives::escape;

/// Most bytes read of one `/proc` file (a JVM's maps run to a few hundred KiB).
const PROC_FILE_LIMIT: u64 = 64 << 20;

pub struct Target {
    pub pid: u32,
    pub status: Status,
    /// Where the JVM's `libjvm.so` is, and its performance-data file (its own paths).
    pub maps: procfs::Maps,
    /// Whether the target sees the same files at the same paths as we do (same mount
    /// namespace and same root directory): then paths can be passed as they are.
    pub same_view: bool,
    pidfd: OwnedFd,
    root: OwnedFd,
    cwd: Option<OwnedFd>,
}

fn read_proc(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?
        .take(PROC_FILE_LIMIT)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl Target {
    /// Looks at process `pid` on behalf of a user with effective ids `me`.
    pub fn inspect(pid: u32, me: Ids) -> Result<Target, AttachError> {
        let gone = || AttachError::Unattachable(format!("no process with pid {pid}"));
        let raw_pid = i32::try_from(pid).map_err(|_| gone())?;
        let pidfd = match sys::pidfd_open(raw_pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(gone()),
            // EINVAL: a thread id, not a process.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                return Err(AttachError::Unattachable(format!(
                    "{pid} is not the pid of a process (a thread id?)"
                )))
            }
            Err(e) => return Err(AttachError::io(format!("cannot open process {pid}"))(e)),
        };
        let proc_dir = Path::new("/proc").join(pid.to_string());
        let status_text = read_proc(&proc_dir.join("status")).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => gone(),
            _ => AttachError::io(format!("cannot read /proc/{pid}/status"))(e),
        })?;
        let status = procfs::parse_status(&String::from_utf8_lossy(&status_text), pid)
            .map_err(|e| AttachError::Peer(format!("/proc/{pid}/status: {e}")))?;
        let name = escape::quote(&status.name);
        if matches!(status.state, 'Z' | 'X') {
            return Err(AttachError::Unattachable(format!(
                "process {pid} ({name}) has exited"
            )));
        }
        if me.uid != 0 && (status.euid != me.uid || status.egid != me.gid) {
            return Err(AttachError::Unattachable(format!(
                "process {pid} ({name}) runs as uid {} gid {}, and you are uid {} gid {}: \
                 HotSpot answers only its own user and group, or root (run otelprof as that \
                 user, or as root)",
                status.euid, status.egid, me.uid, me.gid
            )));
        }
        let maps_text = read_proc(&proc_dir.join("maps")).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => gone(),
            _ => AttachError::io(format!("cannot read /proc/{pid}/maps"))(e),
        })?;
        let maps = procfs::scan_maps(&String::from_utf8_lossy(&maps_text));
        if maps.libjvm.is_none() {
            return Err(AttachError::Unattachable(format!(
                "process {pid} ({name}) is not a HotSpot JVM (no libjvm.so in its memory maps)"
            )));
        }
        let open_dir = |what: &str| {
            File::open(proc_dir.join(what))
                .map(OwnedFd::from)
                .map_err(AttachError::io(format!("cannot open /proc/{pid}/{what}")))
        };
        let root = open_dir("root")?;
        // The working directory may be gone (deleted) or unreadable: /tmp is the fallback.
        let cwd = open_dir("cwd").ok();
        let same_view = same_file(Path::new("/proc/self/ns/mnt"), &proc_dir.join("ns/mnt"))
            && same_file(Path::new("/"), &proc_dir.join("root"));
        // The pid was ours throughout if the process it named is still alive now: only then
        // do the /proc files read above describe it.
        sys::pidfd_send_signal(pidfd.as_fd(), 0).map_err(|_| gone())?;
        Ok(Target {
            pid,
            status,
            maps,
            same_view,
            pidfd,
            root,
            cwd,
        })
    }

    /// The process's name for messages: `1234 ("java")`, escaped.
    pub fn describe(&self) -> String {
        format!(
            "process {} ({})",
            self.pid,
            escape::quote(&self.status.name)
        )
    }

    /// The JVM's user and group (effective ids, seen from our namespace).
    pub fn ids(&self) -> Ids {
        Ids {
            uid: self.status.euid,
            gid: self.status.egid,
        }
    }

    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    pub fn cwd(&self) -> Option<BorrowedFd<'_>> {
        self.cwd.as_ref().map(|fd| fd.as_fd())
    }

    /// Whether the process is still the one inspected and alive.
    pub fn alive(&self) -> bool {
        sys::pidfd_send_signal(self.pidfd.as_fd(), 0).is_ok()
    }

    /// Sends SIGQUIT, which makes HotSpot look for the attach trigger. Call only after
    /// [`Status::catches_sigquit`].
    pub fn send_quit(&self) -> io::Result<()> {
        sys::pidfd_send_signal(self.pidfd.as_fd(), libc::SIGQUIT)
    }

    /// Whether the JVM runs with `-XX:+DisableAttachMechanism`: from its performance-data
    /// file when it has one (exact), else from its arguments (see
    /// [`procfs::disable_attach_flag`]). `None`: cannot tell.
    pub fn attach_disabled(&self) -> Option<bool> {
        if let Some(path) = &self.maps.perfdata {
            let read =
                sys::open_in_root(self.root(), Path::new(path), libc::O_RDONLY, 0).and_then(|fd| {
                    let mut bytes = Vec::new();
                    File::from(fd).take(1 << 20).read_to_end(&mut bytes)?;
                    Ok(bytes)
                });
            if let Ok(Some(supported)) = read
                .ok()
                .map(|bytes| perfdata::attach_supported(&bytes))
                .transpose()
                .map(Option::flatten)
            {
                return Some(!supported);
            }
        }
        let proc_dir = Path::new("/proc").join(self.pid.to_string());
        let cmdline = read_proc(&proc_dir.join("cmdline")).ok()?;
        let environ = read_proc(&proc_dir.join("environ")).unwrap_or_default();
        procfs::disable_attach_flag(&cmdline, &environ)
    }
}

/// Whether two paths name the same file (device and inode), following links.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
