//! The one way the CLI writes to its standard output and standard error.
//!
//! `println!` panics when a write fails, and a write fails as soon as the reader of a pipe is
//! gone: `otelprof top STORE | head -1` used to end in a panic and a backtrace. Rust ignores
//! SIGPIPE (so that servers survive a peer closing a socket), which turns the signal that
//! stops `cat` or `grep` quietly into an `EPIPE` error on the next write. Here that error is a
//! decision instead:
//!
//! - stdout closed by its reader ([`StdoutClosed`]): the command stops where it is and
//!   `otelprof` exits with [`EXIT_STDOUT_CLOSED`] (141 = 128 + SIGPIPE), the status a shell
//!   reports for `cat` or `grep` stopped by SIGPIPE. Not 0: the command did not finish (a
//!   `diff --fail-above` cut short has not judged anything yet), and `set -o pipefail`
//!   scripts treat it like any other tool's broken pipe;
//! - any other stdout failure (a full disk behind `> file`): an error naming it, exit 1;
//! - stderr: a line that cannot be written is dropped. There is nowhere left to report it, and
//!   a receiver whose log reader went away keeps receiving (every acknowledged request is on
//!   disk already).
//!
//! Everything written is also passed through [`escape_keeping_newlines`]: whatever a command
//! forgot to escape, no control character but the line break reaches the terminal.

use std::io::{self, Write as _};

use otelprof_primitives::escape::escape_keeping_newlines;

/// Exit status when stdout's reader went away: 128 + SIGPIPE, as a shell reports for a tool
/// SIGPIPE stopped.
pub const EXIT_STDOUT_CLOSED: u8 = 141;

/// Standard output was closed by its reader: stop quietly.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed by its reader")]
pub struct StdoutClosed;

fn stdout_error(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        anyhow::Error::new(StdoutClosed)
    } else {
        anyhow::Error::new(e).context("cannot write to standard output")
    }
}

/// Writes `text` to stdout. Use [`out!`] and [`outln!`].
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    io::stdout()
        .lock()
        .write_all(escape_keeping_newlines(text).as_bytes())
        .map_err(stdout_error)
}

/// Flushes stdout: what is still buffered fails here, not silently at exit.
pub fn flush_stdout() -> anyhow::Result<()> {
    io::stdout().lock().flush().map_err(stdout_error)
}

/// Writes `text` to stderr; never fails, never panics. Use [`errln!`].
pub fn write_stderr(text: &str) {
    let _ = io::stderr()
        .lock()
        .write_all(escape_keeping_newlines(text).as_bytes());
}

/// Whether `error` (or what caused it) is [`StdoutClosed`].
pub fn is_stdout_closed(error: &anyhow::Error) -> bool {
    error.chain().any(|c| c.is::<StdoutClosed>())
}

/// `print!` that returns `anyhow::Result<()>` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(&format!($($arg)*))
    };
}

/// `println!` that returns `anyhow::Result<()>` instead of panicking: `outln!(...)?`.
macro_rules! outln {
    () => {
        $crate::output::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics (a line stderr cannot take is dropped).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(&format!("{}\n", format_args!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_apart_from_other_failures() {
        let closed = stdout_error(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(is_stdout_closed(&closed));
        assert!(is_stdout_closed(
            &closed.context("while printing the table")
        ));
        let full = stdout_error(io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(!is_stdout_closed(&full));
        assert!(format!("{full:#}").starts_with("cannot write to standard output: "));
    }
}
