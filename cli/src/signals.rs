//! Passing termination signals from `otelprof run` on to the program it runs.
//!
//! Signals the terminal generates (Ctrl-C, Ctrl-\, hangup) go to the whole foreground process
//! group, so the child already has its own copy: the parent only has to outlive them, keep
//! waiting and report the child's status. Signals sent to the parent alone (`kill PID`, a
//! supervisor or test harness stopping `otelprof run`) must be passed on, or the JVM would keep
//! running with nobody waiting for it. The handler tells the two apart by `si_code`: the
//! kernel marks terminal-generated signals `SI_KERNEL`, `kill(2)` marks them `SI_USER`.
//!
//! A handler, not `SIG_IGN`, is what the parent installs: an ignored disposition would be
//! inherited across `exec` by a child spawned later, a handler is reset to the default.
//!
//! Async-signal-safe calls made in this file's handler: `kill(2)`, and reading/writing `errno`.
//!
//! The other direction too: helper processes a command starts for itself (the demo's shop and
//! its load generator) get `SIGTERM` from the kernel when the command ends, however it ends
//! ([`end_with_parent`]).

use std::ffi::c_void;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use libc::c_int;

/// Pid of the running child, 0 when there is none to forward to.
static CHILD: AtomicI32 = AtomicI32::new(0);

const FORWARDED: [c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGQUIT, libc::SIGHUP];

/// # Signal safety
/// Runs as a signal handler: reads an atomic, calls `kill(2)`, saves and restores `errno`. No
/// allocation, no locks, no panics.
extern "C" fn forward(sig: c_int, info: *mut libc::siginfo_t, _context: *mut c_void) {
    let code = if info.is_null() {
        libc::SI_USER
    } else {
        // SAFETY: installed with SA_SIGINFO, so the kernel passes a valid, readable siginfo_t.
        unsafe { (*info).si_code }
    };
    if code == libc::SI_KERNEL {
        // From the terminal: the child, in the same process group, received it too.
        return;
    }
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: __errno_location returns this thread's errno slot, valid for the thread's
        // lifetime; kill has no memory-safety preconditions.
        unsafe {
            let errno = libc::__errno_location();
            let saved = *errno;
            libc::kill(pid, sig);
            *errno = saved;
        }
    }
}

/// Starts forwarding SIGINT, SIGTERM, SIGQUIT and SIGHUP to `pid` (see the module docs for
/// which ones are passed on). Until [`stop_forwarding`], these signals no longer terminate
/// this process.
pub fn forward_to(pid: u32) -> io::Result<()> {
    let pid = i32::try_from(pid).map_err(|_| io::Error::other("child pid out of range"))?;
    CHILD.store(pid, Ordering::SeqCst);
    for sig in FORWARDED {
        // SAFETY: sigaction is a plain C struct for which all-zero bytes is a valid value.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = forward;
        action.sa_sigaction = handler as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: `action.sa_mask` is a valid, exclusively borrowed sigset_t.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialised and outlives the call; the old action is not
        // requested (null is allowed).
        if unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Blocks until child `pid` has exited, without reaping it: while the zombie exists its pid
/// cannot be reused, so forwarding can be switched off before the pid is freed and a late
/// signal can never reach an unrelated process. Reap it afterwards (`Child::wait`).
pub fn wait_for_exit(pid: u32) -> io::Result<()> {
    let id = libc::id_t::from(pid);
    loop {
        // SAFETY: siginfo_t is a plain C struct for which all-zero bytes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid only writes into `info`, which is valid and exclusively borrowed.
        let rc = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Stops forwarding; the handlers stay installed but do nothing.
pub fn stop_forwarding() {
    CHILD.store(0, Ordering::SeqCst);
}

/// Has the kernel send `SIGTERM` to `command`'s child when the thread that spawns it ends
/// (`PR_SET_PDEATHSIG`), so a helper process never outlives the command that needs it, even one
/// killed by `SIGKILL`. Spawn from a thread that lives as long as the child is wanted (the
/// main thread). A parent that ended before the child could ask makes the spawn fail.
pub fn end_with_parent(command: &mut Command) {
    // SAFETY: getpid(2) has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls, prctl(2) and getppid(2),
    // and builds its error from an errno value, without allocating.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have ended before the request: the child was reparented then.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    };
}

/// Set by [`note_interrupt`] when Ctrl-C (or SIGTERM, SIGHUP) arrives after
/// [`catch_interrupts`].
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// # Signal safety
/// Stores to an atomic; nothing else.
extern "C" fn note_interrupt(_sig: c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// From now on Ctrl-C, SIGTERM and SIGHUP end a wait ([`interrupted`]) instead of the
/// process, so a command can finish its work (write its file, stop what it started) first.
pub fn catch_interrupts() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction is a plain C struct for which all-zero bytes is a valid value.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(c_int) = note_interrupt;
        action.sa_sigaction = handler as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action.sa_mask` is a valid, exclusively borrowed sigset_t.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialised and outlives the call; the old action is not
        // requested (null is allowed).
        if unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether an interrupt arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
