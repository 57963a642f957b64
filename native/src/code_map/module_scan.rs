//! Building the module sets the native walk reads ([`super::modules`]): which libraries are
//! mapped executable (`/proc/self/maps`), each library's unwind table (read from its file's
//! `.eh_frame`, or from memory for the vDSO), and the JVM's code cache.
//!
//! The `otelprof-modules` thread ([`ModuleWatch`]) publishes the first set as profiling
//! starts. Tables are built there for libjvm (20 to 30 ms of CPU; the first samples of every
//! JVM meet it, and samples taken meanwhile have no native frames) and for libraries with
//! little unwind information ([`EAGER_UNWIND_BYTES`]); any other library's table is built
//! once walks have met its code ([`wake`]: such a walk rings the aggregator's doorbell, and
//! the aggregator wakes the watch). Walks that meet a library before its table is built end
//! there (`[native_walk_table_pending]`). The agent's own (about 10 ms) is then never built
//! in most JVMs.
//!
//! Code in no known library (a library loaded since, with `dlopen`) is found by a look at the
//! maps ([`rescan_now`], at most every [`NAMING_RESCAN`]): the aggregator asks for one as soon
//! as such a walk rings its doorbell, and again when naming a pc in no known library, so that
//! those first samples are named too; the watch itself looks again at most once per
//! [`RESCAN_EVERY`]. That code's first samples end their native walk early, they are not
//! wrong. Tables are kept per file (device and inode)
//! for the life of the process, so a library is read once however many sets hold it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use otelprof_native_frames::elf::ElfInfo;
use otelprof_native_frames::maps::{self, Mapping};
use otelprof_native_frames::unwind_table::UnwindTable;
use otelprof_native_frames::walk::End;

use crate::code_map::modules::{self, Library, Module, ModuleSet};
use crate::stats::COUNTERS;
use crate::worker::{self, Shared, Worker};

/// Least time between two looks at the maps by the watch.
const RESCAN_EVERY: Duration = Duration::from_secs(1);
/// Libraries with at most this much unwind information get their table when they are found,
/// not when a walk first meets them: the C library (150 KiB of `.eh_frame`, about 2.5 ms of
/// work), which nearly every sampled native stack passes through, libstdc++ and the JDK's
/// smaller libraries. Larger ones (the agent's own, 750 KiB; large JNI libraries) wait for a
/// walk.
const EAGER_UNWIND_BYTES: u64 = 256 * 1024;
/// Least time between two looks asked for by the aggregator.
const NAMING_RESCAN: Duration = Duration::from_millis(100);

/// The scanner of the running watch (one per process: the module set is process-wide).
static SCANNER: Mutex<Option<(ModuleScanner, Option<Instant>)>> = Mutex::new(None);
/// The running watch's handshake, for [`wake`] to wake it.
static WATCH: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

/// Wakes the module watch to build the unwind tables walks have met without one, and to look
/// at the maps if walks met code in no known library. The aggregator calls it when walks
/// ended either way since its last drain.
pub(crate) fn wake() {
    let watch = WATCH.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(shared) = watch {
        worker::poke(&shared);
    }
}

/// Looks at the maps now, for a pc in no known library, unless a look was asked for less than
/// [`NAMING_RESCAN`] ago or no watch runs. Returns whether a new set was published.
pub(crate) fn rescan_now() -> bool {
    let mut scanner = SCANNER.lock().unwrap_or_else(|p| p.into_inner());
    let Some((scanner, last)) = scanner.as_mut() else {
        return false;
    };
    if last.is_some_and(|t| t.elapsed() < NAMING_RESCAN) {
        return false;
    }
    *last = Some(Instant::now());
    scanner.scan().unwrap_or(false)
}

/// What the scans remember.
pub(crate) struct ModuleScanner {
    /// Libraries read so far, by (device, inode) of their file (the vDSO by its address).
    libraries: HashMap<(u64, u64), &'static Library>,
    /// The code cache, when HotSpot said where it is.
    code_cache: Option<(u64, u64)>,
    /// The executable mappings of the last set published.
    published: Vec<(u64, u64, u64)>,
}

impl ModuleScanner {
    pub(crate) fn new(code_cache: Option<(u64, u64)>) -> ModuleScanner {
        ModuleScanner {
            libraries: HashMap::new(),
            code_cache,
            published: Vec::new(),
        }
    }

    /// Reads the maps and publishes a new set if the executable mappings changed. Returns
    /// whether it published.
    pub(crate) fn scan(&mut self) -> std::io::Result<bool> {
        let maps = maps::read_self()?;
        let exec: Vec<&Mapping> = maps.iter().filter(|m| m.executable()).collect();
        let key: Vec<(u64, u64, u64)> = exec.iter().map(|m| (m.start, m.end, m.inode)).collect();
        if key == self.published {
            return Ok(false);
        }
        let mut set = Vec::new();
        let mut java = Vec::new();
        for m in &exec {
            if m.is_file() || m.path == "[vdso]" {
                if let Some(module) = self.module(m) {
                    set.push(module);
                }
            } else if self.code_cache.is_none() && m.path.is_empty() {
                // Without HotSpot's bounds, anonymous executable memory is taken for Java
                // code: the interpreter and compiled methods live there.
                java.push((m.start, m.end));
            }
        }
        if let Some(cache) = self.code_cache {
            java.push(cache);
        }
        let libraries = set.len();
        modules::publish(ModuleSet::new(set, java));
        self.published = key;
        COUNTERS.module_sets.fetch_add(1, Ordering::Relaxed);
        log_debug!("native code: {libraries} executable mappings published");
        Ok(true)
    }

    /// Builds the unwind tables walks have asked for.
    pub(crate) fn build_wanted(&mut self) {
        for library in self.libraries.values() {
            if library.table.get().is_none() && library.wanted.load(Ordering::Relaxed) {
                build_table(library);
            }
        }
    }

    /// Scans and builds every library's table at once (for tests that walk without a watch).
    #[cfg(test)]
    pub(crate) fn scan_with_tables(&mut self) {
        self.scan().unwrap();
        for library in self.libraries.values() {
            library.wanted.store(true, Ordering::Relaxed);
        }
        self.build_wanted();
    }

    /// The module of one executable mapping, reading its library if it is new.
    fn module(&mut self, m: &Mapping) -> Option<Module> {
        let id = if m.is_file() {
            (m.dev, m.inode)
        } else {
            (u64::MAX, m.start)
        };
        let library = match self.libraries.get(&id) {
            Some(l) => *l,
            None => {
                let (library, unwind_bytes) = read_library(m);
                let l: &'static Library = Box::leak(Box::new(library));
                // Small tables cost less than a walk's wait for them (a JNI library loaded at
                // run time); the JVM's own is met by the first samples of every JVM.
                if unwind_bytes <= EAGER_UNWIND_BYTES || l.file_name() == "libjvm.so" {
                    build_table(l);
                }
                self.libraries.insert(id, l);
                l
            }
        };
        let bias = library_bias(library, m)?;
        Some(Module {
            start: m.start,
            end: m.end,
            offset: m.offset,
            bias,
            library,
        })
    }
}

/// Where a mapped library's bytes are read from: its file or, for a file deleted since it was
/// mapped, the mapping's link in `/proc/self/map_files`.
fn source_of(m: &Mapping) -> String {
    if m.is_file() && !m.path.ends_with(" (deleted)") && Path::new(&m.path).is_file() {
        m.path.clone()
    } else {
        format!("/proc/self/map_files/{:x}-{:x}", m.start, m.end)
    }
}

/// Reads what one library says about itself (build id, segments), not yet its unwind table
/// ([`build_table`] does that), and how large its unwind information is. An unreadable file
/// gives a library without segments, which no mapping is placed in.
fn read_library(m: &Mapping) -> (Library, u64) {
    let path = m
        .path
        .strip_suffix(" (deleted)")
        .unwrap_or(&m.path)
        .to_owned();
    let (source, image) = if m.path == "[vdso]" && m.readable() {
        let Some(len) = m
            .end
            .checked_sub(m.start)
            .and_then(|l| usize::try_from(l).ok())
        else {
            return (Library::unread(path, String::new()), 0);
        };
        // SAFETY: the vDSO is mapped readable for the life of the process, at the range the
        // maps give; it is copied, never written.
        let bytes = unsafe { std::slice::from_raw_parts(m.start as *const u8, len) };
        (String::new(), Some(bytes.to_vec()))
    } else {
        (source_of(m), None)
    };
    // Headers and notes only: the unwind information is read when the table is built.
    let info = match &image {
        Some(bytes) => ElfInfo::parse(&bytes[..]),
        None => otelprof_native_frames::elf::read_sections(Path::new(&source), &[])
            .map_err(|e| e.to_string())
            .and_then(|bytes| ElfInfo::parse(&bytes)),
    };
    let Ok(info) = info else {
        COUNTERS
            .unwind_tables_failed
            .fetch_add(1, Ordering::Relaxed);
        return (Library::unread(path, source), 0);
    };
    let library = Library {
        path,
        build_id: info.build_id_hex(),
        table: OnceLock::new(),
        wanted: AtomicBool::new(false),
        source,
        image,
        segments: info.segments,
    };
    (library, info.unwind_bytes)
}

/// Builds the unwind table of `library` from its `.eh_frame` and sets it (an unreadable file
/// gives an empty table: its code is still named `libname+0x…`, and walks through it assume
/// frame pointers).
fn build_table(library: &Library) {
    let built = match &library.image {
        Some(bytes) => UnwindTable::from_elf(&bytes[..]).map_err(|e| e.to_string()),
        None => otelprof_native_frames::elf::read_sections(
            Path::new(&library.source),
            otelprof_native_frames::elf::UNWIND_SECTIONS,
        )
        .map_err(|e| e.to_string())
        .and_then(|bytes| UnwindTable::from_elf(&bytes).map_err(|e| e.to_string())),
    };
    let path = &library.path;
    let table = match built {
        Ok(t) => {
            COUNTERS.unwind_tables.fetch_add(1, Ordering::Relaxed);
            log_debug!(
                "unwind table of {path}: {} rows, {} rules, {} KiB",
                t.rows(),
                t.distinct_rules(),
                t.memory_bytes() / 1024
            );
            t
        }
        Err(e) => {
            COUNTERS
                .unwind_tables_failed
                .fetch_add(1, Ordering::Relaxed);
            log_debug!("no unwind table for {path}: {e}");
            UnwindTable::default()
        }
    };
    let _ = library.table.set(table);
}

/// The load bias of mapping `m` of `library`.
fn library_bias(library: &Library, m: &Mapping) -> Option<u64> {
    let info = ElfInfo {
        segments: library.segments.clone(),
        ..ElfInfo::default()
    };
    // The vDSO is mapped whole from its first byte.
    let offset = if library.image.is_some() { 0 } else { m.offset };
    info.load_bias(m.start, offset)
}

/// The `otelprof-modules` thread.
pub(crate) struct ModuleWatch {
    worker: Worker,
}

impl ModuleWatch {
    /// Starts the thread; it publishes the first set at once.
    pub(crate) fn start(code_cache: Option<(u64, u64)>) -> std::io::Result<ModuleWatch> {
        {
            // A later session keeps the libraries read by an earlier one (their tables live
            // as long as the process anyway).
            let mut scanner = SCANNER.lock().unwrap_or_else(|p| p.into_inner());
            match scanner.as_mut() {
                Some((s, _)) => s.code_cache = code_cache.or(s.code_cache),
                None => *scanner = Some((ModuleScanner::new(code_cache), None)),
            }
        }
        let worker = Worker::spawn("otelprof-modules", move |control| {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&control)));
            if result.is_err() {
                log_error!("internal error reading native code; native frames stop changing");
            }
            worker::mark_done(&control);
        })?;
        *WATCH.lock().unwrap_or_else(|p| p.into_inner()) = Some(worker.control.clone());
        Ok(ModuleWatch { worker })
    }

    pub(crate) fn stop(&self, timeout: Duration) -> bool {
        WATCH.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.worker.stop(timeout)
    }
}

fn run(control: &Shared) {
    let unknown = || {
        COUNTERS
            .native_walk_end
            .get(End::NoModule as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    };
    let mut seen = u64::MAX;
    let mut scanned_at: Option<Instant> = None;
    let (lock, cv) = control;
    loop {
        let now = unknown();
        if now != seen && scanned_at.is_none_or(|t| t.elapsed() >= RESCAN_EVERY) {
            seen = now;
            scanned_at = Some(Instant::now());
            let scanned = SCANNER
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
                .map(|(scanner, _)| scanner.scan());
            if let Some(Err(e)) = scanned {
                log_warn!("cannot read /proc/self/maps: {e}; native frames are not unwound");
                return;
            }
        }
        if let Some((scanner, _)) = SCANNER.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            scanner.build_wanted();
        }
        let c = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (mut c, _) = match cv.wait_timeout_while(c, RESCAN_EVERY, |c| !c.stop && !c.poke) {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        if c.stop {
            return;
        }
        c.poke = false;
    }
}
