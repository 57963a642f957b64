//! The receiver's status lines on standard error, escaped like everything `otelprof` prints.
//! A line stderr cannot take is dropped: there is nowhere left to report it, and a receiver
//! whose log reader went away keeps receiving (every acknowledged request is on disk already).

use std::io::Write as _;

use otelprof_primitives::escape::escape_keeping_newlines;

/// Writes `text` to stderr; never fails, never panics. Use [`errln!`].
pub fn write(text: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(escape_keeping_newlines(text).as_bytes());
}

/// `eprintln!` that never panics (a line stderr cannot take is dropped).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stderr::write(&format!("{}\n", format_args!($($arg)*)))
    };
}
