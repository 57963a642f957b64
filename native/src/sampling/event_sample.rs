//! Recording a sample from a JVMTI event callback (allocation, monitor contention) on the
//! thread the event is about.
//!
//! Unlike the signal handler, a callback runs at a point where the JVM allows JVMTI calls, so
//! the stack comes from GetStackTrace (jmethodID + bytecode index, the same pair
//! AsyncGetCallTrace reports). The record goes into the same [`SampleBuffer`] as signal
//! samples: the callback try-locks a shard and never waits for one (a full or busy buffer
//! drops the sample and counts it), so the application thread is never blocked by the
//! aggregator beyond the stack walk itself.
//!
//! [`SampleBuffer`]: crate::sampling::sample_buffer::SampleBuffer

use crate::jvm::jvmti::Jvmti;
use crate::kinds::SampleKind;
use crate::sampling::os::{gettid, monotonic_ns};
use crate::sampling::own_threads;
use crate::sampling::sample_buffer::{self, RecordHeader};
use crate::sampling::signal_handler;
use crate::stats::{self, COUNTERS};
use crate::sys::{AsgctCallFrame, JvmtiFrameInfo};

/// `num_frames` code for a JVMTI GetStackTrace that failed (outside AsyncGetCallTrace's codes).
pub(crate) const STACK_TRACE_FAILED: i32 = -101;

const _: () =
    assert!(std::mem::size_of::<JvmtiFrameInfo>() == std::mem::size_of::<AsgctCallFrame>());
const _: () =
    assert!(std::mem::align_of::<JvmtiFrameInfo>() <= std::mem::align_of::<AsgctCallFrame>());

/// What a callback measured.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventSample {
    pub(crate) kind: SampleKind,
    pub(crate) weight: u64,
    pub(crate) count_milli: u64,
    pub(crate) class_id: u32,
}

/// An allocated object kept for the live heap (all zero for other samples): see the fields
/// of the same names in [`RecordHeader`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TrackedObject {
    pub(crate) object: u64,
    pub(crate) size: u64,
    pub(crate) live_interval: u32,
    pub(crate) gc_seq: u32,
}

/// Whether callbacks should record at all (sampling on, the thread not one of ours).
pub(crate) fn wanted() -> Option<i32> {
    if !signal_handler::is_active() {
        return None;
    }
    let tid = gettid();
    (!own_threads::is_own_tid(tid)).then_some(tid)
}

/// Records `sample` for the calling thread `tid`, with its stack and span context.
///
/// # Safety
/// Called from a JVMTI event callback on the Java thread the event is about (`tid` is its
/// kernel id), with the agent's JVMTI environment.
pub(crate) unsafe fn record(jvmti: &Jvmti, tid: i32, sample: EventSample) {
    // SAFETY: per this function's contract.
    unsafe { record_object(jvmti, tid, sample, TrackedObject::default()) };
}

/// [`record`], with an object for the live heap; returns whether the record was stored
/// (if not, `tracked.object` is still the caller's).
///
/// # Safety
/// As for [`record`].
pub(crate) unsafe fn record_object(
    jvmti: &Jvmti,
    tid: i32,
    sample: EventSample,
    tracked: TrackedObject,
) -> bool {
    let Some(s) = signal_handler::installed() else {
        return false;
    };
    let (serial, record) = match s.table.lookup(tid) {
        Some(slot) => (slot.serial(), slot.context()),
        None => (0, std::ptr::null_mut()),
    };
    let header = RecordHeader {
        tid,
        serial,
        time_ns: monotonic_ns(),
        weight: sample.weight,
        count_milli: sample.count_milli,
        kind: sample.kind as u8,
        class_id: sample.class_id,
        // SAFETY: slots only point to never-freed pool records, and this thread's slot to the
        // record of this thread (or of the virtual thread it runs); we are on that thread, in
        // a callback, not inside one of its writes.
        context: unsafe { crate::context::reader::read(record) },
        object: tracked.object,
        size: tracked.size,
        live_interval: tracked.live_interval,
        gc_seq: tracked.gc_seq,
        ..Default::default()
    };
    let max_depth = s.max_depth();
    let result = s.buffer.write(tid as usize, header, |frames, capacity| {
        let infos = frames as *mut JvmtiFrameInfo;
        let current = std::ptr::null_mut();
        // SAFETY: the scratch array has room for `capacity` AsgctCallFrames, which have the
        // size and (at least) the alignment of JvmtiFrameInfo (asserted above); we are a Java
        // thread in a JVMTI callback.
        let n = match unsafe { jvmti.stack_trace(current, infos, max_depth.min(capacity)) } {
            Ok(n) => n.clamp(0, capacity),
            Err(_) => {
                stats::bump(&COUNTERS.stack_trace_failed);
                return STACK_TRACE_FAILED;
            }
        };
        // Rewrite each entry in place as an AsgctCallFrame: (method, location) becomes
        // (bci, method), the pair the aggregator names.
        for i in 0..n as usize {
            // SAFETY: i < n <= capacity; the entry is read whole before it is overwritten.
            unsafe {
                let info = std::ptr::read(infos.add(i));
                std::ptr::write(
                    frames.add(i),
                    AsgctCallFrame {
                        lineno: i32::try_from(info.location).unwrap_or(-1),
                        method_id: info.method,
                    },
                );
            }
        }
        n
    });
    let stored = sample_buffer::counted(result);
    if stored {
        match sample.kind {
            SampleKind::Alloc => stats::bump(&COUNTERS.alloc_samples),
            SampleKind::Live => stats::bump(&COUNTERS.live_samples),
            SampleKind::Lock => stats::bump(&COUNTERS.lock_samples),
            SampleKind::Cpu | SampleKind::Wall => {}
        }
    }
    stored
}
