//! The threads of the process that get no JVMTI ThreadStart: the garbage collector's, the JIT
//! compilers', the VM thread and its helpers, the agent's own, and any native library's.
//!
//! JVMTI tells the agent about Java threads only, yet on an allocation-bound service the
//! collector's threads can burn most of the process's CPU. So a scan of `/proc/self/task`
//! ([`NativeThreads::scan`], run every 100 ms to 1 s by [`crate::threads::thread_scan`])
//! registers every thread that is neither in the thread table nor already known: an entry in
//! the table with the thread's [`ThreadRole`] (from its name) and no JNIEnv, so the signal
//! handler records a role frame for it and never calls AsyncGetCallTrace on it; its name for
//! the `thread_name` label; and, with per-thread CPU sampling, a perf event or a timer on its
//! CPU clock, as a Java thread gets at ThreadStart. Under `clock=itimer` the process timer's signals land on
//! these threads already: they only need to be recognised.
//!
//! # CPU before the scan
//!
//! A thread used some CPU before a scan found it: since the process started for the threads
//! the JVM started before the agent, since its start for a thread started between two scans
//! (a GC worker the collector adds in the middle of a collection can burn a whole scan
//! interval of CPU before it is seen). That CPU, read from the thread's clock when it is
//! registered, is recorded at once as one sample of its role, in whole intervals whose
//! expectation is exact (the remainder rounded up with its own probability, as the timers'
//! random first expiration does for their samples). What a thread that started and ended
//! between two scans used is not seen at all. The JVM's own threads rarely do: GC workers
//! stay until the JVM exits, and HotSpot removes an extra compiler thread only after it has
//! been idle for 100 ms (C2) or 500 ms (C1) (`CompileBroker::can_remove`), so it outlives
//! the 100 ms between scans of a JVM with fewer than about a thousand threads.
//!
//! A Java thread's CPU is never counted twice. ThreadEnd leaves the thread's CPU time with
//! the registry before the thread leaves the table ([`thread_registry::take_ended`]), and a
//! scan looks in the table first and at those times second. A Java thread still listed after
//! its ThreadEnd is on its way out and is left alone; one still listed a scan later lives on
//! without the VM (a native thread that detached) and is registered, credited only with the
//! CPU it used since its end. A thread the scan registers before its ThreadStart (it was
//! listed in the microseconds between its start and that event) is taken over by the Java
//! registration, timer and all.
//!
//! # Threads that end
//!
//! A registered thread that is no longer listed has ended: its entry and timer go (a timer on
//! an ended thread's clock never fires again, but it keeps its kernel resources until it is
//! deleted), and its name is kept until its samples are written. Tids are allocated
//! cyclically by the kernel, so a tid that ended is not reused within a scan interval unless
//! the whole tid space (`/proc/sys/kernel/pid_max`, at least 32768) was used up in between.

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use crate::sampling::cpu_clock::CpuClock;
use crate::sampling::own_threads;
use crate::sampling::signal_handler::Sampler;
use crate::sampling::thread_roles::ThreadRole;
use crate::sampling::thread_table::{NotInserted, ThreadTable};
use crate::sampling::timers;
use crate::stats::{self, COUNTERS};
use crate::threads::process_threads;
use crate::threads::thread_registry;

/// What one scan did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScanOutcome {
    /// Threads listed in `/proc/self/task`.
    pub(crate) listed: usize,
    /// Threads registered by this scan.
    pub(crate) found: usize,
    /// Registered threads found gone.
    pub(crate) gone: usize,
}

/// A Java thread past its ThreadEnd that is still listed.
#[derive(Clone, Copy, Debug)]
struct Ended {
    /// Its CPU time at ThreadEnd: sampled already.
    cpu: Duration,
    /// Still listed at a scan after the one that learnt of its end: not a thread on its way
    /// out (those go within microseconds), but one that lives on without the VM (a native
    /// thread that detached), to be registered like any other.
    lingers: bool,
}

/// The scan's memory of the threads it registered.
pub(crate) struct NativeThreads {
    /// The handler's table and buffer (credits are written to the buffer).
    sampler: &'static Sampler,
    /// What samples each thread's CPU, `None` under `clock=itimer`.
    clock: Option<CpuClock>,
    /// Threads registered by the scan: tid -> serial.
    known: HashMap<i32, u64>,
    /// Java threads past their ThreadEnd, kept while their tid is listed.
    ended: HashMap<i32, Ended>,
    /// This scan's listing and the last one's, sorted.
    listed: Vec<i32>,
    previous: Vec<i32>,
    candidates: Vec<i32>,
    /// Whether the next scan credits the CPU a thread used before it was found (every scan
    /// but a late start's first: see [`crate::threads::thread_scan::Config`]).
    credit: bool,
}

impl NativeThreads {
    pub(crate) fn new(sampler: &'static Sampler, clock: Option<CpuClock>) -> NativeThreads {
        NativeThreads {
            sampler,
            clock,
            known: HashMap::new(),
            ended: HashMap::new(),
            listed: Vec::new(),
            previous: Vec::new(),
            candidates: Vec::new(),
            credit: true,
        }
    }

    /// Whether the next scan credits the CPU its new threads used before it found them;
    /// later scans always do.
    pub(crate) fn credit_next_scan(&mut self, credit: bool) {
        self.credit = credit;
    }

    /// Lists the process's threads and brings the registrations up to date: new threads
    /// registered (with their CPU so far), ended ones removed.
    ///
    /// Only two kinds of tids can need a registration: those not listed by the last scan,
    /// and those of Java threads that ended but live on (detached from the VM). Every other
    /// listed tid was settled by an earlier scan, so a scan costs little more than the
    /// listing itself, however many Java threads there are. A Java thread that has just
    /// ended is not registered: it is on its way out, and its CPU was sampled.
    pub(crate) fn scan(&mut self) -> io::Result<ScanOutcome> {
        process_threads::list(&mut self.listed)?;
        stats::bump(&COUNTERS.thread_scans);
        self.listed.sort_unstable();
        let mut outcome = ScanOutcome {
            listed: self.listed.len(),
            ..ScanOutcome::default()
        };
        let (listed, table) = (&self.listed, self.sampler.table);
        let is_listed = |tid: &i32| listed.binary_search(tid).is_ok();

        let mut gone = Vec::new();
        self.known.retain(|&tid, &mut serial| {
            if !is_listed(&tid) {
                gone.push((tid, serial));
                return false;
            }
            // Still ours, or taken over by the thread's own ThreadStart (which deleted our
            // timer and ended our name): then it is a Java thread now.
            table.lookup(tid).is_some_and(|s| s.serial() == serial)
        });
        for (tid, serial) in gone {
            forget(table, tid, serial);
            outcome.gone += 1;
        }

        // Candidates: new tids (a merge of two sorted listings) and ended Java threads that
        // have outlived a scan.
        self.ended.retain(|tid, e| {
            e.lingers = true;
            is_listed(tid)
        });
        take_ended(&mut self.ended);
        self.candidates.clear();
        let mut before = self.previous.iter().peekable();
        for &tid in listed {
            while before.next_if(|&&p| p < tid).is_some() {}
            if before.next_if(|&&p| p == tid).is_none() {
                self.candidates.push(tid);
            }
        }
        self.candidates.extend(
            self.ended
                .iter()
                .filter(|(_, e)| e.lingers)
                .map(|(&tid, _)| tid),
        );
        self.candidates.sort_unstable();
        self.candidates.dedup();
        // The table first, the ended Java threads second (see the module docs): a thread
        // that left the table before its lookup here left its end there before that.
        let known = &self.known;
        self.candidates
            .retain(|tid| !known.contains_key(tid) && table.lookup(*tid).is_none());
        take_ended(&mut self.ended);
        let ended = &self.ended;
        self.candidates
            .retain(|tid| ended.get(tid).is_none_or(|e| e.lingers));
        for i in 0..self.candidates.len() {
            let Some(&tid) = self.candidates.get(i) else {
                break;
            };
            if self.register(tid) {
                outcome.found += 1;
            }
        }
        std::mem::swap(&mut self.listed, &mut self.previous);
        self.credit = true;
        Ok(outcome)
    }

    /// Registers `tid`; false if it ended meanwhile or could not be registered.
    fn register(&mut self, tid: i32) -> bool {
        let Some(name) = process_threads::name(tid) else {
            return false;
        };
        let role = if own_threads::is_own_tid(tid) {
            ThreadRole::Agent
        } else {
            ThreadRole::of_name(&name)
        };
        let (table, serial) = (self.sampler.table, thread_registry::new_serial());
        match table.insert_native(tid, serial, role) {
            Ok(()) => {}
            // Its ThreadStart came first after all.
            Err(NotInserted::Present) => return false,
            Err(NotInserted::Full) => {
                stats::bump(&COUNTERS.table_full);
                return false;
            }
        }
        log_debug!("native thread: tid {tid} serial {serial} '{name}' {role:?}");
        thread_registry::remember_native(serial, name);
        self.known.insert(tid, serial);
        stats::bump(&COUNTERS.native_threads_found);
        let Some(clock) = self.clock else {
            return true;
        };
        let interval = clock.interval();
        // Read before the sampler starts: the CPU it will not see.
        let used = process_threads::cpu_time(tid).filter(|_| self.credit);
        match clock.start(tid) {
            Ok(sampler) => {
                if !table.set_sampler(tid, serial, sampler) {
                    // Never published: no handler knows it.
                    sampler.stop();
                }
            }
            // A thread that ended since it was listed has no clock left (EINVAL).
            Err(_) if process_threads::cpu_time(tid).is_none() => return true,
            Err(_) => stats::bump(&COUNTERS.timer_errors),
        }
        if let Some(used) = used {
            let before = self.ended.get(&tid).map(|e| e.cpu).unwrap_or_default();
            let cpu = used.saturating_sub(before);
            let intervals = timers::whole_intervals(cpu, interval, timers::random_fraction());
            if intervals > 0 && self.sampler.record_unwalked(tid, serial, role, intervals) {
                COUNTERS
                    .native_cpu_credited
                    .fetch_add(intervals, std::sync::atomic::Ordering::Relaxed);
            }
        }
        true
    }
}

/// Adds the Java threads that ended since the last call to `ended`.
fn take_ended(ended: &mut HashMap<i32, Ended>) {
    for (tid, cpu) in thread_registry::take_ended() {
        ended.insert(
            tid,
            Ended {
                cpu,
                lingers: false,
            },
        );
    }
}

/// Unregisters a thread of the scan's that ended.
fn forget(table: &ThreadTable, tid: i32, serial: u64) {
    if let Some(removed) = table.remove_native(tid, serial) {
        if let Some(sampler) = removed.sampler {
            // The thread has ended: no handler of its reads its ring.
            sampler.stop();
        }
        stats::bump(&COUNTERS.native_threads_ended);
    }
    thread_registry::mark_ended(serial);
}

#[cfg(test)]
#[allow(clippy::undocumented_unsafe_blocks)]
mod tests {
    //! A real scan of this test process, with a private table and buffer: a thread named like
    //! a GC worker is found, registered with its role, credited with the CPU it used before,
    //! sampled by a timer the scan created for it from another thread, and forgotten when it
    //! ends.
    use super::*;
    use crate::sampling::os::gettid;
    use crate::sampling::sample_buffer::SampleBuffer;
    use crate::sampling::signal_handler::NOT_A_JAVA_THREAD;
    use crate::sys::AsgctCallTrace;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
    use std::sync::mpsc;

    static TARGET: AtomicI32 = AtomicI32::new(0);
    static TARGET_HITS: AtomicU64 = AtomicU64::new(0);
    static WALKED: AtomicBool = AtomicBool::new(false);

    extern "C" fn count(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo; TimerSigInfo is its timer prefix.
        let overrun = unsafe { (*(info as *const crate::sys::TimerSigInfo)).si_overrun };
        if gettid() == TARGET.load(Ordering::Relaxed) {
            TARGET_HITS.fetch_add(1 + overrun.max(0) as u64, Ordering::Relaxed);
        }
    }

    unsafe extern "C" fn never_walk(
        _: *mut AsgctCallTrace,
        _: jni::sys::jint,
        _: *mut libc::c_void,
    ) {
        WALKED.store(true, Ordering::SeqCst);
    }

    #[test]
    fn scan_registers_times_credits_and_forgets_a_gc_thread() {
        static TABLE: ThreadTable = ThreadTable::new();
        // SIGUSR2: no other test uses it. Every thread of this process gets a timer from the
        // scan; the handler only counts the target's signals.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = count as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
        }
        let sampler: &'static Sampler = Box::leak(Box::new(Sampler {
            table: &TABLE,
            buffer: SampleBuffer::new(2, 8, 1 << 16),
            walk: never_walk,
            depth: std::sync::atomic::AtomicI32::new(8),
        }));
        let interval = Duration::from_millis(10);
        // This thread is a Java thread here: the scan leaves it alone.
        let me = gettid();
        TABLE.insert(me, std::ptr::dangling_mut(), 1).unwrap();

        let (tx, rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("GC Thread#42".into())
            .spawn(move || {
                TARGET.store(gettid(), Ordering::SeqCst);
                timers::burn_thread_cpu(Duration::from_millis(45));
                tx.send((gettid(), Duration::ZERO)).unwrap();
                go_rx.recv().unwrap();
                // Burn until 15 expirations have arrived. (The kernel checks CPU timers on
                // ticks that find the thread running; on a busy machine those can be far
                // apart, and a fixed burn would test the machine's load.)
                let start = process_threads::cpu_time(gettid()).unwrap_or_default();
                let mut burned = Duration::ZERO;
                while TARGET_HITS.load(Ordering::SeqCst) < 15 && burned < Duration::from_secs(5) {
                    timers::burn_thread_cpu(Duration::from_millis(10));
                    burned = process_threads::cpu_time(gettid()).unwrap_or_default() - start;
                }
                tx.send((gettid(), burned)).unwrap();
                go_rx.recv().unwrap();
            })
            .unwrap();
        let (tid, _) = rx.recv().unwrap();

        let clock = CpuClock::Timer {
            interval,
            signo: libc::SIGUSR2,
        };
        let mut scan = NativeThreads::new(sampler, Some(clock));
        let first = scan.scan().unwrap();
        assert!(first.found >= 2 && first.listed > first.found, "{first:?}");
        let slot = TABLE.lookup(tid).unwrap();
        assert_eq!(slot.role(), ThreadRole::Gc);
        assert!(slot.env().is_null());
        assert_eq!(TABLE.lookup(me).unwrap().role(), ThreadRole::Java);
        // The 45 ms it used before were credited: 4 or 5 intervals.
        let mut credited = Vec::new();
        sampler.buffer.drain(|r| {
            if r.header.tid == tid {
                credited.push((r.header.num_frames, r.header.role, r.header.weight));
            }
        });
        assert_eq!(credited.len(), 1, "{credited:?}");
        let (frames, role, weight) = credited[0];
        assert_eq!((frames, role), (NOT_A_JAVA_THREAD, ThreadRole::Gc as u8));
        assert!((4..=5).contains(&weight), "{weight} intervals for 45 ms");
        // A second scan leaves it as it is (other tests' threads may come and go).
        scan.scan().unwrap();
        assert_eq!(TABLE.lookup(tid).map(|s| s.serial()), Some(slot.serial()));
        sampler
            .buffer
            .drain(|r| assert_ne!(r.header.tid, tid, "credited twice"));

        // The timer the scan made sends the thread's signals to the thread itself.
        go_tx.send(()).unwrap();
        let (_, burned) = rx.recv().unwrap();
        let hits = TARGET_HITS.load(Ordering::SeqCst);
        // 15 arrived, and never more than the CPU the thread burned allows (one interval of
        // slack for the random first expiration).
        assert!(
            hits >= 15 && Duration::from_millis(10 * hits) <= burned + interval,
            "{hits} expirations for {burned:?} of CPU"
        );
        assert!(!WALKED.load(Ordering::SeqCst));

        go_tx.send(()).unwrap();
        worker.join().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while process_threads::name(tid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let later = scan.scan().unwrap();
        assert!(later.gone >= 1, "{later:?}");
        assert!(TABLE.lookup(tid).is_none());

        for sampler in TABLE.take_all_samplers() {
            sampler.stop();
        }
    }
}
