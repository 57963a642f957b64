//! Text from outside, made safe to print on a terminal.
//!
//! Function, file, thread and endpoint names, attribute values, file names and the errors that
//! quote them all come from files anyone can write or from requests anyone can send. A terminal
//! obeys the control characters in what it prints: `ESC ] 0 ;` retitles the window, `ESC [ 2 J`
//! clears it, a carriage return overwrites the line, a C1 CSI (U+009B) starts an escape sequence
//! on terminals that honour 8-bit controls, and the bidirectional overrides (U+202E…) reorder
//! what the reader sees ("Trojan Source"). So every character that is not drawn as itself is
//! shown escaped, visibly, in the notation Rust and C use:
//!
//! - `\t`, `\n`, `\r`;
//! - other ASCII controls and DEL as `\xNN` (`\x1b`), and so are bytes of a file name that are
//!   not UTF-8 (a lone `\xe9` from a Latin-1 name): `\xNN` always stands for one byte;
//! - C1 controls, the bidirectional controls and the line and paragraph separators as
//!   `\u{NNNN}` (`\u{202e}`).
//!
//! A backslash is left as it is: escaping it would double every backslash of a Windows path
//! for no gain in safety (a literal `\x1b` is four harmless characters).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// How much of a value an error message quotes (characters).
pub const QUOTE_CHARS: usize = 64;

/// How long an error line may grow (characters) before its middle is cut.
pub const LINE_CHARS: usize = 1024;

/// Whether a terminal would act on `c` instead of drawing it.
fn is_control(c: char) -> bool {
    c.is_control() // C0, DEL and C1 (general category Cc)
        || matches!(c,
            // Bidi_Control: ALM, LRM, RLM, the embeddings and overrides, the isolates.
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            // Line and paragraph separators, which some terminals treat as line breaks.
            | '\u{2028}' | '\u{2029}')
}

fn push_escaped(c: char, out: &mut String) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

fn escape_into(s: &str, keep_newlines: bool, out: &mut String) {
    for c in s.chars() {
        if is_control(c) && !(keep_newlines && c == '\n') {
            push_escaped(c, out);
        } else {
            out.push(c);
        }
    }
}

fn escape_with(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s
        .chars()
        .any(|c| is_control(c) && !(keep_newlines && c == '\n'))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    escape_into(s, keep_newlines, &mut out);
    Cow::Owned(out)
}

/// `s` with every control character escaped (see the module docs): one line of text, safe on
/// any terminal.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_with(s, false)
}

/// Like [`escape`], but line breaks stay line breaks: for whole blocks of output whose lines
/// the CLI itself made (the last line of defence of the CLI's output).
pub fn escape_keeping_newlines(s: &str) -> Cow<'_, str> {
    escape_with(s, true)
}

/// Bytes that should be UTF-8 (a file name), escaped: valid text as [`escape`] does, every
/// byte that is not UTF-8 as `\xNN`. Nothing is lost, unlike `to_string_lossy`'s U+FFFD.
pub fn escape_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return escape(s);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        escape_into(chunk.valid(), false, &mut out);
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// A path for a terminal: any bytes, escaped ([`escape_bytes`]).
pub fn path(p: &Path) -> Cow<'_, str> {
    escape_bytes(p.as_os_str().as_bytes())
}

/// A value quoted in an error message: in double quotes, escaped, and cut after
/// [`QUOTE_CHARS`] characters with `…`, so that a megabyte of input does not come back as a
/// megabyte of error.
pub fn quote(s: &str) -> String {
    let mut cut = s
        .char_indices()
        .nth(QUOTE_CHARS)
        .map_or(s, |(i, _)| &s[..i]);
    let more = cut.len() < s.len();
    if more {
        cut = cut.trim_end();
    }
    format!("\"{}{}\"", escape(cut), if more { "…" } else { "" })
}

/// An error message for a terminal: every line escaped ([`line`]); the line breaks stay, for
/// the few errors that carry a block of text (a failed program's output in `demo`).
pub fn message(s: &str) -> String {
    s.split('\n').map(line).collect::<Vec<_>>().join("\n")
}

/// One printable line: escaped, and when longer than [`LINE_CHARS`] characters, its middle
/// cut out (the start says what failed, the end usually why), so that an error quoting a huge
/// input stays readable.
pub fn line(s: &str) -> String {
    let escaped = escape(s);
    let chars = escaped.chars().count();
    if chars <= LINE_CHARS {
        return escaped.into_owned();
    }
    let keep = LINE_CHARS / 2;
    let head: String = escaped.chars().take(keep).collect();
    let tail: String = escaped.chars().skip(chars - keep).collect();
    format!("{head} …[{} characters cut]… {tail}", chars - 2 * keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_shown_not_obeyed() {
        let attack =
            "a\x1b]0;pwned\x07\x1b[2J\rb\u{85}\u{9b}31m\u{202e}gnp\u{2066}\u{2028}\x7f\t\n";
        let safe = escape(attack);
        assert_eq!(
            safe,
            "a\\x1b]0;pwned\\x07\\x1b[2J\\rb\\u{85}\\u{9b}31m\\u{202e}gnp\\u{2066}\\u{2028}\\x7f\\t\\n"
        );
        assert!(!safe.chars().any(is_control), "{safe}");
    }

    #[test]
    fn ordinary_text_is_untouched_and_not_copied() {
        for s in [
            "com.example.Shop.checkout",
            "GET /owners/{id}",
            "C:\\src\\Shop.java",
            "Größe → 数据 🚀",
            "",
        ] {
            assert!(matches!(escape(s), Cow::Borrowed(_)), "{s}");
        }
        // Escaping is idempotent: escaped text has nothing left to escape.
        let once = escape("x\x1by").into_owned();
        assert_eq!(escape(&once), once);
    }

    #[test]
    fn blocks_keep_their_line_breaks_only() {
        assert_eq!(
            escape_keeping_newlines("row 1\nrow\r2\x1b[0m\n"),
            "row 1\nrow\\r2\\x1b[0m\n"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_bytes() {
        assert_eq!(escape_bytes(b"caf\xe9.otlp.pb"), "caf\\xe9.otlp.pb");
        assert_eq!(escape_bytes(b"\xff\x1b[31m\xc3\xa9"), "\\xff\\x1b[31mé");
        let p = Path::new(std::ffi::OsStr::from_bytes(b"/store/\xe9\r.pb"));
        assert_eq!(path(p), "/store/\\xe9\\r.pb");
    }

    #[test]
    fn quotes_are_short_and_escaped() {
        assert_eq!(quote("0.0.0.0:x"), "\"0.0.0.0:x\"");
        let long = format!("{}\x1b[31m", "a".repeat(200));
        let q = quote(&long);
        assert_eq!(q, format!("\"{}…\"", "a".repeat(QUOTE_CHARS)));
        assert_eq!(quote("\x1b[2J"), "\"\\x1b[2J\"");
        // Cut on a character, never inside one.
        let wide = "é".repeat(100);
        assert_eq!(quote(&wide).chars().count(), QUOTE_CHARS + 3);
    }

    #[test]
    fn long_error_lines_lose_their_middle() {
        let short = "--where: \"a=b\x1b\" is bad";
        assert_eq!(line(short), "--where: \"a=b\\x1b\" is bad");
        let huge = format!("--where: \"{}\" is not key=value", "v".repeat(100_000));
        let l = line(&huge);
        assert!(l.starts_with("--where: \"vvv"), "{l}");
        assert!(l.ends_with("vvv\" is not key=value"), "{l}");
        assert!(l.contains("characters cut"), "{l}");
        assert!(l.chars().count() < LINE_CHARS + 40, "{}", l.len());
        let block = format!("javac failed:\n{huge}\n\x1b[2Jdone");
        let m = message(&block);
        let lines: Vec<&str> = m.lines().collect();
        assert_eq!(lines.len(), 3, "{m}");
        assert_eq!(lines[1], l);
        assert_eq!(lines[2], "\\x1b[2Jdone");
    }
}
