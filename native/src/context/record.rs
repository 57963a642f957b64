//! The thread-context record: one per Java thread (or virtual thread) that runs traced code,
//! laid out as the OpenTelemetry thread-context record (OTEP 4947) and followed by fields
//! private to otelprof. The layout, and who writes which field when, are described in
//! docs/context-protocol.md (Record layout, Write protocol); the offsets below are asserted at
//! compile time and checked by the shim against `layout0()` before it writes anything.
//!
//! Records are allocated here, in chunks that are never freed: a late signal, or an external
//! reader following `otel_thread_ctx_v1`, can never touch freed memory. A thread's record goes
//! back to a free list when the thread ends.

use std::sync::Mutex;

/// Size of the OTEP part of the record (header + attribute bytes). OTEP 4947 recommends at
/// most 640 bytes; 256 keeps a record in four cache lines.
pub(crate) const OTEP_BYTES: usize = 256;
/// Attribute bytes available after the 28-byte OTEP header.
pub(crate) const ATTRS_CAPACITY: usize = OTEP_BYTES - 28;

/// `threadlocal.attribute_key_map` published in the process context: index -> key.
pub(crate) const ATTRIBUTE_KEYS: &[&str] = &["local_root_span_id"];

/// One thread's context. Field offsets are part of the contract with the Java shim
/// (`otelprof.internal.ContextRecordLayout`) and with out-of-process readers (OTEP 4947).
#[repr(C, align(64))]
pub(crate) struct ContextRecord {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    /// 1 when the record holds a complete context; anything else means "no context".
    pub(crate) valid: u8,
    /// W3C trace flags; bit 0 = sampled.
    pub(crate) trace_flags: u8,
    pub(crate) attrs_size: u16,
    pub(crate) attrs: [u8; ATTRS_CAPACITY],
    // ---- otelprof private (not part of OTEP 4947) ----
    /// Local root span id as a native-endian u64: the Java `long` whose big-endian bytes are
    /// the W3C span id (`Long.parseUnsignedLong(hex, 16)`).
    pub(crate) local_root_span_id: u64,
    /// Samples taken on this record's thread, bumped by the signal handler. The shim compares
    /// it across a scope to learn whether the span was sampled, and only then reports its
    /// endpoint name (a JNI call per sampled root, not per root).
    pub(crate) samples: u32,
    _pad: u32,
    _reserved: [u8; 48],
}

pub(crate) const RECORD_SIZE: usize = std::mem::size_of::<ContextRecord>();
const _: () = assert!(RECORD_SIZE == 320);
const _: () = assert!(std::mem::offset_of!(ContextRecord, trace_id) == 0);
const _: () = assert!(std::mem::offset_of!(ContextRecord, span_id) == 16);
const _: () = assert!(std::mem::offset_of!(ContextRecord, valid) == 24);
const _: () = assert!(std::mem::offset_of!(ContextRecord, trace_flags) == 25);
const _: () = assert!(std::mem::offset_of!(ContextRecord, attrs_size) == 26);
const _: () = assert!(std::mem::offset_of!(ContextRecord, attrs) == 28);
const _: () = assert!(std::mem::offset_of!(ContextRecord, local_root_span_id) == OTEP_BYTES);
const _: () = assert!(std::mem::offset_of!(ContextRecord, samples) == OTEP_BYTES + 8);

impl ContextRecord {
    const EMPTY: ContextRecord = ContextRecord {
        trace_id: [0; 16],
        span_id: [0; 8],
        valid: 0,
        trace_flags: 0,
        attrs_size: 0,
        attrs: [0; ATTRS_CAPACITY],
        local_root_span_id: 0,
        samples: 0,
        _pad: 0,
        _reserved: [0; 48],
    };
}

/// Records handed to threads. Chunks are leaked on purpose (see the module docs).
pub(crate) struct RecordPool {
    free: Mutex<Vec<usize>>,
}

const CHUNK: usize = 64;

impl RecordPool {
    pub(crate) const fn new() -> RecordPool {
        RecordPool {
            free: Mutex::new(Vec::new()),
        }
    }

    /// A zeroed record (`valid == 0`).
    pub(crate) fn take(&self) -> *mut ContextRecord {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.is_empty() {
            let chunk: &'static mut [ContextRecord] = Box::leak(
                (0..CHUNK)
                    .map(|_| ContextRecord::EMPTY)
                    .collect::<Box<[_]>>(),
            );
            free.extend(
                chunk
                    .iter_mut()
                    .rev()
                    .map(|r| r as *mut ContextRecord as usize),
            );
        }
        let p = free.pop().unwrap_or(0) as *mut ContextRecord;
        if !p.is_null() {
            // SAFETY: a record from our own chunks, not in use by any thread.
            unsafe { p.write(ContextRecord::EMPTY) };
        }
        p
    }

    /// Returns a record whose thread has ended.
    ///
    /// # Safety
    /// `record` is null or came from [`RecordPool::take`] and no thread publishes it any more.
    pub(crate) unsafe fn give_back(&self, record: *mut ContextRecord) {
        if record.is_null() {
            return;
        }
        // SAFETY: the record is ours; mark it invalid before anyone can take it again.
        unsafe { std::ptr::write_volatile(&mut (*record).valid, 0) };
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record as usize);
    }
}

impl Default for RecordPool {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) static RECORDS: RecordPool = RecordPool::new();
