//! The attach interface (`Agent_OnAttach`): what `otelprof attach PID start|stop|status|dump`
//! (or `jcmd PID JVMTI.agent_load <lib> "<args>"`) asks, and the reply it gets.
//!
//! Arguments: `VERB[,key=value...]` with VERB one of
//! - `start,<agent options as for -agentpath>,reply=<R>`
//! - `stop,reply=<R>`
//! - `status,reply=<R>`
//! - `dump,reply=<R>[,file=<path>]`
//!
//! `reply=` names a file the caller created empty (as the JVM's user, mode 0600). The agent
//! opens it `O_WRONLY|O_TRUNC|O_NOFOLLOW|O_CLOEXEC` (and `O_NONBLOCK`, so that a FIFO put
//! there cannot hang the JVM's attach thread), never creates it, writes to it only if it is a
//! regular file owned by the JVM's user, and writes UTF-8 lines before `Agent_OnAttach`
//! returns: `ok` or `error: <reason>`, then `key: value` lines. Without `reply=` the same
//! lines go to the log. docs/attach.md describes the verbs and what each guarantees.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

/// What was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    /// Start profiling with these agent options (as for `-agentpath`).
    Start {
        options: String,
    },
    Stop,
    Status,
    /// End the current period now; also write it to `file` when given.
    Dump {
        file: Option<PathBuf>,
    },
}

/// A parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) verb: Verb,
    pub(crate) reply: Option<PathBuf>,
}

/// A bad request: the reason, and the reply file if one could be read from it (so the
/// reason can be delivered there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BadRequest {
    pub(crate) reason: String,
    pub(crate) reply: Option<PathBuf>,
}

const VERBS: &str = "start, stop, status or dump";

/// Parses `VERB[,key=value...]`.
pub(crate) fn parse(args: &str) -> Result<Request, BadRequest> {
    let mut items = args.split(',').map(str::trim);
    let verb = items.next().unwrap_or("");
    let mut reply: Option<PathBuf> = None;
    let mut file: Option<PathBuf> = None;
    let mut rest: Vec<&str> = Vec::new();
    let mut problem: Option<String> = None;
    for item in items.filter(|i| !i.is_empty()) {
        let (key, value) = item.split_once('=').unwrap_or((item, ""));
        let target = match key.trim() {
            "reply" => &mut reply,
            "file" if verb == "dump" => &mut file,
            _ => {
                rest.push(item);
                continue;
            }
        };
        let value = value.trim();
        if target.is_some() {
            problem.get_or_insert(format!("{} is given twice", key.trim()));
        } else if !value.starts_with('/') {
            problem.get_or_insert(format!(
                "{}={} is not an absolute path",
                key.trim(),
                otelprof_exporter::config::echo(value)
            ));
        } else {
            *target = Some(PathBuf::from(value));
        }
    }
    let bad = |reason: String, reply: Option<PathBuf>| BadRequest { reason, reply };
    if let Some(p) = problem {
        return Err(bad(p, reply));
    }
    let verb = match verb {
        "start" => Verb::Start {
            options: rest.join(","),
        },
        "stop" | "status" | "dump" if !rest.is_empty() => {
            return Err(bad(
                format!(
                    "{verb} takes no '{}' (only reply={})",
                    otelprof_exporter::config::echo(rest.first().copied().unwrap_or("")),
                    if verb == "dump" { " and file=" } else { "" }
                ),
                reply,
            ))
        }
        "stop" => Verb::Stop,
        "status" => Verb::Status,
        "dump" => Verb::Dump { file },
        "" => return Err(bad(format!("no verb given: use {VERBS}"), reply)),
        other => {
            return Err(bad(
                format!(
                    "unknown verb '{}': use {VERBS} (options go after it: start,cpu=10ms)",
                    otelprof_exporter::config::echo(other)
                ),
                reply,
            ))
        }
    };
    Ok(Request { verb, reply })
}

/// The answer to a request: `ok` or `error: <reason>`, then `key: value` lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) error: Option<String>,
    pub(crate) lines: Vec<(String, String)>,
}

impl Reply {
    pub(crate) fn ok() -> Reply {
        Reply::default()
    }

    pub(crate) fn error(reason: impl Into<String>) -> Reply {
        Reply {
            error: Some(reason.into()),
            lines: Vec::new(),
        }
    }

    pub(crate) fn with(mut self, key: &str, value: impl Into<String>) -> Reply {
        self.push(key, value);
        self
    }

    pub(crate) fn push(&mut self, key: &str, value: impl Into<String>) {
        self.lines.push((key.to_owned(), value.into()));
    }

    /// The reply as UTF-8 text, one line per entry; values cut to one line.
    pub(crate) fn text(&self) -> String {
        let one_line = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect()
        };
        let mut out = match &self.error {
            Some(e) => format!("error: {}\n", one_line(e)),
            None => "ok\n".to_owned(),
        };
        for (k, v) in &self.lines {
            out.push_str(&format!("{}: {}\n", one_line(k), one_line(v)));
        }
        out
    }
}

/// Writes `reply` to the file `path` names (see the module docs), or logs it when there is
/// none or it cannot be written.
pub(crate) fn deliver(reply: &Reply, path: Option<&std::path::Path>) {
    let text = reply.text();
    let Some(path) = path else {
        for line in text.lines() {
            log_info!("attach: {line}");
        }
        return;
    };
    if let Err(e) = write_reply(path, &text) {
        log_error!(
            "cannot write the attach reply to {}: {e}; it was: {}",
            path.display(),
            text.lines().collect::<Vec<_>>().join(" | ")
        );
    }
}

fn write_reply(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.uid() != me {
        return Err(std::io::Error::other(format!(
            "owned by uid {}, not this JVM's user ({me})",
            meta.uid()
        )));
    }
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(args: &str) -> Request {
        parse(args).unwrap()
    }

    #[test]
    fn verbs_and_their_arguments() {
        assert_eq!(
            ok("start,cpu=10ms,wall=50ms,out=/tmp/p,reply=/tmp/r"),
            Request {
                verb: Verb::Start {
                    options: "cpu=10ms,wall=50ms,out=/tmp/p".into()
                },
                reply: Some("/tmp/r".into()),
            }
        );
        assert_eq!(
            ok("start"),
            Request {
                verb: Verb::Start { options: "".into() },
                reply: None
            }
        );
        assert_eq!(ok(" stop , reply=/tmp/r ").verb, Verb::Stop);
        assert_eq!(ok("status,reply=/tmp/r").verb, Verb::Status);
        assert_eq!(
            ok("dump,reply=/tmp/r,file=/tmp/d.pb.gz").verb,
            Verb::Dump {
                file: Some("/tmp/d.pb.gz".into())
            }
        );
        assert_eq!(ok("dump").verb, Verb::Dump { file: None });
    }

    #[test]
    fn bad_requests_say_why_and_keep_the_reply_file() {
        let e = parse("cpu=10ms,reply=/tmp/r").unwrap_err();
        assert!(e.reason.contains("unknown verb 'cpu=10ms'"), "{e:?}");
        assert_eq!(e.reply, Some("/tmp/r".into()));
        assert!(parse("").unwrap_err().reason.contains("no verb"));
        let e = parse("stop,cpu=1ms,reply=/tmp/r").unwrap_err();
        assert!(e.reason.contains("stop takes no 'cpu=1ms'"), "{e:?}");
        assert!(parse("status,file=/x").is_err());
        assert!(parse("dump,file=relative.pb.gz")
            .unwrap_err()
            .reason
            .contains("not an absolute path"));
        assert!(parse("stop,reply=r")
            .unwrap_err()
            .reason
            .contains("absolute"));
        assert!(parse("stop,reply=/a,reply=/b")
            .unwrap_err()
            .reason
            .contains("twice"));
    }

    #[test]
    fn replies_are_lines_with_one_line_values() {
        let r = Reply::ok()
            .with("state", "running")
            .with("note", "two\nlines");
        assert_eq!(r.text(), "ok\nstate: running\nnote: two lines\n");
        assert_eq!(Reply::error("not running").text(), "error: not running\n");
    }

    #[test]
    fn replies_go_only_to_an_existing_regular_file_of_ours() {
        let dir = std::env::temp_dir().join(format!("otelprof-reply-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let r = Reply::ok().with("state", "stopped");
        // Never created.
        let missing = dir.join("missing");
        assert!(write_reply(&missing, &r.text()).is_err());
        assert!(!missing.exists());
        // Written over what was there.
        let file = dir.join("reply");
        std::fs::write(&file, "old content that is longer").unwrap();
        write_reply(&file, &r.text()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "ok\nstate: stopped\n"
        );
        // Not through a symbolic link, not into a directory.
        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(write_reply(&link, "x").is_err());
        assert!(write_reply(&dir, "x").is_err());
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "ok\nstate: stopped\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
