//! Reaching HotSpot's attach listener: the Unix socket `/tmp/.java_pid<nspid>` that its
//! "Attach Listener" thread serves, started on demand.
//!
//! A JVM does not listen until asked. The handshake: create `.attach_pid<nspid>` in the JVM's
//! working directory (or, failing that, in its `/tmp`), send SIGQUIT; HotSpot's signal thread
//! finds the file (owned by the JVM's user or root), starts the listener, which binds the
//! socket. Without the file, SIGQUIT prints a thread dump instead; so the signal is sent only
//! with the file in place, only to a process that handles SIGQUIT (`-Xrs` JVMs do not: the
//! signal would kill them), and the file is removed whatever happens.
//!
//! Every connection is checked before a byte is sent: the socket file must be a socket of
//! the JVM's user, and the process listening on it (`SO_PEERCRED`) must be the target. A
//! socket left by an earlier process with the same pid, or planted by someone else, is never
//! spoken to.

use std::ffi::{OsStr, OsString};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::error::AttachError;
use super::sys;
use super::target::Target;
use super::tmpdir::{TmpDir, Trust};

/// First pause between looks for the socket; each look waits a little longer.
const POLL_START: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_millis(200);

pub struct Listener<'a> {
    target: &'a Target,
    tmp: &'a TmpDir,
    socket_name: OsString,
}

/// Why one connection attempt failed.
enum Miss {
    /// No socket yet, or nobody listening on it (a stale file): wake the JVM, wait.
    NotListening,
    /// Something we must not talk to: stop.
    Refused(AttachError),
}

impl<'a> Listener<'a> {
    /// Finds the target's listener, starting it if needed; waits at most `timeout`.
    pub fn reach(
        target: &'a Target,
        tmp: &'a TmpDir,
        timeout: Duration,
    ) -> Result<Listener<'a>, AttachError> {
        let listener = Listener {
            target,
            tmp,
            socket_name: OsString::from(format!(".java_pid{}", target.status.nspid)),
        };
        match listener.try_connect(timeout) {
            Ok(_) => return Ok(listener),
            Err(Miss::Refused(e)) => return Err(e),
            Err(Miss::NotListening) => {}
        }
        let what = target.describe();
        if target.attach_disabled() == Some(true) {
            return Err(AttachError::Unattachable(format!(
                "{what} runs with -XX:+DisableAttachMechanism: it cannot be attached to \
                 (restart it without that flag)"
            )));
        }
        if !target.status.catches_sigquit() {
            return Err(AttachError::Unattachable(format!(
                "{what} does not handle SIGQUIT (started with -Xrs, or still starting up), so \
                 its attach listener cannot be started; nothing was sent to it"
            )));
        }
        let trigger = Trigger::create(target, tmp)?;
        listener.wake_and_wait(timeout)?;
        trigger.remove()?;
        Ok(listener)
    }

    fn wake_and_wait(&self, timeout: Duration) -> Result<(), AttachError> {
        let what = self.target.describe();
        let start = Instant::now();
        let signal = || {
            self.target
                .send_quit()
                .map_err(AttachError::io(format!("cannot signal {what}")))
        };
        signal()?;
        let mut signalled_again = false;
        let mut pause = POLL_START;
        loop {
            std::thread::sleep(pause);
            pause = (pause * 3 / 2).min(POLL_MAX);
            let left = timeout.saturating_sub(start.elapsed());
            match self.try_connect(left.max(Duration::from_millis(100))) {
                Ok(_) => return Ok(()),
                Err(Miss::Refused(e)) => return Err(e),
                Err(Miss::NotListening) => {}
            }
            if !self.target.alive() {
                return Err(AttachError::Unattachable(format!(
                    "{what} exited while otelprof was attaching"
                )));
            }
            if left.is_zero() {
                return Err(AttachError::NoAnswer(format!(
                    "{what} did not start its attach listener within {} (attach may be \
                     disabled with -XX:+DisableAttachMechanism, or the JVM is busy or hung; \
                     see --timeout)",
                    humanize(timeout)
                )));
            }
            // A signal can be lost while the JVM is busy (HotSpot coalesces pending ones):
            // send it once more halfway, as the JDK's own client does.
            if !signalled_again && start.elapsed() > timeout / 2 {
                signalled_again = true;
                signal()?;
            }
        }
    }

    /// A checked connection to the listener, for one command.
    pub fn connect(&self, timeout: Duration) -> Result<UnixStream, AttachError> {
        self.try_connect(timeout).map_err(|miss| match miss {
            Miss::Refused(e) => e,
            Miss::NotListening => AttachError::NoAnswer(format!(
                "{} stopped listening on its attach socket",
                self.target.describe()
            )),
        })
    }

    fn try_connect(&self, timeout: Duration) -> Result<UnixStream, Miss> {
        let what = self.target.describe();
        let shown = format!("/tmp/{}", self.socket_name.to_string_lossy());
        let meta = match self.tmp.look(&self.socket_name) {
            Ok(Some(meta)) => meta,
            Ok(None) => return Err(Miss::NotListening),
            Err(e) => {
                return Err(Miss::Refused(AttachError::io(format!(
                    "cannot look at {shown} of {what}"
                ))(e)))
            }
        };
        if let Err(why) =
            self.tmp
                .check_ours(&self.socket_name, &meta, libc::S_IFSOCK, Trust::Strict)
        {
            return Err(Miss::Refused(AttachError::Peer(format!(
                "not connecting to {what}: {why}"
            ))));
        }
        let path = self.tmp.proc_path().join(&self.socket_name);
        let stream = match sys::connect_unix(&path, timeout) {
            Ok(s) => s,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNREFUSED | libc::ENOENT)) => {
                return Err(Miss::NotListening)
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ETIMEDOUT)) => {
                return Err(Miss::Refused(AttachError::NoAnswer(format!(
                    "{what} accepts no connection on {shown} (its attach listener is busy)"
                ))))
            }
            Err(e) => {
                return Err(Miss::Refused(AttachError::io(format!(
                    "cannot connect to {shown} of {what}"
                ))(e)))
            }
        };
        let peer = sys::peer_cred(&stream).map_err(|e| {
            Miss::Refused(AttachError::io(format!(
                "cannot identify the peer on {shown}"
            ))(e))
        })?;
        if u32::try_from(peer.pid).ok() != Some(self.target.pid) {
            return Err(Miss::Refused(AttachError::Peer(format!(
                "not talking to {shown} of {what}: the process listening there is pid {}, \
                 not the JVM",
                peer.pid
            ))));
        }
        Ok(stream)
    }
}

/// The `.attach_pid<nspid>` file; removed when dropped.
struct Trigger<'a> {
    dir: std::os::fd::BorrowedFd<'a>,
    name: OsString,
    removed: bool,
}

impl<'a> Trigger<'a> {
    fn create(target: &'a Target, tmp: &'a TmpDir) -> Result<Trigger<'a>, AttachError> {
        let name = OsString::from(format!(".attach_pid{}", target.status.nspid));
        // HotSpot looks in its working directory first, then in /tmp.
        let mut last_error = None;
        for dir in target.cwd().into_iter().chain([tmp.fd()]) {
            match sys::open_at(
                dir,
                &name,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                0o600,
            ) {
                Ok(_) => {
                    return Ok(Trigger {
                        dir,
                        name,
                        removed: false,
                    })
                }
                // Left by another attach in progress, or by one that crashed: it triggers
                // just as well if it is the JVM user's (or root's), and is removed at the end
                // like ours, as the JDK's own client does.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let owner = owner_of_file(dir, &name);
                    if owner == Some(target.status.euid) || owner == Some(0) {
                        return Ok(Trigger {
                            dir,
                            name,
                            removed: false,
                        });
                    }
                    last_error = Some(e);
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(AttachError::io(format!(
            "cannot create the attach trigger {} in the working directory or /tmp of {}",
            name.to_string_lossy(),
            target.describe()
        ))(
            last_error.unwrap_or_else(|| std::io::Error::other("no directory")),
        ))
    }

    fn remove(mut self) -> Result<(), AttachError> {
        self.removed = true;
        match sys::unlink_at(self.dir, &self.name) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(AttachError::io(format!(
                "cannot remove the attach trigger {}",
                self.name.to_string_lossy()
            ))(e)),
            _ => Ok(()),
        }
    }
}

/// The owner of `name` in `dir` when it is a regular file.
fn owner_of_file(dir: std::os::fd::BorrowedFd<'_>, name: &OsStr) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = sys::open_at(dir, name, libc::O_PATH, 0)
        .and_then(|fd| std::fs::File::from(fd).metadata())
        .ok()?;
    meta.is_file().then(|| meta.uid())
}

impl Drop for Trigger<'_> {
    fn drop(&mut self) {
        if !self.removed {
            let _ = sys::unlink_at(self.dir, &self.name);
        }
    }
}

/// `10s`, `1.5s`, `250ms`.
pub fn humanize(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
