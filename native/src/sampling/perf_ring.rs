//! Reading a thread's perf event ring buffer in its signal handler
//! ([`super::perf_events`]).
//!
//! The kernel appends one `PERF_RECORD_SAMPLE` per overflow (header, then the call chain:
//! a count and that many addresses, context markers such as `PERF_CONTEXT_KERNEL` among
//! them), and a `PERF_RECORD_LOST` with a count when the ring was full. The handler of the
//! event's own thread is the only reader: it reads `data_head` (then an acquire fence), walks
//! the records from `data_tail`, and stores `data_tail = data_head` after a release fence, as
//! perf_event_open(2) prescribes. Each record counts one interval, each lost record its count:
//! together they are the sample's weight. The sample keeps the kernel chain of the last
//! record (the records of one signal share the user stack the handler walks: the thread ran
//! no user code between them).
//!
//! # Signal safety
//! Plain loads and stores into the mapped ring, two fences. No system call. Every offset is
//! masked into the data area, whose size is checked first; at most [`MAX_RECORDS`] records
//! are read per call; indexing and unchecked arithmetic are denied.
#![deny(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use std::sync::atomic::{fence, Ordering};

use crate::sys::perf::{ring_page, PERF_CONTEXT_MAX, PERF_RECORD_LOST, PERF_RECORD_SAMPLE};

/// Records read per drain at most (a data page holds fewer).
const MAX_RECORDS: u32 = 512;
/// The largest data area accepted (the agent maps one page).
const MAX_DATA: u64 = 1 << 20;

/// What one drain found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Drained {
    /// Sample records: one interval each.
    pub(crate) records: u64,
    /// Records the kernel could not write (ring full): one interval each.
    pub(crate) lost: u64,
    /// Kernel frames of the last sample record written to the output, leaf first.
    pub(crate) kernel_frames: usize,
}

impl Drained {
    /// The intervals the sample stands for.
    ///
    /// # Signal safety
    /// Arithmetic.
    pub(crate) fn intervals(&self) -> u64 {
        self.records.saturating_add(self.lost)
    }
}

/// Reads a `u64` of the ring page at byte `offset`.
///
/// # Safety
/// `base + offset` is an aligned word inside the live ring mapping.
#[inline]
unsafe fn word(base: usize, offset: u64) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { std::ptr::read_volatile(base.wrapping_add(offset as usize) as *const u64) }
}

/// Drains the ring at `ring` (the base of its mapping, or 0 for none): counts its records and
/// copies the kernel frames of the last sample record to `kernel`.
///
/// # Safety
/// `ring` is 0 or the base of a live ring mapping (header page and data area) of an event
/// whose records only the calling thread consumes.
pub(crate) unsafe fn drain(ring: usize, kernel: &mut [u64]) -> Drained {
    let mut drained = Drained::default();
    if ring == 0 {
        return drained;
    }
    // SAFETY: the header page's fields, per this function's contract.
    let (head, tail, data_offset, data_size) = unsafe {
        (
            word(ring, ring_page::DATA_HEAD as u64),
            word(ring, ring_page::DATA_TAIL as u64),
            word(ring, ring_page::DATA_OFFSET as u64),
            word(ring, ring_page::DATA_SIZE as u64),
        )
    };
    // Records written before `data_head` was published are visible after this fence.
    fence(Ordering::Acquire);
    if data_size == 0 || !data_size.is_power_of_two() || data_size > MAX_DATA || data_offset == 0 {
        return drained;
    }
    let mask = data_size.wrapping_sub(1);
    // A word of the data area at ring position `pos` (records are 8-byte aligned, so a word
    // never straddles the wrap).
    let at = |pos: u64| -> u64 {
        // SAFETY: the masked offset is inside the data area of `data_size` bytes at
        // `data_offset`, 8-byte aligned.
        unsafe { word(ring, data_offset.wrapping_add(pos & mask & !7)) }
    };
    let mut pos = tail;
    let mut budget = MAX_RECORDS;
    while pos < head && budget > 0 {
        budget = budget.wrapping_sub(1);
        let header = at(pos);
        let kind = (header & 0xffff_ffff) as u32;
        let size = header >> 48;
        if size < 8 || size & 7 != 0 || size > data_size {
            // A corrupt header: skip to the head rather than read nonsense.
            break;
        }
        if kind == PERF_RECORD_SAMPLE {
            drained.records = drained.records.wrapping_add(1);
            let nr = at(pos.wrapping_add(8));
            let room = size.saturating_sub(16) / 8;
            let mut n = 0;
            for i in 0..nr.min(room) {
                let ip = at(pos.wrapping_add(16).wrapping_add(i.wrapping_mul(8)));
                if ip >= PERF_CONTEXT_MAX {
                    continue;
                }
                if let Some(slot) = kernel.get_mut(n) {
                    *slot = ip;
                    n = n.wrapping_add(1);
                }
            }
            drained.kernel_frames = n;
        } else if kind == PERF_RECORD_LOST && size >= 24 {
            drained.lost = drained.lost.saturating_add(at(pos.wrapping_add(16)));
        }
        pos = pos.wrapping_add(size);
    }
    // Our reads of the records happen before the kernel may overwrite them.
    fence(Ordering::Release);
    // SAFETY: the header page's `data_tail`, which only this thread writes.
    unsafe { std::ptr::write_volatile(ring.wrapping_add(ring_page::DATA_TAIL) as *mut u64, head) };
    drained
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    /// A fake ring: a 4 KiB header page and a 256-byte data area, records written by hand.
    struct FakeRing {
        words: Vec<u64>,
    }

    const DATA_WORDS: usize = 32;

    impl FakeRing {
        fn new() -> FakeRing {
            let mut words = vec![0u64; 512 + DATA_WORDS];
            words[ring_page::DATA_OFFSET / 8] = 4096;
            words[ring_page::DATA_SIZE / 8] = (DATA_WORDS * 8) as u64;
            FakeRing { words }
        }

        fn base(&mut self) -> usize {
            self.words.as_mut_ptr() as usize
        }

        fn head(&self) -> u64 {
            self.words[ring_page::DATA_HEAD / 8]
        }

        fn push(&mut self, record: &[u64]) {
            let head = self.head();
            for (i, w) in record.iter().enumerate() {
                let pos = (head as usize / 8 + i) % DATA_WORDS;
                self.words[512 + pos] = *w;
            }
            self.words[ring_page::DATA_HEAD / 8] = head + 8 * record.len() as u64;
        }

        fn sample(&mut self, chain: &[u64]) {
            let size = 16 + 8 * chain.len() as u64;
            let mut r = vec![
                size << 48 | u64::from(PERF_RECORD_SAMPLE),
                chain.len() as u64,
            ];
            r.extend_from_slice(chain);
            self.push(&r);
        }
    }

    #[test]
    fn records_lost_counts_and_the_last_chain_are_read_across_the_wrap() {
        let mut ring = FakeRing::new();
        let mut kernel = [0u64; 4];
        // SAFETY: the fake ring's words are live and laid out as the kernel's.
        let empty = unsafe { drain(ring.base(), &mut kernel) };
        assert_eq!(empty, Drained::default());
        let ctx = PERF_CONTEXT_MAX + 0x100; // a context marker such as PERF_CONTEXT_KERNEL
        ring.sample(&[ctx, 0xffff_1111, 0xffff_2222]);
        ring.push(&[24 << 48 | u64::from(PERF_RECORD_LOST), 7, 5]);
        ring.sample(&[
            ctx,
            0xffff_3333,
            0xffff_4444,
            0xffff_5555,
            0xffff_6666,
            0xffff_7777,
        ]);
        // SAFETY: as above.
        let d = unsafe { drain(ring.base(), &mut kernel) };
        assert_eq!((d.records, d.lost, d.intervals()), (2, 5, 7));
        // The last record's chain, cut to the output's room, markers skipped.
        assert_eq!(d.kernel_frames, 4);
        assert_eq!(kernel, [0xffff_3333, 0xffff_4444, 0xffff_5555, 0xffff_6666]);
        assert_eq!(ring.words[ring_page::DATA_TAIL / 8], ring.head());
        // Past the end of the 256-byte area: records wrap around and still read whole.
        for i in 0..10u64 {
            ring.sample(&[ctx, 0xffff_0000 + i]);
            // SAFETY: as above.
            let d = unsafe { drain(ring.base(), &mut kernel) };
            assert_eq!(
                (d.records, d.kernel_frames, kernel[0]),
                (1, 1, 0xffff_0000 + i)
            );
        }
        // A corrupt size ends the drain without reading past it; the tail still moves on.
        ring.push(&[3 << 48 | u64::from(PERF_RECORD_SAMPLE)]);
        // SAFETY: as above.
        let d = unsafe { drain(ring.base(), &mut kernel) };
        assert_eq!(d.records, 0);
        assert_eq!(ring.words[ring_page::DATA_TAIL / 8], ring.head());
        // SAFETY: a null ring is allowed.
        assert_eq!(unsafe { drain(0, &mut kernel) }, Drained::default());
    }
}
