//! The boundary with the JVM: no panic may unwind into C.
//!
//! Every `extern "C"` entry point runs its body through [`guard`]. A panic there is a bug in
//! the agent; the JVM must not pay for it, so the guard stops profiling, logs one line and
//! returns a harmless value.
#![forbid(unsafe_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use crate::sampling::signal_handler;

static HOOK: Once = Once::new();

/// Replaces the default panic message (a multi-line report on stderr of the user's JVM) with
/// one `otelprof:` line. This library has its own copy of std, so the hook only sees the
/// agent's own panics.
pub(crate) fn install_panic_hook() {
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log_error!("internal error: {info}");
        }));
    });
}

/// Runs `f`, turning a panic into "profiling off" plus one log line.
pub(crate) fn guard<R>(what: &str, on_panic: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            signal_handler::set_active(false);
            log_error!("internal error in {what}; profiling is off, the JVM continues");
            on_panic
        }
    }
}
