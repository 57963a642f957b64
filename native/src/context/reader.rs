//! Reading a context record: on its own thread (the signal handler, a JVMTI callback: [`read`])
//! or from another one (the wall-clock thread: [`snapshot`], [`has_span`]). Who reads the
//! record and what each reader may assume about the writer is in docs/context-protocol.md,
//! Readers; the reasoning for each function's memory accesses is beside it.

use std::sync::atomic::{compiler_fence, AtomicU32, AtomicU64, AtomicU8, Ordering};

use crate::context::record::{ContextRecord, OTEP_BYTES};

/// What the signal handler copies out of a record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct SpanContext {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) local_root_span_id: u64,
    pub(crate) trace_flags: u8,
    /// 1 if a valid record was read; 0 if the thread has no record or it was invalid.
    pub(crate) present: u8,
    /// 1 if the thread had a record but it was mid-write (`valid != 1`).
    pub(crate) torn: u8,
    _pad: [u8; 5],
}

impl SpanContext {
    pub(crate) fn sampled(&self) -> bool {
        self.trace_flags & 1 == 1
    }

    /// The span part of a sample's identity, `None` without a span.
    pub(crate) fn key(&self) -> Option<SpanKey> {
        if self.present == 0 {
            return None;
        }
        let link = self.sampled().then_some(otel_bridge::Link {
            trace_id: self.trace_id,
            span_id: self.span_id,
        });
        Some(SpanKey {
            link,
            local_root_span_id: self.local_root_span_id,
        })
    }
}

/// The span part of a sample's identity: what profiles group samples by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SpanKey {
    /// Trace and span, only for sampled traces (unsampled ones get no link).
    pub(crate) link: Option<otel_bridge::Link>,
    pub(crate) local_root_span_id: u64,
}

/// Reads `record` as the interrupted thread left it, and counts the sample in it.
///
/// # Safety
/// `record` is null or points to a pool record ([`crate::context::record::RecordPool`], never
/// freed), and the caller runs on the thread that owns it (in its signal handler, or in a
/// JVMTI callback on it).
///
/// # Signal safety
/// Plain loads and one store to memory that is never freed; a compiler fence orders the
/// `valid` load before the field loads (the writer is the interrupted thread itself, so no
/// CPU fence is needed: OTEP 4947 "signal handler-like semantics").
#[inline]
pub(crate) unsafe fn read(record: *mut ContextRecord) -> SpanContext {
    let mut out = SpanContext::default();
    if record.is_null() {
        return out;
    }
    // SAFETY: per this function's contract the record is live memory, written only by this
    // thread (which we interrupted).
    unsafe { count_sample(record) };
    // SAFETY: as above.
    let r = unsafe { &*record };
    // SAFETY: volatile reads of plain bytes of a live record.
    let valid = unsafe { std::ptr::read_volatile(&r.valid) };
    compiler_fence(Ordering::SeqCst);
    if valid != 1 {
        // A record exists but holds no (complete) context: either no span is current, or the
        // signal landed mid-write. The writer clears `valid` only during a write or when the
        // context is removed; `writes` tells the two apart only approximately, so both count.
        out.torn = u8::from(valid != 0);
        return out;
    }
    // SAFETY: as above.
    unsafe {
        out.trace_id = std::ptr::read_volatile(&r.trace_id);
        out.span_id = std::ptr::read_volatile(&r.span_id);
        out.trace_flags = std::ptr::read_volatile(&r.trace_flags);
        out.local_root_span_id = std::ptr::read_volatile(&r.local_root_span_id);
    }
    out.present = 1;
    out
}

/// Counts a sample in `record` (the shim compares the count across a scope).
///
/// # Safety
/// `record` points to a live pool record.
///
/// # Signal safety
/// One lock-free atomic add (the wall-clock thread may count in the same record).
#[inline]
unsafe fn count_sample(record: *mut ContextRecord) {
    // SAFETY: per the contract; AtomicU32 has u32's layout and `samples` is 4-aligned.
    let samples = unsafe { &*(std::ptr::addr_of!((*record).samples) as *const AtomicU32) };
    samples.fetch_add(1, Ordering::Relaxed);
}

/// Reads `record` from another thread than its owner: the wall-clock thread sampling a thread
/// that waits (blocked, waiting, sleeping), which writes no context while it waits. In case it
/// woke up and is writing, the fields are read twice and must agree (a write clears `valid`
/// first, so a write in progress shows as invalid or as a difference); otherwise the sample
/// carries no span and counts as torn. Counts the sample in the record.
///
/// # Safety
/// `record` is null or points to a pool record ([`crate::context::record::RecordPool`], never
/// freed).
pub(crate) unsafe fn snapshot(record: *mut ContextRecord) -> SpanContext {
    if record.is_null() {
        return SpanContext::default();
    }
    // SAFETY: per the contract.
    unsafe { count_sample(record) };
    let base = record as *const u8;
    // SAFETY: offsets inside the record (layout asserted above); the u64 fields are 8-aligned
    // (trace_id at 0, span_id at 16, local_root_span_id at 256; the record is 64-aligned).
    // Atomic views, because the owner may write concurrently.
    let read = || unsafe {
        let u64_at = |off: usize| (*(base.add(off) as *const AtomicU64)).load(Ordering::Acquire);
        let u8_at = |off: usize| (*(base.add(off) as *const AtomicU8)).load(Ordering::Acquire);
        (
            u8_at(24),
            [u64_at(0), u64_at(8), u64_at(16), u64_at(OTEP_BYTES)],
            u8_at(25),
        )
    };
    let first = read();
    std::sync::atomic::fence(Ordering::Acquire);
    let second = read();
    let (valid, words, flags) = first;
    let mut out = SpanContext::default();
    if first != second || valid != 1 {
        out.torn = u8::from(first != second || valid != 0);
        return out;
    }
    let [t0, t1, span, root] = words;
    out.trace_id[..8].copy_from_slice(&t0.to_ne_bytes());
    out.trace_id[8..].copy_from_slice(&t1.to_ne_bytes());
    out.span_id = span.to_ne_bytes();
    out.local_root_span_id = root;
    out.trace_flags = flags;
    out.present = 1;
    out
}

/// Whether `record` holds a span right now, as seen from another thread (the wall-clock
/// thread deciding whether a waiting thread is idle). A hint, not a sample: the owning thread
/// may change it at any moment, and the signal handler reads the record itself.
///
/// # Safety
/// `record` is null or points to a pool record ([`crate::context::record::RecordPool`], never
/// freed).
pub(crate) unsafe fn has_span(record: *const ContextRecord) -> bool {
    if record.is_null() {
        return false;
    }
    // SAFETY: per the contract. The byte is read atomically (AtomicU8 has u8's layout), since
    // its owner writes it concurrently; a stale answer only changes how often the thread is
    // sampled.
    let valid = unsafe { &*(std::ptr::addr_of!((*record).valid) as *const AtomicU8) };
    valid.load(Ordering::Relaxed) == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::record::RECORDS;

    #[test]
    fn read_sees_valid_records_only() {
        let p = RECORDS.take();
        // SAFETY: p is a live record from the pool.
        unsafe {
            assert_eq!(read(p), SpanContext::default());
            (*p).trace_id = [1; 16];
            (*p).span_id = [2; 8];
            (*p).trace_flags = 1;
            (*p).local_root_span_id = 0x1234;
            assert_eq!(read(p).present, 0, "not valid yet");
            (*p).valid = 1;
            let c = read(p);
            assert_eq!(
                (c.present, c.trace_id, c.span_id, c.local_root_span_id),
                (1, [1; 16], [2; 8], 0x1234)
            );
            assert!(c.sampled());
            (*p).valid = 2;
            assert_eq!(read(p).torn, 1);
            assert_eq!(read(std::ptr::null_mut()), SpanContext::default());
            assert_eq!((*p).samples, 4, "every read counts a sample");
            (*p).valid = 1;
            let s = snapshot(p);
            assert_eq!(
                (
                    s.present,
                    s.trace_id,
                    s.span_id,
                    s.local_root_span_id,
                    s.trace_flags
                ),
                (1, [1; 16], [2; 8], 0x1234, 1)
            );
            (*p).valid = 0;
            assert_eq!(snapshot(p).present, 0);
            assert_eq!(snapshot(std::ptr::null_mut()), SpanContext::default());
            assert_eq!((*p).samples, 6);
        }
        // SAFETY: taken above, published nowhere.
        unsafe { RECORDS.give_back(p) };
        let q = RECORDS.take();
        // SAFETY: as above.
        assert_eq!(unsafe { (*q).valid }, 0);
        // SAFETY: as above.
        unsafe { RECORDS.give_back(q) };
    }
}
