//! One-line log messages on stderr, prefixed `otelprof:`.
//!
//! The agent speaks rarely: one line when it starts, one when it stops, one per problem. Never
//! called from the signal handler.
#![forbid(unsafe_code)]

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much the agent says (`log=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogLevel {
    Quiet,
    Warn,
    Info,
    Debug,
}

static LEVEL: AtomicU8 = AtomicU8::new(level_rank(LogLevel::Info));

const fn level_rank(l: LogLevel) -> u8 {
    match l {
        LogLevel::Quiet => 0,
        LogLevel::Warn => 1,
        LogLevel::Info => 2,
        LogLevel::Debug => 3,
    }
}

pub(crate) fn set_level(l: LogLevel) {
    LEVEL.store(level_rank(l), Ordering::Relaxed);
}

pub(crate) fn enabled(l: LogLevel) -> bool {
    level_rank(l) <= LEVEL.load(Ordering::Relaxed) && l != LogLevel::Quiet
}

/// Writes `otelprof: <message>` as a single `write(2)` so lines from several threads do not
/// interleave. Errors are always printed, whatever the level: a user who passed a bad option
/// must learn why nothing was profiled.
pub(crate) fn line(l: LogLevel, args: std::fmt::Arguments<'_>) {
    if !enabled(l) {
        return;
    }
    write_line(args);
}

pub(crate) fn error(args: std::fmt::Arguments<'_>) {
    write_line(args);
}

fn write_line(args: std::fmt::Arguments<'_>) {
    let mut buf = Vec::with_capacity(160);
    let _ = write!(buf, "otelprof: ");
    let _ = buf.write_fmt(args);
    buf.push(b'\n');
    let _ = std::io::stderr().lock().write_all(&buf);
}

macro_rules! log_error { ($($t:tt)*) => { $crate::log::error(format_args!($($t)*)) } }
macro_rules! log_warn { ($($t:tt)*) => { $crate::log::line($crate::log::LogLevel::Warn, format_args!($($t)*)) } }
macro_rules! log_info { ($($t:tt)*) => { $crate::log::line($crate::log::LogLevel::Info, format_args!($($t)*)) } }
macro_rules! log_debug { ($($t:tt)*) => { $crate::log::line($crate::log::LogLevel::Debug, format_args!($($t)*)) } }
