//! HotSpot's attach protocol, version 1 (every HotSpot since JDK 6 speaks it; JDK 24 added a
//! version 2 that JDK 25 still accepts version 1 beside).
//!
//! One connection carries one command. The request is NUL-terminated strings: the protocol
//! version `1`, the command name (at most 16 bytes), then exactly three arguments (at most
//! 1024 bytes each, empty when unused). HotSpot reads until it has them all; a longer name or
//! argument makes it close the connection without a word, so lengths are checked here first.
//! The response is a decimal status line (`0` for success, `-1` for `JNI_ERR`, `101` for a
//! bad version), then the command's output until the JVM closes the connection.
//!
//! `load <library> <absolute?> <options>` answers `0` and `return code: N` once the agent's
//! `Agent_OnAttach` returned N; the JVM's own failures (a library it cannot open, dynamic
//! loading disabled) come as text, under status `0` since JDK 21 and `-1` before.

use std::io::{self, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

pub const NAME_MAX: usize = 16;
pub const ARG_MAX: usize = 1024;
const ARG_COUNT: usize = 3;
/// Most bytes of a response kept (a thread dump of a big JVM is a few MiB); the rest is
/// read and dropped.
pub const RESPONSE_LIMIT: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("the command name {0:?} is longer than {NAME_MAX} bytes")]
    NameTooLong(String),
    #[error("an argument is {0} bytes long; HotSpot takes at most {ARG_MAX}")]
    ArgTooLong(usize),
    #[error("HotSpot takes at most {ARG_COUNT} arguments")]
    TooManyArgs,
    #[error("an argument holds a NUL byte")]
    Nul,
}

/// The bytes of a request.
pub fn encode(command: &str, args: &[&str]) -> Result<Vec<u8>, RequestError> {
    if command.len() > NAME_MAX {
        return Err(RequestError::NameTooLong(command.to_owned()));
    }
    if args.len() > ARG_COUNT {
        return Err(RequestError::TooManyArgs);
    }
    let mut out = b"1\0".to_vec();
    out.extend_from_slice(command.as_bytes());
    out.push(0);
    for i in 0..ARG_COUNT {
        let arg = args.get(i).copied().unwrap_or("");
        if arg.len() > ARG_MAX {
            return Err(RequestError::ArgTooLong(arg.len()));
        }
        if arg.contains('\0') || command.contains('\0') {
            return Err(RequestError::Nul);
        }
        out.extend_from_slice(arg.as_bytes());
        out.push(0);
    }
    Ok(out)
}

/// What the JVM answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: i32,
    /// The output, as text (invalid UTF-8 replaced); not yet escaped.
    pub text: String,
    /// Whether the output was longer than [`RESPONSE_LIMIT`] and cut.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("the JVM closed the connection without answering")]
    Empty,
    #[error("the JVM's answer does not start with a status line")]
    NoStatus,
}

/// Parses a whole response.
pub fn decode(bytes: &[u8], truncated: bool) -> Result<Response, ResponseError> {
    if bytes.is_empty() {
        return Err(ResponseError::Empty);
    }
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(bytes.len());
    let status = std::str::from_utf8(&bytes[..end])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or(ResponseError::NoStatus)?;
    let rest = bytes.get(end + 1..).unwrap_or_default();
    Ok(Response {
        status,
        text: String::from_utf8_lossy(rest).into_owned(),
        truncated,
    })
}

/// How a `load` went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome {
    /// `Agent_OnAttach` ran and returned this.
    Returned(i32),
    /// The JVM did not run the agent; its words (or the status when it said none).
    NotRun(String),
}

/// Reads a `load` response.
pub fn load_outcome(response: &Response) -> LoadOutcome {
    let text = response.text.trim();
    if response.status == 0 {
        for line in text.lines() {
            let line = line.trim();
            // JDK 9+ say `return code: N`; JDK 8 printed the bare number.
            let code = line.strip_prefix("return code:").unwrap_or(line).trim();
            if let Ok(code) = code.parse() {
                return LoadOutcome::Returned(code);
            }
        }
    }
    if text.is_empty() {
        LoadOutcome::NotRun(format!("status {}", response.status))
    } else {
        LoadOutcome::NotRun(text.to_owned())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Response(#[from] ResponseError),
    #[error("no answer within the time allowed")]
    Timeout,
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Sends one command on `stream` and reads the whole answer, giving up after `timeout`.
pub fn exchange(
    mut stream: UnixStream,
    command: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<Response, ExchangeError> {
    let request = encode(command, args)?;
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(ExchangeError::Timeout)
    };
    stream.set_write_timeout(Some(left()?))?;
    stream.write_all(&request).map_err(timeout_or_io)?;
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 64 << 10];
    loop {
        stream.set_read_timeout(Some(left()?))?;
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // HotSpot closes with a reset when it refuses a peer.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset && kept.is_empty() => 0,
            Err(e) => return Err(timeout_or_io(e)),
        };
        if n == 0 {
            break;
        }
        let room = RESPONSE_LIMIT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        truncated |= n > room;
    }
    Ok(decode(&kept, truncated)?)
}

fn timeout_or_io(e: io::Error) -> ExchangeError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ExchangeError::Timeout,
        _ => ExchangeError::Io(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_the_version_the_name_and_three_arguments() {
        assert_eq!(
            encode(
                "load",
                &["/tmp/x/libotelprof.so", "true", "status,reply=/tmp/r"]
            )
            .unwrap(),
            b"1\0load\0/tmp/x/libotelprof.so\0true\0status,reply=/tmp/r\0"
        );
        assert_eq!(encode("properties", &[]).unwrap(), b"1\0properties\0\0\0\0");
        assert_eq!(
            encode("jcmd", &["VM.version"]).unwrap(),
            b"1\0jcmd\0VM.version\0\0\0"
        );
    }

    #[test]
    fn what_hotspot_would_drop_silently_is_refused_here() {
        let long = "x".repeat(ARG_MAX + 1);
        assert_eq!(
            encode("load", &[&long]),
            Err(RequestError::ArgTooLong(ARG_MAX + 1))
        );
        assert!(encode("load", &[&"x".repeat(ARG_MAX)]).is_ok());
        assert!(matches!(
            encode("a_very_long_command", &[]),
            Err(RequestError::NameTooLong(_))
        ));
        assert_eq!(
            encode("load", &["a", "b", "c", "d"]),
            Err(RequestError::TooManyArgs)
        );
        assert_eq!(encode("load", &["a\0b"]), Err(RequestError::Nul));
    }

    #[test]
    fn responses_are_a_status_line_then_text() {
        let r = decode(b"0\nreturn code: 0\n", false).unwrap();
        assert_eq!(r.status, 0);
        assert_eq!(load_outcome(&r), LoadOutcome::Returned(0));
        let r = decode(
            b"-1\n/x/libotelprof.so was not loaded.\ncannot open\n",
            false,
        )
        .unwrap();
        assert_eq!(r.status, -1);
        assert_eq!(
            load_outcome(&r),
            LoadOutcome::NotRun("/x/libotelprof.so was not loaded.\ncannot open".into())
        );
        // JDK 21+: the JVM's own failure under status 0.
        let r = decode(b"0\n/x was not loaded.\n", false).unwrap();
        assert_eq!(
            load_outcome(&r),
            LoadOutcome::NotRun("/x was not loaded.".into())
        );
        // JDK 8 printed the bare return code.
        assert_eq!(
            load_outcome(&decode(b"0\n102\n", false).unwrap()),
            LoadOutcome::Returned(102)
        );
        assert_eq!(
            load_outcome(&decode(b"101", false).unwrap()),
            LoadOutcome::NotRun("status 101".into())
        );
        assert_eq!(decode(b"", false), Err(ResponseError::Empty));
        assert_eq!(decode(b"garbage\n", false), Err(ResponseError::NoStatus));
        assert_eq!(decode(b"\xff\xfe\n", false), Err(ResponseError::NoStatus));
    }
}
