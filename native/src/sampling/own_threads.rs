//! The agent's own threads that attach to the VM (the aggregator, the wall-clock thread):
//! they are never profiled. Java thread registration, the thread scan and the JVMTI event
//! samples all skip them, so the set lives here, below all three.

use std::sync::atomic::{AtomicI32, Ordering};

/// The agent's own threads attached to the VM (aggregator, wall clock): never profiled. A
/// thread takes a slot when it starts and gives it back as it ends.
static OWN_TIDS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];

/// Marks the calling thread, `tid`, as one of the agent's own (call before it attaches).
pub(crate) fn add_own_tid(tid: i32) {
    for slot in &OWN_TIDS {
        if slot
            .compare_exchange(0, tid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
    log_debug!("more agent threads than expected; thread {tid} may be profiled");
}

/// Gives back the slot of `tid`, one of the agent's own threads that is ending.
pub(crate) fn remove_own_tid(tid: i32) {
    for slot in &OWN_TIDS {
        let _ = slot.compare_exchange(tid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Whether `tid` is one of the agent's own threads.
pub(crate) fn is_own_tid(tid: i32) -> bool {
    tid > 0 && OWN_TIDS.iter().any(|t| t.load(Ordering::SeqCst) == tid)
}
