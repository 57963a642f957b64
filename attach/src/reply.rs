//! The agent's reply file: UTF-8 text the agent writes before `Agent_OnAttach` returns. Line 1
//! is `ok` or `error: <one-line reason>`; then `key: value` lines (`state: running`,
//! `file: /path` for each file written, `note: …`).

/// Most bytes of a reply read (a reply is a few lines).
pub const REPLY_LIMIT: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// `ok` (true) or `error: …` (false).
    pub ok: bool,
    /// Every line, the first included, as written (not yet escaped).
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// The agent wrote nothing.
    #[error("the agent wrote no reply")]
    Empty,
    #[error("the agent's reply does not start with `ok` or `error:`")]
    Malformed,
}

pub fn parse(bytes: &[u8]) -> Result<Reply, ReplyError> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.trim_end_matches('\r').to_owned())
        .collect();
    let first = lines.first().map(|l| l.trim()).ok_or(ReplyError::Empty)?;
    let ok = if first == "ok" {
        true
    } else if first.starts_with("error:") {
        false
    } else if text.trim().is_empty() {
        return Err(ReplyError::Empty);
    } else {
        return Err(ReplyError::Malformed);
    };
    Ok(Reply { ok, lines })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_and_error_replies() {
        let r = parse(b"ok\nstate: running\nfile: /tmp/a.pb.gz\n").unwrap();
        assert!(r.ok);
        assert_eq!(r.lines, ["ok", "state: running", "file: /tmp/a.pb.gz"]);
        let r = parse(b"error: profiling is not running\r\n").unwrap();
        assert!(!r.ok);
        assert_eq!(r.lines, ["error: profiling is not running"]);
    }

    #[test]
    fn empty_and_odd_replies() {
        assert_eq!(parse(b""), Err(ReplyError::Empty));
        assert_eq!(parse(b"\n\n"), Err(ReplyError::Empty));
        assert_eq!(parse(b"okay\n"), Err(ReplyError::Malformed));
        assert_eq!(parse(b"\xff\xfe"), Err(ReplyError::Malformed));
    }
}
