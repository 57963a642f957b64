//! Remote control over OpAMP (`opamp=URL` or `OTELPROF_OPAMP_ENDPOINT`): the agent's side of
//! `otelprof_exporter::opamp`. The client runs on a thread of its own; this file gives it the
//! agent's identity (the resource its profiles carry, and the profiling options) and
//! implements [`Control`], so the client's thread only ever reads a snapshot taken at start
//! and the sampler's active flag. It never touches JVMTI or JNI.
//!
//! What is applied: nothing yet. A capture starts extra engines (wall, alloc, lock) for a
//! bounded time and tags their profiles with its id; continuous settings restart engines with
//! new intervals. Both need the agent's start and stop to be restartable, which the
//! `h-attach-native` branch is making so; until that lands here, [`apply_capture`] and
//! [`apply_settings`] refuse with that reason, which the server shows. Identity, health,
//! profile types and options are reported.
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use otelprof_exporter::opamp::{
    describe, instance_uid, AgentStatus, Control, OpampClient, OpampConfig, TypeState,
};
use otelprof_exporter::LogLevel;
use otelprof_profile::opamp::capture::Capture;
use otelprof_profile::opamp::engines::{format_duration, format_size};
use otelprof_profile::opamp::settings::Settings;

use crate::options::{Clock, Options};

/// The running client; taken at stop.
static CLIENT: Mutex<Option<OpampClient>> = Mutex::new(None);

/// How long the JVM's exit waits for the goodbye to the server.
const STOP_BOUND: Duration = Duration::from_millis(500);

/// What the agent runs, as decided at start: each type's interval when it runs, or why it
/// cannot (`Err`), or `Ok(None)` when it could but is off.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    pub(crate) cpu: Option<Duration>,
    pub(crate) wall: Option<Duration>,
    pub(crate) alloc: Result<Option<u32>, &'static str>,
    pub(crate) lock: Result<Option<Duration>, &'static str>,
}

struct AgentControl {
    running: Running,
}

fn type_state<T>(v: &Result<Option<T>, &'static str>, show: impl Fn(&T) -> String) -> TypeState {
    match v {
        Ok(Some(x)) => TypeState::Active(show(x)),
        Ok(None) => TypeState::Available,
        Err(why) => TypeState::Unavailable((*why).to_owned()),
    }
}

impl AgentControl {
    /// The settings in force, in the remote settings' grammar.
    fn effective(&self) -> String {
        let r = &self.running;
        let d = |d: Option<Duration>| d.map_or("off".to_owned(), format_duration);
        format!(
            "cpu={},wall={},alloc={},lock={}",
            d(r.cpu),
            d(r.wall),
            r.alloc
                .ok()
                .flatten()
                .map_or("off".to_owned(), |b| format_size(u64::from(b))),
            d(r.lock.ok().flatten()),
        )
    }
}

impl Control for AgentControl {
    fn capture(&self, capture: &Capture) -> Result<(), String> {
        apply_capture(capture)
    }

    fn settings(&self, settings: &Settings) -> Result<(), String> {
        apply_settings(settings)
    }

    fn status(&self) -> AgentStatus {
        let r = &self.running;
        let active = crate::sampling::signal_handler::is_active();
        let dur = |d: &Duration| format_duration(*d);
        let types = vec![
            ("cpu", type_state(&Ok(r.cpu), dur)),
            ("wall", type_state(&Ok(r.wall), dur)),
            (
                "alloc",
                type_state(&r.alloc, |b| format_size(u64::from(*b))),
            ),
            ("lock", type_state(&r.lock, dur)),
        ];
        let on: Vec<String> = types
            .iter()
            .filter_map(|(name, s)| match s {
                TypeState::Active(every) => Some(format!("{name} {every}")),
                _ => None,
            })
            .collect();
        AgentStatus {
            healthy: active,
            status: if active {
                format!("profiling {}", on.join(", "))
            } else {
                "stopped".to_owned()
            },
            last_error: String::new(),
            types,
            effective: self.effective(),
        }
    }
}

/// Starts a capture: extra engines for `capture.duration`, their profiles tagged with
/// `otelprof.capture.id`. Refused on this branch: the agent cannot start and stop engines
/// after VMInit until its lifecycle is restartable (branch `h-attach-native`).
fn apply_capture(capture: &Capture) -> Result<(), String> {
    Err(format!(
        "this agent cannot start engines at run time yet ({} for {}s not started): its start \
         and stop are one-shot until the restartable lifecycle lands",
        capture.engines.text(),
        capture.duration.as_secs()
    ))
}

/// Applies continuous settings (engines restarted with the new intervals). Refused on this
/// branch for the reason of [`apply_capture`].
fn apply_settings(settings: &Settings) -> Result<(), String> {
    Err(format!(
        "this agent cannot change its engines at run time yet ({} not applied): its start and \
         stop are one-shot until the restartable lifecycle lands",
        if settings.text().is_empty() {
            "the local options".to_owned()
        } else {
            settings.text()
        }
    ))
}

/// The options a server may see: profiling choices, no path, endpoint or header.
fn shown_options(o: &Options) -> String {
    format!(
        "period={},depth={},clock={},wall_threads={},alloc_rate={}",
        format_duration(o.period),
        o.max_depth,
        match o.clock {
            Clock::ThreadCpu => "cpu",
            Clock::Itimer => "itimer",
        },
        o.wall_threads,
        o.alloc_rate
    )
}

/// What runs, for the client's reports: read once, on the starting thread (the client's
/// thread never calls JVMTI). `alloc` and `lock` say whether those engines were set up.
pub(crate) fn engaged(
    jvmti: &crate::jvm::jvmti::Jvmti,
    cpu: Option<Duration>,
    alloc: bool,
    lock: bool,
    options: &Options,
) -> Running {
    use crate::sys::capability::{
        CAN_GENERATE_MONITOR_EVENTS, CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS, CAN_TAG_OBJECTS,
    };
    let potential = jvmti.potential_capabilities().ok();
    let can = |bit: u32| potential.is_some_and(|p| p.has(bit) && p.has(CAN_TAG_OBJECTS));
    Running {
        cpu,
        wall: options.wall_interval,
        alloc: if alloc {
            Ok(options.alloc_interval)
        } else if can(CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS) {
            Ok(None)
        } else {
            Err("this JVM cannot post sampled allocation events")
        },
        lock: if lock {
            Ok(options.lock_threshold)
        } else if can(CAN_GENERATE_MONITOR_EVENTS) {
            Ok(None)
        } else {
            Err("this JVM cannot post monitor events")
        },
    }
}

/// Starts the OpAMP client when one is configured. Called once the agent is profiling, with
/// the resource its profiles carry; a failure is one log line and the agent goes on.
pub(crate) fn start(
    config: Option<&OpampConfig>,
    resource: &opentelemetry_sdk::Resource,
    options: &Options,
    running: Running,
) {
    let Some(config) = config else { return };
    let mut random = [0u8; 16];
    let _ = crate::otlp_export::getrandom_fill(&mut random);
    let instance = resource
        .get(&opentelemetry::Key::from_static_str("service.instance.id"))
        .map(|v| v.to_string());
    let now_millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let uid = instance_uid(instance.as_deref(), now_millis, random);
    let description = describe(resource, &[("otelprof.options", shown_options(options))]);
    let log: otelprof_exporter::Logger = Arc::new(|level: LogLevel, msg: &str| match level {
        LogLevel::Warn => log_warn!("{msg}"),
        LogLevel::Info => log_info!("{msg}"),
        LogLevel::Debug => log_debug!("{msg}"),
    });
    let control = Arc::new(AgentControl { running });
    match OpampClient::start(config.clone(), uid, description, control, log) {
        Ok(client) => {
            log_info!(
                "managed over OpAMP by {} (polling every {:?})",
                otelprof_exporter::config::shown_endpoint(&config.endpoint),
                config.interval
            );
            *CLIENT.lock().unwrap_or_else(|p| p.into_inner()) = Some(client);
        }
        Err(e) => log_warn!("cannot start the OpAMP client: {e}; remote control is off"),
    }
}

/// Says goodbye to the server (bounded) and stops the client.
pub(crate) fn stop() {
    let client = CLIENT.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(c) = client {
        c.stop(STOP_BOUND);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_effective_settings_say_what_runs() {
        let c = AgentControl {
            running: Running {
                cpu: Some(Duration::from_millis(10)),
                wall: None,
                alloc: Ok(Some(512 << 10)),
                lock: Err("this JVM cannot post monitor events"),
            },
        };
        assert_eq!(c.effective(), "cpu=10ms,wall=off,alloc=512k,lock=off");
        let s = c.status();
        assert_eq!(s.types[0], ("cpu", TypeState::Active("10ms".into())));
        assert_eq!(s.types[1], ("wall", TypeState::Available));
        assert!(matches!(s.types[3].1, TypeState::Unavailable(_)));
        let capture = Capture::parse("id=c,wall=20ms,seconds=5").unwrap();
        assert!(c
            .capture(&capture)
            .unwrap_err()
            .contains("wall=20ms for 5s"));
    }

    #[test]
    fn shown_options_hold_no_path_or_endpoint() {
        let o = Options::parse("cpu=1ms,endpoint=http://secret:4318,period=10s").unwrap();
        let s = shown_options(&o);
        assert_eq!(
            s,
            "period=10s,depth=2048,clock=cpu,wall_threads=16,alloc_rate=500"
        );
    }
}
