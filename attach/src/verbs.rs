//! The verbs: `start`, `stop`, `status`, `dump` talk to the otelprof agent, `jcmd` to HotSpot.
//!
//! An agent verb is one `load <library> true <VERB,key=value...,reply=R>` command (`true`:
//! the library is given by its absolute path), what `VirtualMachine.loadAgentPath` sends:
//! HotSpot loads `libotelprof.so` (once: the same path gives the same library) and calls its
//! `Agent_OnAttach` with those arguments. The agent writes its answer into the reply file
//! `R`, which we created empty beforehand (as the JVM's user, mode 0600, in the JVM's /tmp)
//! and read once the attach response arrived.
//!
//! The library's path must be one the JVM can open, and the same for every verb on a JVM (a
//! different path would load a second copy with its own state). A JVM that has the agent
//! already is reached through the path its maps show; otherwise, when the JVM sees our files
//! and may read the library beside `otelprof`, that canonical path; else a copy in the JVM's
//! `/tmp/otelprof-<first 16 hex digits of its SHA-256>/` (see [`TmpDir::place`]). After a
//! successful `start`, `otelprof.jar` (found beside the library; copied the same way, into a
//! directory named after its own hash) is loaded through the JVM's `instrument` agent for
//! span context (its `agentmain` finds the running agent whatever the jar's directory).

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read as _, Seek as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::creds::{self, Switched};
use super::error::AttachError;
use super::listener::{humanize, Listener};
use super::protocol::{self, ExchangeError, LoadOutcome, Response};
use super::reply::{self, Reply, ReplyError, REPLY_LIMIT};
use super::target::Target;
use super::tmpdir::{TmpDir, Trust, TMP};
use super::{options, sys};
use otelprof_primitives::escape;

/// Largest dump file copied out (as the store's readers allow).
const DUMP_LIMIT: u64 = 512 << 20;

/// What to do in the JVM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Start profiling with these agent options (as for `-agentpath`).
    Start(String),
    Stop,
    Status,
    /// Write the profile so far; with a path, into that file on our side.
    Dump(Option<PathBuf>),
    /// A HotSpot diagnostic command and its arguments, as `jcmd PID …` takes them.
    Jcmd(String),
}

impl Verb {
    fn name(&self) -> &'static str {
        match self {
            Verb::Start(_) => "start",
            Verb::Stop => "stop",
            Verb::Status => "status",
            Verb::Dump(_) => "dump",
            Verb::Jcmd(_) => "jcmd",
        }
    }
}

/// The agent files beside `otelprof`.
#[derive(Clone, Debug)]
pub struct AgentFiles {
    /// `libotelprof.so`, canonical.
    pub library: PathBuf,
    /// `otelprof.jar`, canonical, when there is one.
    pub jar: Option<PathBuf>,
}

/// What to print.
#[derive(Debug, Default)]
pub struct Outcome {
    /// For standard output, one line each, not yet escaped: the agent's reply, or the
    /// command's output.
    pub lines: Vec<String>,
    /// For standard error (`otelprof: ` goes before each).
    pub notes: Vec<String>,
    /// Whether the agent (or the command) said it succeeded.
    pub ok: bool,
}

/// Runs `verb` in JVM `pid`, waiting at most `timeout` for each answer.
pub fn run(
    pid: u32,
    verb: &Verb,
    agent: Option<&AgentFiles>,
    timeout: Duration,
) -> Result<Outcome, AttachError> {
    // Options are checked before the JVM is looked at; `out=` again once we know what the
    // JVM sees.
    if let Verb::Start(opts) = verb {
        options::check(opts, |v| Ok(v.to_owned())).map_err(AttachError::Usage)?;
    }
    let cwd = std::env::current_dir().ok();
    let target = Target::inspect(pid, creds::own())?;
    let verb = match verb {
        Verb::Start(opts) => Verb::Start(
            options::check(opts, |v| resolve_out(&target, cwd.as_deref(), v))
                .map_err(AttachError::Usage)?,
        ),
        other => other.clone(),
    };
    if let Verb::Start(opts) = &verb {
        // HotSpot drops a request with a longer argument without a word: say it here,
        // before the JVM is woken.
        let arg = format!("start,{opts},reply={TMP}/{}", reply_prefix());
        if arg.len() + 16 > protocol::ARG_MAX {
            return Err(AttachError::Usage(format!(
                "the agent options are too long: HotSpot passes at most {} bytes to an agent, \
                 {} of which otelprof needs",
                protocol::ARG_MAX,
                arg.len() + 16 - opts.len()
            )));
        }
    }
    let mut switched = creds::become_user(target.ids()).map_err(AttachError::io(format!(
        "cannot act as the user of {} (uid {} gid {})",
        target.describe(),
        target.status.euid,
        target.status.egid
    )))?;
    let tmp = TmpDir::open(&target)?;
    let listener = Listener::reach(&target, &tmp, timeout)?;
    let mut session = Session {
        target: &target,
        tmp: &tmp,
        listener,
        switched: &mut switched,
        agent,
        timeout,
    };
    let mut done = session.run(&verb)?;
    // Files for our side are written as ourselves.
    if let Some(s) = switched {
        s.restore()
            .map_err(AttachError::io("cannot switch back to our own user"))?;
    }
    done.finish(&tmp)?;
    Ok(done.outcome)
}

/// The name of a reply file up to its 16 random hex digits.
fn reply_prefix() -> String {
    format!("otelprof-reply-{}-", std::process::id())
}

/// Where `out=` points for the JVM.
fn resolve_out(target: &Target, cwd: Option<&Path>, value: &str) -> Result<String, String> {
    let path = Path::new(value);
    if target.same_view {
        let absolute = match (path.is_absolute(), cwd) {
            (true, _) => path.to_path_buf(),
            (false, Some(cwd)) => cwd.join(path),
            (false, None) => return Err("cannot tell our working directory".to_owned()),
        };
        if !absolute.is_dir() {
            return Err(format!("no directory {}", escape::path(&absolute)));
        }
        return absolute
            .to_str()
            .map(str::to_owned)
            .ok_or_else(|| "the path is not UTF-8".to_owned());
    }
    if !path.is_absolute() {
        return Err(format!(
            "{} sees other files than otelprof (another mount namespace or root), so a \
             relative directory is ambiguous: give the directory's absolute path inside the \
             JVM's file system",
            target.describe()
        ));
    }
    match sys::open_in_root(target.root(), path, libc::O_PATH | libc::O_DIRECTORY, 0) {
        Ok(_) => Ok(value.to_owned()),
        Err(e) => Err(format!(
            "no directory {value} in the file system of {} ({e})",
            target.describe()
        )),
    }
}

struct Session<'a> {
    target: &'a Target,
    tmp: &'a TmpDir,
    listener: Listener<'a>,
    switched: &'a mut Option<Switched>,
    agent: Option<&'a AgentFiles>,
    timeout: Duration,
}

/// A verb's outcome, and what is left to do on our side once we are ourselves again.
struct Done {
    outcome: Outcome,
    /// `dump -o`: the bytes of each file the agent wrote, where they go, and the name to
    /// remove from the JVM's /tmp.
    save: Vec<(Vec<u8>, PathBuf, OsString)>,
}

impl Done {
    fn finish(&mut self, tmp: &TmpDir) -> Result<(), AttachError> {
        for (bytes, dest, temp) in std::mem::take(&mut self.save) {
            std::fs::write(&dest, &bytes).map_err(AttachError::io(format!(
                "cannot write {}",
                escape::path(&dest)
            )))?;
            if let Err(e) = tmp.remove(&temp) {
                self.outcome.notes.push(format!(
                    "cannot remove {}: {e}",
                    escape::path(&Path::new(TMP).join(&temp))
                ));
            }
        }
        Ok(())
    }
}

/// What one `load` gave.
struct Loaded {
    response: Response,
    reply: Result<Reply, ReplyError>,
}

impl Session<'_> {
    fn run(&mut self, verb: &Verb) -> Result<Done, AttachError> {
        let mut done = Done {
            outcome: Outcome::default(),
            save: Vec::new(),
        };
        let args = match verb {
            Verb::Jcmd(command) => {
                let response = self.exchange("jcmd", &[command], verb.name())?;
                done.outcome.lines = response.text.lines().map(str::to_owned).collect();
                if response.truncated {
                    done.outcome.notes.push(format!(
                        "output cut after {} bytes",
                        protocol::RESPONSE_LIMIT
                    ));
                }
                done.outcome.ok = response.status == 0;
                return Ok(done);
            }
            // Asking an agent that is not there would load it, and a loaded agent stays for
            // the JVM's life (its JVMTI environment, its signal handler): only `start` loads.
            Verb::Stop | Verb::Status | Verb::Dump(_) if self.target.maps.agent.is_none() => {
                done.outcome = not_loaded(verb, self.target.pid);
                return Ok(done);
            }
            Verb::Start(opts) if opts.is_empty() => "start".to_owned(),
            Verb::Start(opts) => format!("start,{opts}"),
            Verb::Stop => "stop".to_owned(),
            Verb::Status => "status".to_owned(),
            Verb::Dump(_) => "dump".to_owned(),
        };
        let library = self.library_path(&mut done.outcome.notes)?;
        let mut dump_temp: Option<(String, String)> = None;
        let args = match verb {
            Verb::Dump(Some(dest)) => {
                let ext = extension(dest);
                let name = format!(
                    "otelprof-dump-{}-{:016x}{ext}",
                    std::process::id(),
                    sys::random_u64().map_err(AttachError::io("cannot draw a random name"))?
                );
                let path = format!("{TMP}/{name}");
                dump_temp = Some((name, path.clone()));
                format!("{args},file={path}")
            }
            _ => args,
        };
        let library = utf8(&library)?;
        let loaded = self.load(
            library,
            |reply| format!("{args},reply={reply}"),
            verb.name(),
        )?;
        let reply = self.agent_reply(loaded, Path::new(library))?;
        done.outcome.ok = reply.ok;
        done.outcome.lines = reply.lines.clone();
        if let (Verb::Dump(Some(dest)), Some((_, asked)), true) = (verb, &dump_temp, reply.ok) {
            done.save = self.take_dump(&mut done.outcome, dest, asked)?;
        }
        if matches!(verb, Verb::Start(_)) && reply.ok {
            self.span_context(&mut done.outcome);
        }
        // Paths in the reply are the JVM's; say where they are from here when that differs.
        let ours: Vec<String> = done
            .save
            .iter()
            .map(|(_, dest, _)| format!("file: {}", escape::path(dest)))
            .collect();
        let theirs = done
            .outcome
            .lines
            .iter()
            .any(|l| l.starts_with("file: /") && !ours.contains(l));
        if theirs && !self.target.same_view {
            done.outcome.notes.push(format!(
                "the files named are in the file system of {}: from here, under /proc/{}/root",
                self.target.describe(),
                self.target.pid
            ));
        }
        Ok(done)
    }

    /// Sends one command; `what` names it in messages.
    fn exchange(&self, command: &str, args: &[&str], what: &str) -> Result<Response, AttachError> {
        let stream = self.listener.connect(self.timeout)?;
        let who = self.target.describe();
        protocol::exchange(stream, command, args, self.timeout).map_err(|e| match e {
            ExchangeError::Timeout => AttachError::NoAnswer(format!(
                "{who} did not answer `{what}` within {} (it may still carry it out; see \
                 --timeout)",
                humanize(self.timeout)
            )),
            ExchangeError::Request(e) => AttachError::Usage(format!("cannot send `{what}`: {e}")),
            ExchangeError::Response(e) => AttachError::Peer(format!(
                "{who}: {e} (HotSpot answers only its own user and group, or root)"
            )),
            ExchangeError::Io(e) => AttachError::io(format!("talking to {who}"))(e),
        })
    }

    /// `load <library> <true|false> <options>`, where `options` is made from the path of a reply
    /// file created for it, and read back afterwards.
    fn load(
        &mut self,
        library: &str,
        options: impl FnOnce(&str) -> String,
        what: &str,
    ) -> Result<Loaded, AttachError> {
        let (reply_name, mut reply_file) =
            self.tmp
                .create_private(&reply_prefix(), "")
                .map_err(AttachError::io(format!(
                    "cannot create a reply file in /tmp of {}",
                    self.target.describe()
                )))?;
        let options = options(&format!("{TMP}/{}", reply_name.to_string_lossy()));
        // `true`: the library is a path. With `false` HotSpot takes it for a library name
        // and looks for `lib<name>.so` among the JDK's own libraries (which is how
        // `instrument` is found).
        let absolute = if library.starts_with('/') {
            "true"
        } else {
            "false"
        };
        let result = self.exchange("load", &[library, absolute, &options], what);
        // The reply is read from the descriptor we made it with: what the agent wrote
        // through its path, whatever happened to the name since.
        let mut bytes = Vec::new();
        let read = reply_file
            .rewind()
            .and_then(|()| (&mut reply_file).take(REPLY_LIMIT).read_to_end(&mut bytes));
        let _ = self.tmp.remove(&reply_name);
        let response = result?;
        read.map_err(AttachError::io("cannot read the agent's reply"))?;
        Ok(Loaded {
            response,
            reply: reply::parse(&bytes),
        })
    }

    /// The agent's reply to a `load` of `library`, or why there is none.
    fn agent_reply(&self, loaded: Loaded, library: &Path) -> Result<Reply, AttachError> {
        let who = self.target.describe();
        let shown = escape::path(library);
        match (protocol::load_outcome(&loaded.response), loaded.reply) {
            (LoadOutcome::NotRun(text), _) => Err(AttachError::Unattachable(format!(
                "{who} did not load {shown}: {}",
                text.lines().map(str::trim).collect::<Vec<_>>().join(" ")
            ))),
            (LoadOutcome::Returned(_), Ok(reply)) => Ok(reply),
            (LoadOutcome::Returned(code), Err(ReplyError::Empty)) => {
                Err(AttachError::Peer(format!(
                    "{who} loaded {shown} (return code {code}), but the agent wrote no \
                     reply: that library is older than this otelprof, or not otelprof's"
                )))
            }
            (LoadOutcome::Returned(_), Err(e)) => Err(AttachError::Peer(format!("{who}: {e}"))),
        }
    }

    /// The path of `libotelprof.so` the JVM is to load.
    fn library_path(&mut self, notes: &mut Vec<String>) -> Result<PathBuf, AttachError> {
        let library = self
            .agent
            .map(|a| a.library.clone())
            .ok_or_else(|| AttachError::Usage("no agent library given".to_owned()))?;
        // An agent the JVM has already (`-agentpath`, `-javaagent`, an earlier attach by
        // another otelprof) is reached only by the path it was loaded from: another path
        // would be another copy, which the agent refuses to start.
        if let Some(loaded) = self.target.maps.agent.clone() {
            let loaded = PathBuf::from(loaded);
            let ours = (self.target.same_view && loaded == library)
                || (is_a_copy(&loaded)
                    && loaded.parent()
                        == Some(&Path::new(TMP).join(copy_dir_name(&self.read_own(&library)?))));
            if !ours {
                notes.push(format!(
                    "{} has otelprof's agent loaded from {}: talking to that one",
                    self.target.describe(),
                    escape::path(&loaded)
                ));
            }
            return Ok(loaded);
        }
        self.agent_file_path(&library, "libotelprof.so")
    }

    fn agent_file_path(&mut self, ours: &Path, file: &str) -> Result<PathBuf, AttachError> {
        // The JVM's user may open ours: we act as that user, so try.
        if self.target.same_view && File::open(ours).is_ok() {
            return Ok(ours.to_path_buf());
        }
        let content = self.read_own(ours)?;
        self.tmp
            .place(&copy_dir_name(&content), file, &content)
            .map_err(|why| {
                AttachError::Unattachable(format!(
                    "cannot place {file} where {} can open it: {why}",
                    self.target.describe()
                ))
            })
    }

    /// Reads `path` as ourselves (the JVM's user may not read it).
    fn read_own(&mut self, path: &Path) -> Result<Vec<u8>, AttachError> {
        creds::as_own(self.switched, || std::fs::read(path))
            .and_then(|read| read)
            .map_err(AttachError::io(format!(
                "cannot read {}",
                escape::path(path)
            )))
    }

    /// After `start`: loads `otelprof.jar` with the instrument agent for span context. Its
    /// failure is a note: profiling runs all the same.
    fn span_context(&mut self, outcome: &mut Outcome) {
        let Some(jar) = self.agent.and_then(|a| a.jar.clone()) else {
            return;
        };
        let result = self.agent_file_path(&jar, "otelprof.jar").and_then(|jar| {
            let text = utf8(&jar)?;
            if text.contains('=') {
                return Err(AttachError::Usage(format!(
                    "the path {} holds '=', which the instrument agent cannot take",
                    escape::path(&jar)
                )));
            }
            // The instrument agent takes `<jar>=<agentmain's argument>`.
            let loaded = self.load(
                "instrument",
                |reply| format!("{text}=reply={reply}"),
                "start (span context)",
            )?;
            Ok((jar, loaded))
        });
        let (jar, loaded) = match result {
            Ok(done) => done,
            Err(e) => {
                outcome.notes.push(format!("span context not started: {e}"));
                return;
            }
        };
        let who = self.target.describe();
        match (protocol::load_outcome(&loaded.response), loaded.reply) {
            (LoadOutcome::Returned(0), Ok(reply)) => {
                if reply.ok {
                    outcome.lines.extend(reply.lines.iter().skip(1).cloned());
                } else {
                    outcome.notes.push(format!(
                        "span context not started: {}",
                        reply.lines.join("; ")
                    ));
                }
            }
            (LoadOutcome::Returned(0), Err(e)) => outcome.notes.push(format!(
                "span context: {} loaded, but {e} (a jar older than this otelprof?)",
                escape::path(&jar)
            )),
            (LoadOutcome::Returned(code), _) => outcome.notes.push(format!(
                "span context not started: {who} could not start {} ({})",
                escape::path(&jar),
                instrument_code(code)
            )),
            (LoadOutcome::NotRun(text), _) => outcome.notes.push(format!(
                "span context not started: {who} did not load {}: {}",
                escape::path(&jar),
                text.lines().map(str::trim).collect::<Vec<_>>().join(" ")
            )),
        }
    }

    /// After `dump` with `-o`: reads the files the agent wrote at the name we asked for (or
    /// its variants for several profile types; never another name: the reply is the JVM's
    /// to write), for [`Done::finish`] to save, and shows their new names in the reply.
    fn take_dump(
        &mut self,
        outcome: &mut Outcome,
        dest: &Path,
        asked: &str,
    ) -> Result<Vec<(Vec<u8>, PathBuf, OsString)>, AttachError> {
        let ext = extension(dest);
        let mut save = Vec::new();
        for line in &mut outcome.lines {
            let Some(reported) = line.strip_prefix("file:").map(str::trim) else {
                continue;
            };
            let Some(to) = dump_destination(reported, asked, &ext, dest) else {
                continue;
            };
            let name = OsString::from(reported.trim_start_matches(TMP).trim_start_matches('/'));
            let bytes = self
                .tmp
                .read_ours(&name, DUMP_LIMIT, Trust::Data)
                .map_err(|why| AttachError::Peer(format!("the agent's dump: {why}")))?;
            *line = format!("file: {}", escape::path(&to));
            save.push((bytes, to, name));
        }
        if save.is_empty() {
            outcome.ok = false;
            outcome.notes.push(format!(
                "the agent wrote no file at {asked}: nothing to copy"
            ));
        }
        Ok(save)
    }
}

/// Where a file the agent reports for `dump,file=<asked>` goes when `-o dest` was given:
/// `asked` itself goes to `dest`; the agent's variant of it for one of several profile types
/// (`<stem>-<type><ext>`, or `<asked>-<type>`) to the same variant of `dest`. Any other path
/// is not ours to move: `None`.
fn dump_destination(reported: &str, asked: &str, ext: &str, dest: &Path) -> Option<PathBuf> {
    if reported == asked {
        return Some(dest.to_path_buf());
    }
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let dest_text = dest.to_str()?;
    let asked_stem = asked.strip_suffix(ext)?;
    let dest_stem = dest_text.strip_suffix(ext)?;
    if let Some(kind) = reported
        .strip_prefix(asked_stem)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_suffix(ext))
        .filter(|k| word(k))
    {
        return Some(PathBuf::from(format!("{dest_stem}-{kind}{ext}")));
    }
    let kind = reported.strip_prefix(asked)?.strip_prefix('-')?;
    word(kind).then(|| PathBuf::from(format!("{dest_text}-{kind}")))
}

/// The answer to `verb` for a JVM without the agent, in the agent's format.
fn not_loaded(verb: &Verb, pid: u32) -> Outcome {
    let lines = match verb {
        Verb::Status => vec![
            "ok".to_owned(),
            "state: not loaded".to_owned(),
            format!("pid: {pid}"),
            "note: no otelprof agent in this JVM (`start` loads it)".to_owned(),
        ],
        _ => vec!["error: not running (no otelprof agent in this JVM)".to_owned()],
    };
    Outcome {
        ok: matches!(verb, Verb::Status),
        lines,
        notes: Vec::new(),
    }
}

/// `otelprof-<first 16 hex digits of the SHA-256 of content>`: where a copy goes.
fn copy_dir_name(content: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, content);
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("otelprof-{hex}")
}

/// Whether `path` is a copy otelprof placed in a JVM's /tmp (`/tmp/otelprof-<16 hex>/…`).
fn is_a_copy(path: &Path) -> bool {
    let mut parts = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    parts.next().as_deref() == Some("/")
        && parts.next().as_deref() == Some("tmp")
        && parts.next().is_some_and(|d| {
            d.strip_prefix("otelprof-")
                .is_some_and(|h| h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()))
        })
}

/// `path` as text: the attach protocol carries C strings, and we send UTF-8.
fn utf8(path: &Path) -> Result<&str, AttachError> {
    path.to_str()
        .ok_or_else(|| AttachError::Usage(format!("the path {} is not UTF-8", escape::path(path))))
}

/// The extension of `dest` (`.pb.gz` of `cpu.pb.gz`), to tell the agent the format.
fn extension(dest: &Path) -> String {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.trim_start_matches('.').find('.') {
        Some(i) => {
            let ext = &name.trim_start_matches('.')[i..];
            if ext
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
            {
                ext.to_owned()
            } else {
                String::new()
            }
        }
        None => String::new(),
    }
}

/// What the JVM's instrument agent means by its return codes (JPLIS).
fn instrument_code(code: i32) -> String {
    match code {
        100 => "the jar is not a valid agent jar".to_owned(),
        101 => "the jar cannot be added to the class path".to_owned(),
        102 => "its agentmain threw".to_owned(),
        other => format!("return code {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_files_go_to_the_names_asked_for_and_no_others() {
        let asked = "/tmp/otelprof-dump-7-00ff.pb.gz";
        let dest = Path::new("out/now.pb.gz");
        let to = |r: &str| dump_destination(r, asked, ".pb.gz", dest);
        assert_eq!(to(asked), Some(PathBuf::from("out/now.pb.gz")));
        assert_eq!(
            to("/tmp/otelprof-dump-7-00ff-wall.pb.gz"),
            Some(PathBuf::from("out/now-wall.pb.gz"))
        );
        for other in [
            "/etc/shadow",
            "/tmp/otelprof-dump-7-00ff.pb.gz.tmp-1",
            "/tmp/otelprof-dump-7-00ff-../x.pb.gz",
            "/tmp/otelprof-dump-7-00ff-.pb.gz",
            "/tmp/otelprof-dump-7-00f.pb.gz",
        ] {
            assert_eq!(to(other), None, "{other}");
        }
        // No extension: the agent appends the type.
        let asked = "/tmp/otelprof-dump-7-00ff";
        assert_eq!(
            dump_destination("/tmp/otelprof-dump-7-00ff-cpu", asked, "", Path::new("p")),
            Some(PathBuf::from("p-cpu"))
        );
    }

    #[test]
    fn copies_are_named_after_their_content() {
        // SHA-256("abc") = ba7816bf8f01cfea…
        assert_eq!(copy_dir_name(b"abc"), "otelprof-ba7816bf8f01cfea");
        assert!(is_a_copy(Path::new(
            "/tmp/otelprof-ba7816bf8f01cfea/libotelprof.so"
        )));
        for other in [
            "/opt/otelprof/libotelprof.so",
            "/tmp/otelprof-xyz/libotelprof.so",
            "/var/tmp/otelprof-ba7816bf8f01cfea/libotelprof.so",
            "tmp/otelprof-ba7816bf8f01cfea/libotelprof.so",
        ] {
            assert!(!is_a_copy(Path::new(other)), "{other}");
        }
    }

    #[test]
    fn extensions_come_from_the_file_name_only() {
        assert_eq!(extension(Path::new("/x.y/cpu.pb.gz")), ".pb.gz");
        assert_eq!(extension(Path::new("profile")), "");
        assert_eq!(extension(Path::new(".hidden.pb")), ".pb");
        assert_eq!(extension(Path::new("a.b c")), "");
    }
}
