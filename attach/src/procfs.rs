//! What `/proc/PID/{status,maps,cmdline,environ}` say about a process, read from their text
//! (no I/O here). The kernel writes these files, but a process names itself (`Name:`,
//! `cmdline`) and maps files whose names anyone chooses, so every field is parsed with care
//! and a missing or odd one is an error that names it, never a panic.

/// The facts of `/proc/PID/status` that attaching needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The process's name (`comm`, at most 15 bytes, chosen by the process).
    pub name: String,
    /// `R`, `S`, `D`, `Z` (zombie), `X` (dead), …
    pub state: char,
    /// Effective user and group ids, as seen from our user namespace.
    pub euid: u32,
    pub egid: u32,
    /// The pid the process sees for itself: the last `NSpid` entry (its innermost pid
    /// namespace), or `pid` on kernels without `NSpid`.
    pub nspid: u32,
    /// Signals with a handler installed (`SigCgt`) and ignored (`SigIgn`), bit N-1 for
    /// signal N.
    pub caught: u64,
    pub ignored: u64,
}

impl Status {
    /// Whether SIGQUIT would run a handler: sending it otherwise would kill the process (the
    /// default action) or do nothing.
    pub fn catches_sigquit(&self) -> bool {
        let bit = 1u64 << (libc::SIGQUIT - 1);
        self.caught & bit != 0 && self.ignored & bit == 0
    }
}

/// Parses `/proc/PID/status`; `pid` is the pid we know the process by.
pub fn parse_status(text: &str, pid: u32) -> Result<Status, String> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .map(str::trim)
    };
    let need = |key: &str| field(key).ok_or_else(|| format!("no {key}: line"));
    // Uid/Gid: real, effective, saved, filesystem.
    let second = |key: &str| -> Result<u32, String> {
        need(key)?
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("unreadable {key}: line"))
    };
    let mask = |key: &str| -> Result<u64, String> {
        u64::from_str_radix(need(key)?, 16).map_err(|_| format!("unreadable {key}: line"))
    };
    let nspid = match field("NSpid") {
        Some(list) => list
            .split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .ok_or("unreadable NSpid: line")?,
        None => pid,
    };
    Ok(Status {
        name: need("Name")?.to_owned(),
        state: need("State")?.chars().next().ok_or("empty State: line")?,
        euid: second("Uid")?,
        egid: second("Gid")?,
        nspid,
        caught: mask("SigCgt")?,
        ignored: mask("SigIgn")?,
    })
}

/// What a JVM's memory maps show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Maps {
    /// Path of the mapped `libjvm.so` (HotSpot), as the process sees it.
    pub libjvm: Option<String>,
    /// Path of the mapped performance-data file (`/tmp/hsperfdata_<user>/<pid>`), if the JVM
    /// shares one (`-XX:-UsePerfData` and `-XX:+PerfDisableSharedMem` turn it off).
    pub perfdata: Option<String>,
    /// Path of an otelprof agent the JVM has loaded already (`-agentpath`, `-javaagent`, an
    /// earlier attach), even if the file was replaced since: the one path that reaches it.
    pub agent: Option<String>,
}

/// Scans `/proc/PID/maps` for `libjvm.so` and the `hsperfdata` file.
pub fn scan_maps(text: &str) -> Maps {
    let mut maps = Maps::default();
    for line in text.lines() {
        // address perms offset dev inode path: the path starts after the fifth field.
        let Some(path) = nth_field_rest(line, 5) else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        if let Some(loaded) = path.strip_suffix(" (deleted)") {
            // A library rebuilt since it was loaded: the loader still knows it by this name.
            if maps.agent.is_none() && loaded.ends_with("/libotelprof.so") {
                maps.agent = Some(loaded.to_owned());
            }
            continue;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        if maps.agent.is_none() && file == "libotelprof.so" {
            maps.agent = Some(path.to_owned());
        }
        if maps.libjvm.is_none() && file == "libjvm.so" {
            maps.libjvm = Some(path.to_owned());
        }
        if maps.perfdata.is_none()
            && path
                .rsplit('/')
                .nth(1)
                .is_some_and(|dir| dir.starts_with("hsperfdata_"))
        {
            maps.perfdata = Some(path.to_owned());
        }
    }
    maps
}

/// `line` after its first `n` whitespace-separated fields, trimmed at the start.
fn nth_field_rest(line: &str, n: usize) -> Option<&str> {
    let mut rest = line;
    for _ in 0..n {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace)?;
        rest = &rest[end..];
    }
    let rest = rest.trim_start();
    (!rest.is_empty()).then_some(rest)
}

/// Whether the JVM's own arguments turn `DisableAttachMechanism` on (`Some(true)`), off
/// (`Some(false)`) or do not mention it (`None`). Read from the command line and the
/// variables the launcher reads options from (`JDK_JAVA_OPTIONS`, `JAVA_TOOL_OPTIONS`,
/// `_JAVA_OPTIONS`); the last mention wins, as in HotSpot. Only a fallback for JVMs without
/// a performance-data file (which states the flag exactly): options can also come from
/// `@argfiles` or `-XX:Flags=`, which are not read.
pub fn disable_attach_flag(cmdline: &[u8], environ: &[u8]) -> Option<bool> {
    const VARS: [&[u8]; 3] = [
        b"JDK_JAVA_OPTIONS=",
        b"JAVA_TOOL_OPTIONS=",
        b"_JAVA_OPTIONS=",
    ];
    let mut verdict = None;
    let mut look = |word: &[u8]| match word {
        b"-XX:+DisableAttachMechanism" => verdict = Some(true),
        b"-XX:-DisableAttachMechanism" => verdict = Some(false),
        _ => {}
    };
    // HotSpot reads JAVA_TOOL_OPTIONS before the command line and _JAVA_OPTIONS after it.
    let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
    let words = |var: &[u8]| -> Vec<Vec<u8>> {
        vars.iter()
            .filter_map(|v| v.strip_prefix(var))
            .flat_map(|v| v.split(|b| b.is_ascii_whitespace()).map(<[u8]>::to_vec))
            .collect()
    };
    for w in words(VARS[1]).iter().chain(&words(VARS[0])) {
        look(w);
    }
    for arg in cmdline.split(|&b| b == 0) {
        look(arg);
    }
    for w in &words(VARS[2]) {
        look(w);
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    const JVM_STATUS: &str = "Name:\tjava\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t24538\n\
        Pid:\t24538\nUid:\t1000\t1001\t1000\t1001\nGid:\t50\t51\t50\t51\nNSpid:\t24538\t7\n\
        SigBlk:\t0000000000000000\nSigIgn:\t0000000000000002\nSigCgt:\t0000000101005ccd\n";

    #[test]
    fn status_gives_effective_ids_innermost_pid_and_signals() {
        let s = parse_status(JVM_STATUS, 24538).unwrap();
        assert_eq!(s.name, "java");
        assert_eq!(s.state, 'S');
        assert_eq!((s.euid, s.egid), (1001, 51));
        assert_eq!(s.nspid, 7);
        assert!(s.catches_sigquit());
    }

    #[test]
    fn sigquit_must_be_caught_and_not_ignored() {
        // `sleep`: no handlers at all (SIGQUIT's default action dumps core).
        let plain = JVM_STATUS.replace("0000000101005ccd", "0000000000000000");
        assert!(!parse_status(&plain, 1).unwrap().catches_sigquit());
        let ignored = JVM_STATUS.replace("SigIgn:\t0000000000000002", "SigIgn:\t0000000000000004");
        assert!(!parse_status(&ignored, 1).unwrap().catches_sigquit());
    }

    #[test]
    fn old_kernels_without_nspid_use_the_pid() {
        let old: String = JVM_STATUS
            .lines()
            .filter(|l| !l.starts_with("NSpid"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(parse_status(&old, 42).unwrap().nspid, 42);
    }

    #[test]
    fn odd_status_files_are_errors_not_panics() {
        for text in [
            "",
            "Name:\tx\n",
            "Name:\tx\nState:\tS\nUid:\t0\nGid:\t0 0\nSigCgt:\t0\nSigIgn:\t0\n",
            "Name:\tx\nState:\t\nUid:\t0 0\nGid:\t0 0\nSigCgt:\t0\nSigIgn:\t0\n",
            "Name:\tx\nState:\tS\nUid:\t0 0\nGid:\t0 0\nSigCgt:\tzz\nSigIgn:\t0\n",
            "Name:\tx\nState:\tS\nUid:\t0 0\nGid:\t0 0\nSigCgt:\t0\nSigIgn:\t0\nNSpid:\t\n",
        ] {
            assert!(parse_status(text, 1).is_err(), "{text:?}");
        }
    }

    #[test]
    fn maps_find_libjvm_and_perfdata_only_as_whole_names() {
        let text = "\
7f96a4e00000-7f96a5051000 r--p 00000000 fe:00 315160                     /usr/lib/jvm/java-17/lib/server/libjvm.so
7f96a6191000-7f96a6199000 rw-s 00000000 fe:00 10018817                   /tmp/hsperfdata_app user/24538
7f96a6191000-7f96a6199000 rw-p 00000000 00:00 0
7ffd1000-7ffd2000 rw-p 00000000 00:00 0                                  [stack]
";
        let maps = scan_maps(text);
        assert_eq!(
            maps.libjvm.as_deref(),
            Some("/usr/lib/jvm/java-17/lib/server/libjvm.so")
        );
        assert_eq!(
            maps.perfdata.as_deref(),
            Some("/tmp/hsperfdata_app user/24538")
        );

        let impostors = "\
1000-2000 r--p 00000000 fe:00 1   /opt/notlibjvm.so
1000-2000 r--p 00000000 fe:00 1   /opt/libjvm.so.bak
1000-2000 r--p 00000000 fe:00 1   /opt/libjvm.so (deleted)
1000-2000 r--p 00000000 fe:00 1   /tmp/hsperfdata_x
";
        assert_eq!(scan_maps(impostors), Maps::default());
    }

    #[test]
    fn disable_attach_flag_last_mention_wins() {
        let cmd = b"java\0-XX:+DisableAttachMechanism\0-cp\0.\0Main\0";
        assert_eq!(disable_attach_flag(cmd, b""), Some(true));
        assert_eq!(disable_attach_flag(b"java\0Main\0", b"PATH=/bin\0"), None);
        // _JAVA_OPTIONS comes after the command line; JAVA_TOOL_OPTIONS before it.
        let env = b"JAVA_TOOL_OPTIONS=-Xmx1g -XX:-DisableAttachMechanism\0";
        assert_eq!(disable_attach_flag(cmd, env), Some(true));
        let env = b"_JAVA_OPTIONS=-XX:-DisableAttachMechanism\0";
        assert_eq!(disable_attach_flag(cmd, env), Some(false));
        let env = b"JAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism\0";
        assert_eq!(disable_attach_flag(b"java\0Main\0", env), Some(true));
    }
}
