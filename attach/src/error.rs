//! Why an attach failed, grouped by what the person at the terminal does next. Every message
//! is one line that names the process and, when there is one, the way out.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The arguments are wrong (an agent option, an output path): fix the command line.
    #[error("{0}")]
    Usage(String),
    /// This process cannot be attached to, now or ever as it runs: no such process, not a
    /// HotSpot JVM, another user's, attach disabled, no SIGQUIT handler. Pick another
    /// target, another user, or restart the JVM with other flags.
    #[error("{0}")]
    Unattachable(String),
    /// The JVM did not answer in time: it may be busy (a long GC, a safepoint) or hung;
    /// try again, with a longer `--timeout`.
    #[error("{0}")]
    NoAnswer(String),
    /// The other end broke the protocol or is not the JVM it claims to be: nothing was or
    /// will be sent to it.
    #[error("{0}")]
    Peer(String),
    /// A system call failed on our side (a file in the target's /tmp, a socket).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

impl AttachError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> AttachError {
        let what = what.into();
        move |source| AttachError::Io { what, source }
    }
}
