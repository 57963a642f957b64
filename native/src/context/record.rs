//! Span context published by Java threads and read by the signal handler.
//!
//! Each Java thread that runs traced code owns one [`ContextRecord`], laid out as the
//! OpenTelemetry thread-context record (OTEP 4947): trace id, span id, `valid`, trace flags,
//! attribute bytes; then fields private to otelprof. The Java shim writes it through a direct
//! `ByteBuffer` over the record (no JNI call per write): clear `valid`, store the fields, set
//! `valid`, with store-store fences in between; a switch to another span of the same trace,
//! local root and flags is a single aligned store of the span id. The handler runs on the same
//! thread it interrupts, so it sees either the old or the new complete record; a record read
//! while `valid == 0` yields no span (and is counted).
//!
//! Records are allocated here, in chunks that are never freed: a late signal, or an external
//! reader following `otel_thread_ctx_v1`, can never touch freed memory. A thread's record goes
//! back to a free list when the thread ends.
//!
//! The endpoint of a sample is the name of its local root span, which instrumentation often
//! changes after the span starts (`GET` becomes `GET /owners/{id}` once routing is done). So
//! the record carries only the local root span id; the shim reports `local root -> name` as it
//! learns it (and again when the local root's scope closes), and the aggregator applies the
//! latest name when it writes the profile ([`Endpoints`]).

use std::collections::HashMap;
use std::sync::atomic::{compiler_fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// Size of the OTEP part of the record (header + attribute bytes). OTEP 4947 recommends at
/// most 640 bytes; 256 keeps a record in four cache lines.
pub const OTEP_BYTES: usize = 256;
/// Attribute bytes available after the 28-byte OTEP header.
pub const ATTRS_CAPACITY: usize = OTEP_BYTES - 28;

/// `threadlocal.attribute_key_map` published in the process context: index -> key.
pub const ATTRIBUTE_KEYS: &[&str] = &["local_root_span_id"];

/// One thread's context. Field offsets are part of the contract with the Java shim
/// (`otelprof.internal.ContextRecordLayout`) and with out-of-process readers (OTEP 4947).
#[repr(C, align(64))]
pub struct ContextRecord {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// 1 when the record holds a complete context; anything else means "no context".
    pub valid: u8,
    /// W3C trace flags; bit 0 = sampled.
    pub trace_flags: u8,
    pub attrs_size: u16,
    pub attrs: [u8; ATTRS_CAPACITY],
    // ---- otelprof private (not part of OTEP 4947) ----
    /// Local root span id as a native-endian u64: the Java `long` whose big-endian bytes are
    /// the W3C span id (`Long.parseUnsignedLong(hex, 16)`).
    pub local_root_span_id: u64,
    /// Samples taken on this record's thread, bumped by the signal handler. The shim compares
    /// it across a scope to learn whether the span was sampled, and only then reports its
    /// endpoint name (a JNI call per sampled root, not per root).
    pub samples: u32,
    _pad: u32,
    _reserved: [u8; 48],
}

pub const RECORD_SIZE: usize = std::mem::size_of::<ContextRecord>();
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

/// What the signal handler copies out of a record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub local_root_span_id: u64,
    pub trace_flags: u8,
    /// 1 if a valid record was read; 0 if the thread has no record or it was invalid.
    pub present: u8,
    /// 1 if the thread had a record but it was mid-write (`valid != 1`).
    pub torn: u8,
    _pad: [u8; 5],
}

impl SpanContext {
    pub fn sampled(&self) -> bool {
        self.trace_flags & 1 == 1
    }
}

/// Reads `record` as the interrupted thread left it, and counts the sample in it.
///
/// # Safety
/// `record` is null or points to a record from [`RecordPool`] (never freed), and the caller
/// runs on the thread that owns it (in its signal handler, or in a JVMTI callback on it).
///
/// # Signal safety
/// Plain loads and one store to memory that is never freed; a compiler fence orders the
/// `valid` load before the field loads (the writer is the interrupted thread itself, so no
/// CPU fence is needed: OTEP 4947 "signal handler-like semantics").
#[inline]
pub unsafe fn read(record: *mut ContextRecord) -> SpanContext {
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
/// `record` is null or points to a record from [`RecordPool`] (never freed).
pub unsafe fn snapshot(record: *mut ContextRecord) -> SpanContext {
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
/// `record` is null or points to a record from [`RecordPool`] (never freed).
pub unsafe fn has_span(record: *const ContextRecord) -> bool {
    if record.is_null() {
        return false;
    }
    // SAFETY: per the contract. The byte is read atomically (AtomicU8 has u8's layout), since
    // its owner writes it concurrently; a stale answer only changes how often the thread is
    // sampled.
    let valid = unsafe { &*(std::ptr::addr_of!((*record).valid) as *const AtomicU8) };
    valid.load(Ordering::Relaxed) == 1
}

/// Records handed to threads. Chunks are leaked on purpose (see the module docs).
pub struct RecordPool {
    free: Mutex<Vec<usize>>,
    allocated: AtomicU32,
}

const CHUNK: usize = 64;

impl RecordPool {
    pub const fn new() -> RecordPool {
        RecordPool {
            free: Mutex::new(Vec::new()),
            allocated: AtomicU32::new(0),
        }
    }

    /// A zeroed record (`valid == 0`).
    pub fn take(&self) -> *mut ContextRecord {
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
            self.allocated.fetch_add(CHUNK as u32, Ordering::Relaxed);
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
    pub unsafe fn give_back(&self, record: *mut ContextRecord) {
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

    pub fn allocated(&self) -> u32 {
        self.allocated.load(Ordering::Relaxed)
    }
}

impl Default for RecordPool {
    fn default() -> Self {
        Self::new()
    }
}

pub static RECORDS: RecordPool = RecordPool::new();

/// `local root span id -> endpoint name`, as reported by the shim (for local roots that
/// were sampled). Names are interned: a service has few endpoints and many requests.
///
/// Memory is bounded by generations: reports go to the current generation; when the profile
/// is written ([`Endpoints::expire`]) or the current generation is full, it becomes the
/// previous one and the one before is dropped. A name therefore lives at least one profile
/// period after its last report, which is all the aggregator needs.
pub struct Endpoints {
    inner: Mutex<EndpointMaps>,
}

struct EndpointMaps {
    current: Option<HashMap<u64, u32>>,
    previous: Option<HashMap<u64, u32>>,
    names: Vec<std::sync::Arc<str>>,
    ids: Option<HashMap<std::sync::Arc<str>, u32>>,
}

const GENERATION_LIMIT: usize = 1 << 18;
const MAX_NAMES: usize = 1 << 16;

impl Endpoints {
    pub const fn new() -> Endpoints {
        Endpoints {
            inner: Mutex::new(EndpointMaps {
                current: None,
                previous: None,
                names: Vec::new(),
                ids: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EndpointMaps> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn report(&self, local_root: u64, name: &str) {
        if local_root == 0 {
            return;
        }
        let mut m = self.lock();
        let ids = m.ids.get_or_insert_with(HashMap::new);
        let id = match ids.get(name) {
            Some(&id) => id,
            None => {
                if ids.len() >= MAX_NAMES {
                    return; // a name per request is a bug upstream; do not grow without bound
                }
                let id = m.names.len() as u32;
                let shared: std::sync::Arc<str> = name.into();
                m.names.push(shared.clone());
                m.ids.get_or_insert_with(HashMap::new).insert(shared, id);
                id
            }
        };
        if m.current
            .as_ref()
            .is_some_and(|c| c.len() >= GENERATION_LIMIT)
        {
            m.rotate();
        }
        m.current
            .get_or_insert_with(HashMap::new)
            .insert(local_root, id);
    }

    /// The latest name of `local_root`.
    pub fn name(&self, local_root: u64) -> Option<String> {
        let m = self.lock();
        let id = m
            .current
            .as_ref()
            .and_then(|c| c.get(&local_root))
            .or_else(|| m.previous.as_ref().and_then(|p| p.get(&local_root)))?;
        m.names.get(*id as usize).map(|n| n.to_string())
    }

    /// Starts a new generation (called after each profile is written).
    pub fn expire(&self) {
        self.lock().rotate();
    }
}

impl EndpointMaps {
    fn rotate(&mut self) {
        self.previous = self.current.take();
    }
}

impl Default for Endpoints {
    fn default() -> Self {
        Self::new()
    }
}

pub static ENDPOINTS: Endpoints = Endpoints::new();

/// W3C span ids are 8 bytes; the shim passes them as the `long` whose big-endian bytes they
/// are (what `Long.parseUnsignedLong(hex, 16)` gives).
pub fn span_id_hex(id: u64) -> String {
    format!("{id:016x}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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

    #[test]
    fn endpoints_keep_the_latest_name() {
        let e = Endpoints::new();
        e.report(7, "GET");
        e.report(7, "GET /owners/{id}");
        e.report(0, "ignored");
        assert_eq!(e.name(7).as_deref(), Some("GET /owners/{id}"));
        assert_eq!(e.name(8), None);
        // Survives one generation change, not two.
        e.expire();
        assert_eq!(e.name(7).as_deref(), Some("GET /owners/{id}"));
        e.report(9, "GET /owners/{id}");
        e.expire();
        assert_eq!(e.name(7), None);
        assert_eq!(e.name(9).as_deref(), Some("GET /owners/{id}"));
        // Many roots, few names: the generation limit bounds memory without a scan.
        for root in 1..=(GENERATION_LIMIT as u64 * 3) {
            e.report(root, if root % 2 == 0 { "a" } else { "b" });
        }
        assert_eq!(e.lock().names.len(), 4, "GET, GET /owners/{{id}}, a, b");
        assert_eq!(e.name(GENERATION_LIMIT as u64 * 3).as_deref(), Some("a"));
        assert_eq!(
            e.name(GENERATION_LIMIT as u64 * 3 - 1).as_deref(),
            Some("b")
        );
        assert_eq!(span_id_hex(0xb7ad6b7169203331), "b7ad6b7169203331");
    }
}
