//! The perf_events CPU engine (`clock=perf`): one software `cpu-clock` event per thread,
//! counting that thread's CPU time on a high-resolution timer, so that an interval of 1 ms
//! samples every millisecond of CPU (the per-thread POSIX timers of [`super::timers`] are
//! checked on the scheduler tick: about 250 signals per CPU second whatever the interval).
//!
//! Each overflow writes a record to the event's ring buffer (with the kernel call chain of
//! the interrupted code, when allowed) and sends SIGPROF to the thread that overflowed it
//! (`F_SETSIG` + `F_SETOWN_EX`). The handler drains its own thread's ring
//! ([`super::perf_ring`]): the records since the last drain are the intervals the sample
//! stands for, so signals the kernel merged lose no weight. The event stays enabled (no
//! `PERF_EVENT_IOC_REFRESH`): a long stretch of kernel code that cannot take a signal then
//! leaves all its records (or a `PERF_RECORD_LOST` count) for the next sample instead of
//! disabling the event after the first overflow.
//!
//! Opening an event for another thread of the process is allowed (same credentials), so the
//! threads running before profiling starts, and the JVM's own threads found by the thread
//! scan, get events like the threads that start later.
//!
//! Whether the kernel allows all this is found out once, before the first thread's event:
//! [`probe`]. A process under a seccomp filter probes in a child process, so that a filter
//! that kills on `perf_event_open` kills the child, not the JVM.

use std::io;
use std::time::Duration;

use crate::sys::perf::{self, ioctls, perf_event_attr, FOwnerEx};

/// Kernel frames kept per sample at most.
pub(crate) const MAX_KERNEL_FRAMES: u16 = 64;

/// What an event counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// User and kernel CPU time, with the kernel's call chain in each record.
    Kernel,
    /// User CPU time only (what `perf_event_paranoid=2` allows an unprivileged process): the
    /// periods a thread spends in the kernel are not sampled at all.
    User,
}

/// How every thread's event is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PerfConfig {
    pub(crate) interval: Duration,
    pub(crate) scope: Scope,
    pub(crate) signo: libc::c_int,
}

/// One thread's open event: its descriptor and its ring (`0` for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PerfEvent {
    pub(crate) fd: i32,
    pub(crate) ring: usize,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// The ring's mapping: the header page and one data page (room for about 30 records of a
/// typical kernel chain; the handler empties it at every sample).
fn ring_bytes() -> usize {
    2 * page_size()
}

/// The attributes of every event.
fn attributes(config: &PerfConfig) -> perf_event_attr {
    // SAFETY: perf_event_attr is plain data; all-zero is the kernel's "nothing set".
    let mut a: perf_event_attr = unsafe { std::mem::zeroed() };
    a.type_ = perf::PERF_TYPE_SOFTWARE;
    a.size = std::mem::size_of::<perf_event_attr>() as u32;
    a.config = u64::from(perf::PERF_COUNT_SW_CPU_CLOCK);
    a.__bindgen_anon_1.sample_period = u64::try_from(config.interval.as_nanos())
        .unwrap_or(u64::MAX)
        .max(1);
    a.sample_type = u64::from(perf::PERF_SAMPLE_CALLCHAIN);
    // One signal per overflow.
    a.__bindgen_anon_2.wakeup_events = 1;
    a.set_disabled(1);
    // The user part of the stack is unwound by the agent itself (native frames, then
    // AsyncGetCallTrace): the ring holds kernel frames only.
    a.set_exclude_callchain_user(1);
    a.sample_max_stack = MAX_KERNEL_FRAMES;
    if config.scope == Scope::User {
        a.set_exclude_kernel(1);
        a.set_exclude_callchain_kernel(1);
    }
    a.set_exclude_hv(1);
    a
}

fn open_fd(tid: libc::pid_t, attr: &mut perf_event_attr) -> io::Result<i32> {
    // SAFETY: `attr` is a valid attribute struct of the size it declares; cpu -1 with a
    // thread id counts that thread on any CPU.
    let fd = unsafe {
        perf::perf_event_open(
            attr,
            tid,
            -1,
            -1,
            perf::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

impl PerfEvent {
    /// Opens `tid`'s event, maps its ring, routes its signal to `tid` and enables it.
    /// Nothing is left open on failure.
    pub(crate) fn open(tid: libc::pid_t, config: &PerfConfig) -> io::Result<PerfEvent> {
        let mut attr = attributes(config);
        let fd = open_fd(tid, &mut attr)?;
        let mut event = PerfEvent { fd, ring: 0 };
        match event.set_up(tid, config.signo) {
            Ok(()) => Ok(event),
            Err(e) => {
                event.close();
                Err(e)
            }
        }
    }

    fn set_up(&mut self, tid: libc::pid_t, signo: libc::c_int) -> io::Result<()> {
        let check = |rc: libc::c_int| {
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY: mapping the event's own descriptor, shared, at a kernel-chosen address.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.fd,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        self.ring = ring as usize;
        let owner = FOwnerEx {
            kind: perf::F_OWNER_TID,
            pid: tid,
        };
        // SAFETY: fcntl and ioctl on our own descriptor with the arguments each command
        // takes; `owner` outlives the call.
        unsafe {
            check(libc::fcntl(self.fd, libc::F_SETFL, libc::O_ASYNC))?;
            check(libc::fcntl(self.fd, perf::F_SETSIG, signo))?;
            check(libc::fcntl(
                self.fd,
                perf::F_SETOWN_EX,
                &owner as *const FOwnerEx,
            ))?;
            check(ioctls::RESET(self.fd, 0))?;
            check(ioctls::ENABLE(self.fd, 0))?;
        }
        Ok(())
    }

    /// Stops the event's signals and closes its descriptor; the ring stays mapped (a
    /// handler running on the event's thread may still be reading it).
    pub(crate) fn close_fd(&self) {
        // SAFETY: our descriptor; a failed ioctl or close changes nothing else.
        unsafe {
            ioctls::DISABLE(self.fd, 0);
            libc::close(self.fd);
        }
    }

    /// Unmaps the ring.
    ///
    /// # Safety
    /// No handler reads this ring: the calling thread is the event's own, or that thread
    /// has ended, or no handler runs (sampling is off and quiesced).
    pub(crate) unsafe fn unmap(&self) {
        if self.ring != 0 {
            // SAFETY: the mapping made in `set_up`, per this function's contract.
            unsafe { libc::munmap(self.ring as *mut libc::c_void, ring_bytes()) };
        }
    }

    /// Closes the descriptor and unmaps the ring of an event that was never published.
    fn close(&self) {
        self.close_fd();
        // SAFETY: never published: no handler knows this ring.
        unsafe { self.unmap() };
    }
}

/// What the kernel allows this process.
#[derive(Debug)]
pub(crate) enum Probe {
    /// Events that count kernel time and record kernel call chains.
    Kernel,
    /// Only events that exclude the kernel; why the kernel-inclusive one was refused.
    UserOnly(io::Error),
    /// No event at all.
    Refused(io::Error),
}

/// Finds out which events this process may open for its threads, with the attributes the
/// engine uses (`interval` as their period). Opens and closes one event on the calling
/// thread, or in a child process when a seccomp filter is in force (see the module docs).
pub(crate) fn probe(interval: Duration) -> Probe {
    let config = |scope| PerfConfig {
        interval,
        scope,
        signo: libc::SIGPROF,
    };
    let filtered = seccomp_filtered();
    let try_open = |scope| -> io::Result<()> {
        let mut attr = attributes(&config(scope));
        if filtered {
            return probe_in_child(&mut attr);
        }
        let fd = open_fd(0, &mut attr)?;
        // SAFETY: the descriptor just opened.
        unsafe { libc::close(fd) };
        Ok(())
    };
    match try_open(Scope::Kernel) {
        Ok(()) => Probe::Kernel,
        Err(kernel) => match try_open(Scope::User) {
            Ok(()) => Probe::UserOnly(kernel),
            Err(_) => Probe::Refused(kernel),
        },
    }
}

/// Whether a seccomp filter is in force (`Seccomp: 2` in `/proc/self/status`).
fn seccomp_filtered() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

/// Opens `attr`'s event in a child process (fork semantics through the raw `clone` system
/// call, without the C library's fork handlers), which exits with the errno. A child killed
/// by a signal (a filter whose action is to kill or trap) counts as refused.
fn probe_in_child(attr: &mut perf_event_attr) -> io::Result<()> {
    let attr_ptr = attr as *mut perf_event_attr;
    // SAFETY: a clone without CLONE_VM/CLONE_THREAD is a fork: the child gets a copy of this
    // thread only. It makes raw system calls and exits; it touches no lock and no allocator.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: in the child: raw system calls only, then exit_group.
        unsafe {
            let fd = libc::syscall(
                libc::SYS_perf_event_open,
                attr_ptr,
                0,
                -1,
                -1,
                perf::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
            );
            let code = if fd < 0 { *libc::__errno_location() } else { 0 };
            libc::syscall(libc::SYS_exit_group, code as libc::c_long);
        }
        // exit_group does not return; should it, the child must still never run on.
        // SAFETY: as above.
        unsafe { libc::syscall(libc::SYS_exit_group, 127 as libc::c_long) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let rc = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::__WALL) };
        if rc >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => Ok(()),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    } else {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "perf_event_open killed the probing process (a seccomp filter)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_answers_and_the_child_probe_agrees() {
        let interval = Duration::from_millis(1);
        let direct = probe(interval);
        // The child's answer for the kernel-inclusive event matches the direct one.
        let mut attr = attributes(&PerfConfig {
            interval,
            scope: Scope::Kernel,
            signo: libc::SIGPROF,
        });
        let child = probe_in_child(&mut attr);
        match &direct {
            Probe::Kernel => assert!(child.is_ok(), "{child:?}"),
            Probe::UserOnly(_) | Probe::Refused(_) => assert!(child.is_err()),
        }
    }
}
