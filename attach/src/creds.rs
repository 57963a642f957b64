//! Acting as the JVM's user while root.
//!
//! HotSpot answers a connection only when the peer's effective uid and gid (`SO_PEERCRED`,
//! translated into the JVM's user namespace) are its own, or uid 0 there. Root on the host is
//! not uid 0 inside a container's user namespace, so root takes the JVM's effective uid and
//! gid as seen from the host, which the kernel translates back to the JVM's own. The files
//! made for the JVM (the trigger, the reply file, the library copy) are then the JVM's user's
//! from the start, which the agent needs (it opens the reply file without creating it, and
//! the file is 0600).
//!
//! Only the effective ids change (and the groups, to the JVM's group alone): the real and
//! saved uid stay 0, so the switch is undone before anything is written on our side (the
//! `dump -o` file belongs to whoever ran `otelprof`). Not entering the JVM's namespaces is
//! deliberate: its files are reached through its root directory ([`super::sys`]), its
//! socket is a path, and its pid is known from `NSpid`.

use std::io;

use super::sys;

/// Ids to act as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// While alive, this process acts as another user; dropping it (or [`Switched::restore`])
/// switches back.
#[derive(Debug)]
pub struct Switched {
    own: Ids,
    own_groups: Vec<libc::gid_t>,
    target: Ids,
    active: bool,
}

/// This process's effective ids.
pub fn own() -> Ids {
    let (uid, gid) = sys::effective_ids();
    Ids { uid, gid }
}

/// Becomes `target` when running as root and `target` is another user; `None` when no
/// switch is needed (same ids, or not root: then the caller checked that the ids match).
pub fn become_user(target: Ids) -> io::Result<Option<Switched>> {
    let own = own();
    if own.uid != 0 || own == target {
        return Ok(None);
    }
    let mut switched = Switched {
        own,
        own_groups: sys::groups()?,
        target,
        active: false,
    };
    switched.switch_to_target()?;
    Ok(Some(switched))
}

impl Switched {
    fn switch_to_target(&mut self) -> io::Result<()> {
        // Groups and gid first: once the euid is not 0, CAP_SETGID is gone.
        sys::set_groups(&[self.target.gid])?;
        sys::set_effective_gid(self.target.gid)?;
        sys::set_effective_uid(self.target.uid)?;
        self.active = true;
        Ok(())
    }

    fn switch_back(&mut self) -> io::Result<()> {
        if !self.active {
            return Ok(());
        }
        // The uid first: root again, then the groups may be set.
        sys::set_effective_uid(self.own.uid)?;
        sys::set_effective_gid(self.own.gid)?;
        sys::set_groups(&self.own_groups)?;
        self.active = false;
        Ok(())
    }

    /// Runs `f` as ourselves again (reading a file the JVM's user may not read), then
    /// switches back to the JVM's user.
    pub fn as_own<T>(&mut self, f: impl FnOnce() -> T) -> io::Result<T> {
        self.switch_back()?;
        let result = f();
        self.switch_to_target()?;
        Ok(result)
    }

    /// Switches back to our own ids.
    pub fn restore(mut self) -> io::Result<()> {
        self.switch_back()
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        // Errors were reported by `restore` on the normal path; on an early return there is
        // nothing better to do than try.
        let _ = self.switch_back();
    }
}

/// Runs `f` as ourselves when `switched` is a switch, else just runs it.
pub fn as_own<T>(switched: &mut Option<Switched>, f: impl FnOnce() -> T) -> io::Result<T> {
    match switched {
        Some(s) => s.as_own(f),
        None => Ok(f()),
    }
}
