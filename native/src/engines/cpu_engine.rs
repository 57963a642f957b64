//! Which CPU engine a session runs (`clock=`), and the one log line that says which and why.
//!
//! | `clock=` | kernel allows perf events with kernel time | user-space perf events only | no perf events |
//! |---|---|---|---|
//! | `auto` (default) | perf, kernel frames | cpu | cpu |
//! | `perf` | perf, kernel frames | perf, user time only | cpu |
//! | `cpu` | cpu | cpu | cpu |
//! | `itimer` | itimer | itimer | itimer |
//!
//! `auto` does not take user-space-only events: they do not count the CPU time a thread
//! spends in the kernel at all (a thread writing to a pipe shows a fifth of its CPU), a bias
//! the tick-bound timers do not have. `clock=perf` takes them anyway, when asked.

use std::time::Duration;

use crate::options::Clock;
use crate::sampling::cpu_clock::CpuClock;
use crate::sampling::perf_events::{self, PerfConfig, Probe, Scope};

/// What samples CPU in a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// Each thread on its own: a perf event or a timer ([`CpuClock`]).
    PerThread(CpuClock),
    /// One `setitimer(ITIMER_PROF)` for the process.
    Itimer(Duration),
}

/// The engine chosen, with how the start line names it.
#[derive(Clone, Debug)]
pub(crate) struct Chosen {
    pub(crate) engine: Engine,
    /// e.g. `perf events (cpu-clock per thread, kernel frames)`.
    pub(crate) description: String,
    /// Why the engine asked for (or the best one) was not taken, if so.
    pub(crate) fallback: Option<String>,
}

impl Chosen {
    /// The one line the agent logs about its CPU engine.
    pub(crate) fn log_line(&self) -> String {
        match &self.fallback {
            None => format!("cpu engine: {}", self.description),
            Some(why) => format!("cpu engine: {}: {why}", self.description),
        }
    }
}

/// Chooses the engine for `clock` at `interval`, probing the kernel when perf events are in
/// question.
pub(crate) fn choose(clock: Clock, interval: Duration) -> Chosen {
    let signo = libc::SIGPROF;
    let timers = CpuClock::Timer { interval, signo };
    let timers_named = "cpu (a CPU-time timer per thread: tick-bound, no kernel frames)";
    let chosen = |engine, description: &str, fallback: Option<String>| Chosen {
        engine,
        description: description.to_owned(),
        fallback,
    };
    let perf = |scope| {
        Engine::PerThread(CpuClock::Perf(PerfConfig {
            interval,
            scope,
            signo,
        }))
    };
    match clock {
        Clock::ThreadCpu => chosen(Engine::PerThread(timers), timers_named, None),
        Clock::Itimer => chosen(
            Engine::Itimer(interval),
            "itimer (one setitimer(ITIMER_PROF) for the process)",
            None,
        ),
        Clock::Auto | Clock::Perf => match perf_events::probe(interval) {
            Probe::Kernel => chosen(
                perf(Scope::Kernel),
                &format!(
                    "perf (a cpu-clock event per thread, {}",
                    kernel_frames_note()
                ),
                None,
            ),
            Probe::UserOnly(e) if clock == Clock::Perf => chosen(
                perf(Scope::User),
                "perf, user time only (a cpu-clock event per thread that does not count \
                 time spent in the kernel, no kernel frames)",
                Some(format!(
                    "events that count the kernel are refused ({e}{})",
                    paranoid()
                )),
            ),
            Probe::UserOnly(e) => chosen(
                Engine::PerThread(timers),
                timers_named,
                Some(format!(
                    "perf_event_open with kernel time refused ({e}{}); user-space events would \
                     miss the CPU time spent in the kernel (clock=perf to use them anyway)",
                    paranoid()
                )),
            ),
            Probe::Refused(e) => chosen(
                Engine::PerThread(timers),
                timers_named,
                Some(format!(
                    "perf_event_open refused ({e}{}): a seccomp filter, \
                     kernel.perf_event_paranoid, or no CAP_PERFMON",
                    paranoid()
                )),
            ),
        },
    }
}

/// How kernel frames will be named (the end of the description).
fn kernel_frames_note() -> &'static str {
    if otelprof_native_frames::kallsyms::KernelSymbols::visible() {
        "kernel frames)"
    } else {
        "kernel time counted, kernel frames unnamed: /proc/kallsyms shows no addresses)"
    }
}

/// `; kernel.perf_event_paranoid=N`, when readable.
fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|v| format!("; kernel.perf_event_paranoid={}", v.trim()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_choices_need_no_probe_and_auto_agrees_with_the_probe() {
        let ms = Duration::from_millis(1);
        let cpu = choose(Clock::ThreadCpu, ms);
        assert!(matches!(
            cpu.engine,
            Engine::PerThread(CpuClock::Timer { .. })
        ));
        assert!(cpu.fallback.is_none());
        assert!(cpu.log_line().starts_with("cpu engine: cpu ("));
        assert_eq!(choose(Clock::Itimer, ms).engine, Engine::Itimer(ms));
        let auto = choose(Clock::Auto, ms);
        match perf_events::probe(ms) {
            Probe::Kernel => {
                assert!(matches!(
                    auto.engine,
                    Engine::PerThread(CpuClock::Perf(PerfConfig {
                        scope: Scope::Kernel,
                        ..
                    }))
                ));
                assert!(auto.log_line().starts_with("cpu engine: perf ("));
            }
            Probe::UserOnly(_) | Probe::Refused(_) => {
                assert!(matches!(
                    auto.engine,
                    Engine::PerThread(CpuClock::Timer { .. })
                ));
                let line = auto.log_line();
                assert!(line.contains("perf_event_open"), "{line}");
            }
        }
    }
}
