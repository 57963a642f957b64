//! The threads of this process as the kernel lists them: their ids (`/proc/self/task`), their
//! names (`/proc/self/task/TID/comm`) and their CPU clocks.
//!
//! Read by the thread scan ([`crate::threads::native_threads`]) on its own thread, never by
//! the signal handler (these calls allocate and open files).

use std::io;
use std::time::Duration;

use crate::sys::thread_cpu_clock;

/// Ids of the process's threads now, appended to `out` (cleared first). A thread may end
/// right after it is listed: every later use of an id copes with its absence.
pub(crate) fn list(out: &mut Vec<i32>) -> io::Result<()> {
    out.clear();
    for entry in std::fs::read_dir("/proc/self/task")? {
        let entry = entry?;
        if let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(tid);
        }
    }
    Ok(())
}

/// The kernel's name of thread `tid` (at most 15 bytes: what `pthread_setname_np` and
/// HotSpot's `os::set_native_thread_name` set), or `None` if the thread is gone.
pub(crate) fn name(tid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/self/task/{tid}/comm")).ok()?;
    let text = String::from_utf8_lossy(&raw);
    Some(text.strip_suffix('\n').unwrap_or(&text).to_owned())
}

/// CPU time thread `tid` of this process has used, or `None` if it is gone.
///
/// The clock of another thread is named by the kernel's encoding of its tid (the one glibc's
/// `pthread_getcpuclockid` computes for a thread it created: see
/// [`crate::sys::thread_cpu_clock`]); the kernel accepts it for any thread of the calling
/// process.
pub(crate) fn cpu_time(tid: i32) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer; an unknown clock id fails with EINVAL.
    if unsafe { libc::clock_gettime(thread_cpu_clock(tid), &mut ts) } != 0 {
        return None;
    }
    Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn another_threads_id_name_and_cpu_clock() {
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("scan-me-please-longer".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                crate::sampling::timers::burn_thread_cpu(Duration::from_millis(30));
                let mut clock: libc::clockid_t = 0;
                // SAFETY: pthread_self() is this thread; `clock` a valid out pointer.
                let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
                assert_eq!(rc, 0);
                tx.send((tid, clock)).unwrap();
                stop_rx.recv().unwrap();
            })
            .unwrap();
        let (tid, clock) = rx.recv().unwrap();
        // The encoding glibc gives this thread's clock is the one we compute from its tid.
        assert_eq!(thread_cpu_clock(tid), clock);
        let mut tids = Vec::new();
        list(&mut tids).unwrap();
        // SAFETY: getpid has no preconditions.
        assert!(tids.contains(&tid) && tids.contains(&unsafe { libc::getpid() }));
        // The kernel keeps 15 bytes of the name.
        assert_eq!(name(tid).as_deref(), Some("scan-me-please-"));
        let used = cpu_time(tid).unwrap();
        assert!(used >= Duration::from_millis(30), "{used:?}");
        // Read from here, the other thread's clock does not move with ours.
        crate::sampling::timers::burn_thread_cpu(Duration::from_millis(50));
        assert!(cpu_time(tid).unwrap() < used + Duration::from_millis(20));
        stop_tx.send(()).unwrap();
        worker.join().unwrap();
        // join returns when the thread has released its memory, a moment before the kernel
        // drops its task.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while name(tid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(name(tid), None);
        assert_eq!(cpu_time(tid), None);
    }
}
