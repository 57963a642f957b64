//! Where the signal handler (and the JVMTI allocation and monitor callbacks) leave raw samples
//! for the aggregator thread.
//!
//! A few shards, each guarded by a try-lock and holding scratch arrays (Java frames, and the
//! addresses of native and kernel frames) plus two arenas (double buffering). A writer
//! try-locks a shard (trying each shard once, never waiting), fills the scratch arrays (the
//! perf ring's kernel chain, the native walk, AsyncGetCallTrace; or JVMTI GetStackTrace, in a
//! callback), and appends a record (header, the kernel and native addresses, then the Java
//! frames) to the shard's active arena. The aggregator
//! locks each shard just long enough to swap the active arena, then reads the other one at
//! leisure. A signal that interrupts a callback holding a shard simply uses another shard.
//!
//! Memory is allocated once, before any signal can arrive, and never grows: when an arena is
//! full or every shard is busy the sample is dropped and counted, and the sampler never
//! waits (README.md, How it works).
//!
//! A mutex would not do: if the handler interrupted a thread that holds the mutex and then
//! waited for it, that thread would never run again to release it.
#![deny(clippy::indexing_slicing)]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::context::reader::SpanContext;
use crate::sampling::doorbell::Doorbell;
use crate::stats::{self, COUNTERS};
use crate::sys::AsgctCallFrame;

/// What a sampler records besides the frames: the signal handler (CPU and wall samples) and
/// the JVMTI allocation and monitor callbacks.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    /// Frames that follow, or a negative AsyncGetCallTrace failure code (then no frames).
    pub(crate) num_frames: i32,
    pub(crate) tid: i32,
    /// Serial of the thread's registration (0 when the thread is unknown).
    pub(crate) serial: u64,
    /// CLOCK_MONOTONIC nanoseconds.
    pub(crate) time_ns: u64,
    /// What the sample stands for, in the unit of its kind ([`crate::kinds::SampleKind`]):
    /// CPU sampling intervals (1 + timer overruns), wall nanoseconds, allocated bytes, or
    /// nanoseconds waited for a monitor.
    pub(crate) weight: u64,
    /// Allocated objects or contentions, in thousandths (estimates are fractional); 0 for
    /// CPU and wall samples.
    pub(crate) count_milli: u64,
    /// A [`crate::kinds::SampleKind`].
    pub(crate) kind: u8,
    /// A [`crate::kinds::ThreadState`] (wall samples).
    pub(crate) state: u8,
    /// A [`crate::sampling::thread_roles::ThreadRole`]: 0 (Java) for walked stacks, the
    /// role of a thread that is not walked otherwise (`num_frames` is then
    /// [`crate::sampling::signal_handler::NOT_A_JAVA_THREAD`]).
    pub(crate) role: u8,
    /// How the native walk ended (an `otelprof_native_frames::walk::End`; 0: no walk).
    pub(crate) native_end: u8,
    /// Interned class name of the leaf frame ([`crate::jvm::class_names`]): the allocated class,
    /// or the class of the contended monitor. 0 for none.
    pub(crate) class_id: u32,
    /// Kernel frame addresses that follow the header (leaf first), then native ones.
    pub(crate) kernel_frames: u16,
    pub(crate) native_frames: u16,
    /// Zero (explicit padding, so every byte of a record is initialised).
    pub(crate) reserved: u32,
    /// The span the thread was working for.
    pub(crate) context: SpanContext,
    /// An allocation sample kept for the live heap: a JNI weak global reference to the
    /// object, which whoever drains the record owns (and must delete); 0 for none.
    pub(crate) object: u64,
    /// The sampled object's size in bytes (allocation samples).
    pub(crate) size: u64,
    /// The live heap's sampling interval the object was kept at (bytes, at most a jint):
    /// its inclusion probability is `1 - exp(-size / live_interval)`.
    pub(crate) live_interval: u32,
    /// Garbage collection pauses finished before the allocation (wrapping): the collections
    /// that count as survived are the later ones ([`crate::engines::gc::finished`]).
    pub(crate) gc_seq: u32,
}

const WORD: usize = std::mem::size_of::<u64>();
const HEADER_WORDS: usize = std::mem::size_of::<RecordHeader>() / WORD;
const FRAME_WORDS: usize = std::mem::size_of::<AsgctCallFrame>() / WORD;
const _: () = assert!(std::mem::size_of::<RecordHeader>().is_multiple_of(WORD));
const _: () = assert!(std::mem::size_of::<AsgctCallFrame>() == 2 * WORD);

struct Arena {
    words: Box<[UnsafeCell<u64>]>,
    /// Words in use. Written by whoever owns the arena: the lock holder for the active arena,
    /// the drainer for the inactive one.
    len: UnsafeCell<usize>,
}

impl Arena {
    fn new(words: usize) -> Arena {
        Arena {
            words: (0..words).map(|_| UnsafeCell::new(0)).collect(),
            len: UnsafeCell::new(0),
        }
    }

    fn base(&self) -> *mut u64 {
        // UnsafeCell<u64> has the layout of u64, so the slice is a u64 array.
        self.words.as_ptr() as *mut u64
    }
}

struct Shard {
    lock: AtomicBool,
    active: AtomicUsize,
    scratch: Box<[UnsafeCell<AsgctCallFrame>]>,
    /// Kernel then native frame addresses.
    pcs: Box<[UnsafeCell<u64>]>,
    arenas: [Arena; 2],
}

/// Kernel and native frame addresses a record holds at most.
pub(crate) const MAX_PCS: usize = 192;

/// The scratch arrays a writer fills, under the shard's lock.
pub(crate) struct Scratch<'a> {
    /// Room for `capacity` Java frames.
    pub(crate) frames: *mut AsgctCallFrame,
    pub(crate) capacity: i32,
    /// Kernel frame addresses first, then native ones; the header says how many of each.
    pub(crate) pcs: &'a mut [u64],
}

pub(crate) struct SampleBuffer {
    shards: Box<[Shard]>,
    /// Held for the whole of a drain, so that two drains never read the same inactive arena.
    draining: AtomicBool,
    /// Rung by a write that takes an arena past half full: the drainer sleeps on it.
    doorbell: Doorbell,
}

// SAFETY: every UnsafeCell in a shard is only touched by the holder of `lock` (scratch, the
// active arena) or by the drainer that owns the inactive arena after swapping `active` under
// `lock` (see `drain`). Drains are serialised by `draining`.
unsafe impl Sync for SampleBuffer {}
// SAFETY: as above; the buffer owns its memory.
unsafe impl Send for SampleBuffer {}

/// Why a sample was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteError {
    /// Every shard was locked by another handler or by the drainer.
    Contended,
    /// The shard's active arena had no room for this record.
    Full,
}

/// Counts what became of a write: one more of `samples`, or of the reason it was dropped.
/// Returns whether the record was stored.
///
/// # Signal safety
/// Relaxed atomic adds.
#[inline]
pub(crate) fn counted(result: Result<(), WriteError>) -> bool {
    match result {
        Ok(()) => {
            stats::bump(&COUNTERS.samples);
            true
        }
        Err(WriteError::Full) => {
            stats::bump(&COUNTERS.dropped_buffer_full);
            false
        }
        Err(WriteError::Contended) => {
            stats::bump(&COUNTERS.dropped_contended);
            false
        }
    }
}

/// A record read back by the aggregator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record<'a> {
    pub(crate) header: RecordHeader,
    /// Kernel frame addresses, leaf first.
    pub(crate) kernel: &'a [u64],
    /// Native frame addresses, leaf first: the interrupted pc, then return addresses.
    pub(crate) native: &'a [u64],
    pub(crate) frames: &'a [AsgctCallFrame],
}

impl SampleBuffer {
    /// `shards` shards with `max_depth` scratch frames and two arenas of `arena_bytes` each.
    pub(crate) fn new(shards: usize, max_depth: usize, arena_bytes: usize) -> SampleBuffer {
        let null = AsgctCallFrame {
            lineno: 0,
            method_id: std::ptr::null_mut(),
        };
        let shards = (0..shards.max(1))
            .map(|_| Shard {
                lock: AtomicBool::new(false),
                active: AtomicUsize::new(0),
                scratch: (0..max_depth.max(1))
                    .map(|_| UnsafeCell::new(null))
                    .collect(),
                pcs: (0..MAX_PCS).map(|_| UnsafeCell::new(0)).collect(),
                arenas: [
                    Arena::new(arena_bytes / WORD),
                    Arena::new(arena_bytes / WORD),
                ],
            })
            .collect();
        SampleBuffer {
            shards,
            draining: AtomicBool::new(false),
            doorbell: Doorbell::new(),
        }
    }

    /// The most frames one record can hold (the scratch array's size).
    pub(crate) fn max_frames(&self) -> u32 {
        self.shards
            .first()
            .map_or(1, |s| u32::try_from(s.scratch.len()).unwrap_or(u32::MAX))
    }

    /// Stores one sample. `walk` receives the scratch frame array (pointer and capacity), fills
    /// it, and returns the AsyncGetCallTrace result: the number of frames, or a negative code.
    ///
    /// # Signal safety
    /// Async-signal-safe if `walk` is: no allocation, no blocking (one `compare_exchange` per
    /// shard tried), no panics (bounds-checked copies only).
    #[inline]
    pub(crate) fn write(
        &self,
        first_shard: usize,
        header: RecordHeader,
        walk: impl FnOnce(*mut AsgctCallFrame, i32) -> i32,
    ) -> Result<(), WriteError> {
        self.write_mixed(first_shard, header, |_, scratch| {
            walk(scratch.frames, scratch.capacity)
        })
    }

    /// Stores one sample with native and kernel frames: `fill` receives the header (to set
    /// `kernel_frames`, `native_frames` and `native_end`) and the scratch arrays, fills them,
    /// and returns the AsyncGetCallTrace result.
    ///
    /// # Signal safety
    /// As [`SampleBuffer::write`].
    #[inline]
    pub(crate) fn write_mixed(
        &self,
        first_shard: usize,
        mut header: RecordHeader,
        fill: impl FnOnce(&mut RecordHeader, Scratch<'_>) -> i32,
    ) -> Result<(), WriteError> {
        let n = self.shards.len();
        let shard = (0..n)
            .filter_map(|i| self.shards.get((first_shard.wrapping_add(i)) % n))
            .find(|s| {
                s.lock
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(WriteError::Contended)?;
        let result = Self::write_locked(shard, &mut header, fill);
        shard.lock.store(false, Ordering::Release);
        let half_full = result?;
        if half_full {
            self.doorbell.ring();
        }
        Ok(())
    }

    /// Sleeps until a write takes an arena past half full or [`SampleBuffer::wake`] is called,
    /// or for `timeout`, unless `asked` says the drainer has work already (see
    /// [`Doorbell::wait`]). Returns whether an arena asked for the drain.
    pub(crate) fn wait_for_drain(
        &self,
        timeout: std::time::Duration,
        asked: impl FnOnce() -> bool,
    ) -> bool {
        self.doorbell.wait(timeout, asked)
    }

    /// Asks the drainer to drain soon, as a write past an arena's middle does.
    ///
    /// # Signal safety
    /// As [`Doorbell::ring`].
    #[inline]
    pub(crate) fn ask_for_drain(&self) {
        self.doorbell.ring();
    }

    /// Ends the drainer's [`SampleBuffer::wait_for_drain`] now (a stop, a dump).
    pub(crate) fn wake(&self) {
        self.doorbell.wake();
    }

    /// Returns whether the record took the arena past half full.
    fn write_locked(
        shard: &Shard,
        header: &mut RecordHeader,
        fill: impl FnOnce(&mut RecordHeader, Scratch<'_>) -> i32,
    ) -> Result<bool, WriteError> {
        let capacity = i32::try_from(shard.scratch.len()).unwrap_or(i32::MAX);
        let scratch = shard.scratch.as_ptr() as *mut AsgctCallFrame;
        // SAFETY: we hold the shard lock, which owns the scratch arrays; UnsafeCell<u64> has
        // the layout of u64.
        let pcs = unsafe {
            std::slice::from_raw_parts_mut(shard.pcs.as_ptr() as *mut u64, shard.pcs.len())
        };
        header.kernel_frames = 0;
        header.native_frames = 0;
        let got = fill(
            header,
            Scratch {
                frames: scratch,
                capacity,
                pcs,
            },
        );
        let frames = if got > 0 {
            got.min(capacity) as usize
        } else {
            0
        };
        header.num_frames = if got > 0 { frames as i32 } else { got };
        let kernel = usize::from(header.kernel_frames).min(MAX_PCS);
        let native = usize::from(header.native_frames).min(MAX_PCS - kernel);
        header.kernel_frames = kernel as u16;
        header.native_frames = native as u16;
        let pc_words = kernel + native;

        let arena = shard
            .arenas
            .get(shard.active.load(Ordering::Relaxed) & 1)
            .ok_or(WriteError::Full)?;
        let need = HEADER_WORDS + pc_words + frames * FRAME_WORDS;
        // SAFETY: we hold the shard lock, which owns the active arena's `len`.
        let len = unsafe { &mut *arena.len.get() };
        if arena.words.len().saturating_sub(*len) < need {
            return Err(WriteError::Full);
        }
        // SAFETY: `len + need <= words.len()` was checked above, so the copies stay inside
        // the arena; the source ranges are a local, `pc_words <= MAX_PCS` entries of the pcs
        // scratch and `frames <= scratch.len()` frame scratch entries; arena words are 8-byte
        // aligned, as are RecordHeader and AsgctCallFrame.
        unsafe {
            let dst = arena.base().add(*len);
            std::ptr::write(dst as *mut RecordHeader, *header);
            std::ptr::copy_nonoverlapping(
                shard.pcs.as_ptr() as *const u64,
                dst.add(HEADER_WORDS),
                pc_words,
            );
            std::ptr::copy_nonoverlapping(
                scratch as *const AsgctCallFrame,
                dst.add(HEADER_WORDS + pc_words) as *mut AsgctCallFrame,
                frames,
            );
        }
        let half = arena.words.len() / 2;
        let crossed = *len < half && *len + need >= half;
        *len += need;
        Ok(crossed)
    }

    /// Hands every stored record to `f`, oldest first per shard, and empties the buffer.
    /// Returns false (reading nothing) if another drain is under way.
    pub(crate) fn drain(&self, mut f: impl FnMut(Record<'_>)) -> bool {
        if self
            .draining
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        for shard in self.shards.iter() {
            // Swap arenas under the lock. Handlers hold it for microseconds; yield meanwhile.
            while shard
                .lock
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                std::thread::yield_now();
            }
            let old = shard.active.load(Ordering::Relaxed) & 1;
            shard.active.store(old ^ 1, Ordering::Relaxed);
            shard.lock.store(false, Ordering::Release);

            let Some(arena) = shard.arenas.get(old) else {
                continue;
            };
            // SAFETY: the arena is inactive: no handler writes to it until the next swap, which
            // only a drain performs, and we hold `draining`.
            let len = unsafe { &mut *arena.len.get() };
            let mut at = 0;
            while at + HEADER_WORDS <= *len {
                // SAFETY: records were written back to back by `write_locked`, each a header
                // followed by `num_frames` frames inside `len`; we re-check the bound below.
                let header = unsafe { std::ptr::read(arena.base().add(at) as *const RecordHeader) };
                let frames = header.num_frames.max(0) as usize;
                let (kernel, native) = (
                    usize::from(header.kernel_frames),
                    usize::from(header.native_frames),
                );
                let pcs_at = at + HEADER_WORDS;
                let frames_at = pcs_at + kernel + native;
                let end = frames_at + frames * FRAME_WORDS;
                if end > *len {
                    break;
                }
                // SAFETY: `pcs_at .. end` is inside the arena and holds `kernel + native`
                // initialised u64 values, then `frames` initialised, aligned AsgctCallFrame
                // values, as `write_locked` wrote them.
                let (pcs, frames) = unsafe {
                    (
                        std::slice::from_raw_parts(arena.base().add(pcs_at), kernel + native),
                        std::slice::from_raw_parts(
                            arena.base().add(frames_at) as *const AsgctCallFrame,
                            frames,
                        ),
                    )
                };
                let (kernel, native) = pcs.split_at(kernel.min(pcs.len()));
                f(Record {
                    header,
                    kernel,
                    native,
                    frames,
                });
                at = end;
            }
            *len = 0;
        }
        self.draining.store(false, Ordering::Release);
        true
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn fill(frames: usize) -> impl FnOnce(*mut AsgctCallFrame, i32) -> i32 {
        move |buf, cap| {
            let n = frames.min(cap as usize);
            for i in 0..n {
                // SAFETY: i < cap, the capacity the buffer handed us.
                unsafe {
                    *buf.add(i) = AsgctCallFrame {
                        lineno: i as i32,
                        method_id: (0x1000 + i) as _,
                    }
                };
            }
            n as i32
        }
    }

    #[test]
    fn records_round_trip_and_drain_empties() {
        let b = SampleBuffer::new(2, 8, 4096);
        let h = RecordHeader {
            tid: 5,
            serial: 9,
            weight: 2,
            ..Default::default()
        };
        b.write(0, h, fill(3)).unwrap();
        b.write(1, h, |_, _| -2).unwrap();
        b.write(0, h, fill(100)).unwrap(); // truncated to the 8-frame scratch
        let mut seen = Vec::new();
        b.drain(|r| {
            seen.push((
                r.header.num_frames,
                r.frames.len(),
                r.frames.first().map(|f| f.lineno),
            ))
        });
        seen.sort();
        assert_eq!(seen, vec![(-2, 0, None), (3, 3, Some(0)), (8, 8, Some(0))]);
        let mut again = 0;
        b.drain(|_| again += 1);
        assert_eq!(again, 0);
    }

    #[test]
    fn the_write_that_fills_an_arena_half_rings_the_drainer_once() {
        use std::time::{Duration, Instant};
        // A header and 8 frames: 4096 bytes hold a few such records.
        let b = SampleBuffer::new(1, 8, 4096);
        let h = RecordHeader::default();
        let record_bytes = (HEADER_WORDS + 8 * FRAME_WORDS) * WORD;
        let below_half = (4096 / 2 - 1) / record_bytes;
        for _ in 0..below_half {
            b.write(0, h, fill(8)).unwrap();
        }
        assert!(!b.wait_for_drain(Duration::from_millis(20), || false));
        // The next write passes the middle; the ones after it do not ring again.
        b.write(0, h, fill(8)).unwrap();
        b.write(0, h, fill(8)).unwrap();
        let start = Instant::now();
        assert!(b.wait_for_drain(Duration::from_secs(10), || false));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!b.wait_for_drain(Duration::from_millis(20), || false));
        // After a drain the arenas start empty, and filling one rings again.
        let mut n = 0;
        b.drain(|_| n += 1);
        assert_eq!(n, below_half + 2);
        for _ in 0..=below_half {
            b.write(0, h, fill(8)).unwrap();
        }
        assert!(b.wait_for_drain(Duration::from_secs(10), || false));
    }

    #[test]
    fn mixed_records_carry_kernel_and_native_addresses_before_java_frames() {
        let b = SampleBuffer::new(1, 8, 4096);
        let h = RecordHeader {
            tid: 5,
            ..Default::default()
        };
        b.write_mixed(0, h, |header, scratch| {
            scratch.pcs[..2].copy_from_slice(&[0xffff_0001, 0xffff_0002]);
            scratch.pcs[2..5].copy_from_slice(&[0x1, 0x2, 0x3]);
            header.kernel_frames = 2;
            header.native_frames = 3;
            header.native_end = 1;
            fill(2)(scratch.frames, scratch.capacity)
        })
        .unwrap();
        // More than the scratch holds is cut to it.
        b.write_mixed(0, h, |header, _| {
            header.kernel_frames = 1000;
            header.native_frames = 1000;
            -3
        })
        .unwrap();
        b.write(0, h, fill(1)).unwrap();
        let mut seen = Vec::new();
        b.drain(|r| {
            seen.push((
                r.kernel.to_vec(),
                r.native.to_vec(),
                r.frames.len(),
                r.header.native_end,
            ))
        });
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[0],
            (vec![0xffff_0001, 0xffff_0002], vec![0x1, 0x2, 0x3], 2, 1)
        );
        assert_eq!(
            (seen[1].0.len(), seen[1].1.len(), seen[1].2),
            (MAX_PCS, 0, 0)
        );
        assert_eq!((seen[2].0.len(), seen[2].1.len(), seen[2].2), (0, 0, 1));
    }

    #[test]
    fn full_arena_drops_and_contended_shards_report() {
        let b = SampleBuffer::new(1, 16, 256);
        let h = RecordHeader::default();
        let mut stored = 0;
        loop {
            match b.write(0, h, fill(4)) {
                Ok(()) => stored += 1,
                Err(e) => {
                    assert_eq!(e, WriteError::Full);
                    break;
                }
            }
        }
        // 256 bytes = 32 words; each record is the header plus 4 frames of 2 words.
        assert_eq!(stored, 32 / (HEADER_WORDS + 4 * FRAME_WORDS));
        assert!(stored >= 1);
        b.shards[0].lock.store(true, Ordering::Release);
        assert_eq!(b.write(0, h, fill(1)), Err(WriteError::Contended));
    }

    #[test]
    fn concurrent_writers_and_drainer_lose_nothing_they_report_stored() {
        use std::sync::atomic::AtomicU64;
        use std::sync::Arc;
        let buf = Arc::new(SampleBuffer::new(4, 32, 1 << 16));
        let stored = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let (buf, stored, stop) = (buf.clone(), stored.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let h = RecordHeader {
                            serial: i,
                            tid: w,
                            ..Default::default()
                        };
                        if buf.write(w as usize, h, fill((i % 20) as usize)).is_ok() {
                            stored.fetch_add(1, Ordering::Relaxed);
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let (mut drained, mut bad) = (0u64, 0u64);
        for _ in 0..200 {
            assert!(buf.drain(|r| {
                drained += 1;
                if r.frames.len() as u64 != r.header.serial % 20 {
                    bad += 1;
                }
            }));
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        buf.drain(|_| drained += 1);
        assert_eq!(bad, 0);
        assert!(drained > 1000, "{drained}");
        assert_eq!(drained, stored.load(Ordering::Relaxed));
    }
}
