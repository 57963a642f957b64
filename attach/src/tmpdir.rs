//! The target's `/tmp`, where HotSpot puts its attach socket and where otelprof puts what the
//! JVM must open: the reply files, the dump files, and copies of the agent library and jar
//! when the JVM cannot open ours.
//!
//! `/tmp` is shared with every user of the target's system, so every file is opened by one
//! name with `O_NOFOLLOW`, created with `O_EXCL`, and checked (kind, owner, mode) before it is
//! trusted; a name we did not make is never removed or moved. We act as the JVM's user
//! ([`super::creds`]) while doing so, so what we create is that user's.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use super::error::AttachError;
use super::sys;
use super::target::Target;
use otelprof_primitives::escape;

/// How much a file found must be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// What the JVM will run, or what we connect to: the JVM user's and writable by nobody
    /// else (another user could swap what it holds).
    Strict,
    /// Bytes we only copy out (a profile): the JVM user's, whatever its umask made the mode.
    Data,
}

pub struct TmpDir {
    fd: OwnedFd,
    /// The directory's path as the JVM sees it, for messages.
    path: PathBuf,
    /// The owner files must have to be trusted: the JVM's user.
    owner: u32,
}

/// `/tmp` as the target sees it.
pub const TMP: &str = "/tmp";

fn kind(meta: &Metadata) -> &'static str {
    match meta.mode() & libc::S_IFMT {
        libc::S_IFREG => "a file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFSOCK => "a socket",
        libc::S_IFIFO => "a FIFO",
        _ => "a device",
    }
}

impl TmpDir {
    pub fn open(target: &Target) -> Result<TmpDir, AttachError> {
        let fd = sys::open_in_root(
            target.root(),
            Path::new(TMP),
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )
        .map_err(AttachError::io(format!(
            "cannot open /tmp of {}",
            target.describe()
        )))?;
        Ok(TmpDir {
            fd,
            path: PathBuf::from(TMP),
            owner: target.status.euid,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// This directory as a path we can use (`/proc/self/fd/N`), for the calls that take
    /// only paths (`connect`).
    pub fn proc_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd as _;
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// What `name` is, without following a link; `None` when absent.
    pub fn look(&self, name: &OsStr) -> io::Result<Option<Metadata>> {
        match sys::open_at(self.fd(), name, libc::O_PATH, 0) {
            Ok(fd) => File::from(fd).metadata().map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Checks that `meta` (of `/tmp/<name>`) is the JVM user's and of kind `mode`
    /// (`S_IFREG`, …), and with [`Trust::Strict`] writable by nobody else.
    pub fn check_ours(
        &self,
        name: &OsStr,
        meta: &Metadata,
        mode: u32,
        trust: Trust,
    ) -> Result<(), String> {
        let shown = escape::path(&self.path.join(name)).into_owned();
        if meta.mode() & libc::S_IFMT != mode {
            return Err(format!("{shown} is {}", kind(meta)));
        }
        if meta.uid() != self.owner {
            return Err(format!(
                "{shown} belongs to uid {}, not to the JVM's user (uid {})",
                meta.uid(),
                self.owner
            ));
        }
        if trust == Trust::Strict && meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{shown} is writable by others (mode {:o})",
                meta.mode() & 0o7777
            ));
        }
        Ok(())
    }

    /// Creates `/tmp/<prefix><random>` empty, mode 0600, and returns its name and an open
    /// descriptor (read and write).
    pub fn create_private(&self, prefix: &str, suffix: &str) -> io::Result<(OsString, File)> {
        loop {
            let name = OsString::from(format!("{prefix}{:016x}{suffix}", sys::random_u64()?));
            match sys::open_at(
                self.fd(),
                &name,
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
                0o600,
            ) {
                Ok(fd) => {
                    let file = File::from(fd);
                    // Whatever the umask: exactly 0600.
                    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
                    return Ok((name, file));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Opens `/tmp/<name>` with `flags` if it is of kind `mode` (`S_IFREG`, `S_IFDIR`), the
    /// JVM user's and writable by nobody else: looked at first without opening it (a FIFO or
    /// a device is never opened), then opened without following a link and checked to be
    /// the file looked at.
    fn open_checked(
        &self,
        name: &OsStr,
        mode: u32,
        trust: Trust,
        flags: libc::c_int,
    ) -> Result<File, String> {
        let shown = escape::path(&self.path.join(name)).into_owned();
        let looked = self
            .look(name)
            .map_err(|e| format!("cannot look at {shown}: {e}"))?
            .ok_or_else(|| format!("{shown} does not exist"))?;
        self.check_ours(name, &looked, mode, trust)?;
        let file = sys::open_at(self.fd(), name, flags | libc::O_NONBLOCK, 0)
            .map(File::from)
            .map_err(|e| format!("cannot open {shown}: {e}"))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot stat {shown}: {e}"))?;
        if (meta.dev(), meta.ino()) != (looked.dev(), looked.ino()) {
            return Err(format!("{shown} was replaced while being opened"));
        }
        self.check_ours(name, &meta, mode, trust)?;
        Ok(file)
    }

    /// Reads `/tmp/<name>`, which must be a regular file of the JVM's user, at most `limit`
    /// bytes (more is an error).
    pub fn read_ours(&self, name: &OsStr, limit: u64, trust: Trust) -> Result<Vec<u8>, String> {
        let shown = escape::path(&self.path.join(name)).into_owned();
        let file = self.open_checked(name, libc::S_IFREG, trust, libc::O_RDONLY)?;
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {shown}: {e}"))?;
        if bytes.len() as u64 > limit {
            return Err(format!("{shown} is larger than {limit} bytes"));
        }
        Ok(bytes)
    }

    /// Removes `/tmp/<name>`; a name already gone is fine.
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        match sys::unlink_at(self.fd(), name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Places `content` at `/tmp/<dir>/<file>` (the directory 0755 and the file 0755, both
    /// the JVM user's), or checks that it is there already with that content; returns the
    /// path as the JVM sees it. A directory or file there that is not the JVM user's, is
    /// writable by others, is a link, or holds other bytes is an error: never trusted,
    /// never replaced.
    pub fn place(&self, dir: &str, file: &str, content: &[u8]) -> Result<PathBuf, String> {
        let dir_name = OsStr::new(dir);
        let file_name = OsStr::new(file);
        let shown_dir = escape::path(&self.path.join(dir)).into_owned();
        match sys::mkdir_at(self.fd(), dir_name, 0o700) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {shown_dir}: {e}")),
        }
        let dir_file = self.open_checked(
            dir_name,
            libc::S_IFDIR,
            Trust::Strict,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        let meta = dir_file
            .metadata()
            .map_err(|e| format!("cannot stat {shown_dir}: {e}"))?;
        if meta.mode() & 0o777 != 0o755 {
            dir_file
                .set_permissions(std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("cannot chmod {shown_dir}: {e}"))?;
        }
        let sub = TmpDir {
            fd: OwnedFd::from(dir_file),
            path: self.path.join(dir),
            owner: self.owner,
        };
        let path = self.path.join(dir).join(file);
        let shown = escape::path(&path).into_owned();
        let other = || format!("{shown} exists with other content (remove it if nothing uses it)");
        if sub.look(file_name).ok().flatten().is_some() {
            return match sub.read_ours(file_name, content.len() as u64, Trust::Strict) {
                Ok(existing) if existing == content => Ok(path),
                Ok(_) => Err(other()),
                Err(e) if e.contains("larger than") => Err(other()),
                Err(e) => Err(e),
            };
        }
        // Written under a private name, then renamed into place: a JVM never maps half a
        // library, and two attaches at once both end up with the same file.
        let (tmp_name, mut tmp) = sub
            .create_private(&format!(".{file}."), "")
            .map_err(|e| format!("cannot create a file in {shown_dir}: {e}"))?;
        let written = tmp
            .write_all(content)
            .and_then(|()| tmp.set_permissions(std::fs::Permissions::from_mode(0o755)))
            .and_then(|()| tmp.sync_all());
        let renamed =
            written.and_then(|()| sys::rename_noreplace_at(sub.fd(), &tmp_name, file_name));
        match renamed {
            Ok(()) => Ok(path),
            Err(e) => {
                let _ = sub.remove(&tmp_name);
                if e.kind() == io::ErrorKind::AlreadyExists {
                    // Another attach placed it meanwhile: check what it placed.
                    match sub.read_ours(file_name, content.len() as u64, Trust::Strict) {
                        Ok(existing) if existing == content => Ok(path),
                        _ => Err(format!("{shown} exists with other content")),
                    }
                } else {
                    Err(format!("cannot write {shown}: {e}"))
                }
            }
        }
    }
}
