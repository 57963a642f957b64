//! Remote control over OpAMP (`opamp=URL` or `OTELPROF_OPAMP_ENDPOINT`): the agent's side of
//! `otelprof_opamp::client`. The client runs on a thread of its own, one per JVM: started
//! by the first session that names a server ([`ensure_started`]), ended at VMDeath
//! ([`stop`]). This file gives it the agent's identity (the resource its profiles carry, and
//! the profiling options) and what runs ([`Running`], updated by the lifecycle at every start
//! and stop). What a server asks, a capture or continuous settings, is carried out by the
//! agent's lifecycle (`agent::control`), which registers itself as the client's [`Control`]
//! ([`set_control`]); this file never touches JVMTI or JNI after start.
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use otelprof_exporter::LogLevel;
use otelprof_opamp::client::{
    describe, instance_uid, AgentStatus, Control, OpampClient, OpampConfig, TypeState,
};
use otelprof_primitives::units::{format_duration, format_size};

use crate::options::Options;

/// The running client; taken at stop.
static CLIENT: Mutex<Option<OpampClient>> = Mutex::new(None);
/// What runs now (`None`: profiling is stopped), and the capture running, if any.
static RUNNING: Mutex<Option<(Running, Option<String>)>> = Mutex::new(None);
/// What carries out a server's requests (the agent's lifecycle).
static CONTROL: OnceLock<Arc<dyn Control>> = OnceLock::new();

/// How long the JVM's exit waits for the goodbye to the server.
const STOP_BOUND: Duration = Duration::from_millis(500);

/// What the agent runs, as decided at start: each type's interval when it runs, or why it
/// cannot (`Err`), or `Ok(None)` when it could but is off.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    pub(crate) cpu: Option<Duration>,
    pub(crate) wall: Option<Duration>,
    pub(crate) alloc: Result<Option<u32>, &'static str>,
    pub(crate) live: Result<Option<u32>, &'static str>,
    pub(crate) lock: Result<Option<Duration>, &'static str>,
}

fn type_state<T>(v: &Result<Option<T>, &'static str>, show: impl Fn(&T) -> String) -> TypeState {
    match v {
        Ok(Some(x)) => TypeState::Active(show(x)),
        Ok(None) => TypeState::Available,
        Err(why) => TypeState::Unavailable((*why).to_owned()),
    }
}

impl Running {
    /// The settings in force, in the remote settings' grammar.
    fn effective(&self) -> String {
        let d = |d: Option<Duration>| d.map_or("off".to_owned(), format_duration);
        let size = |b: Result<Option<u32>, &str>| {
            b.ok()
                .flatten()
                .map_or("off".to_owned(), |b| format_size(u64::from(b)))
        };
        format!(
            "cpu={},wall={},alloc={},live={},lock={}",
            d(self.cpu),
            d(self.wall),
            size(self.alloc),
            size(self.live),
            d(self.lock.ok().flatten()),
        )
    }
}

/// Says what runs from now on (`None`: profiling stopped), with the capture running.
pub(crate) fn update(running: Option<Running>, capture: Option<String>) {
    *RUNNING.lock().unwrap_or_else(|p| p.into_inner()) = running.map(|r| (r, capture));
}

/// Registers what carries out a server's requests; the first registration stands.
pub(crate) fn set_control(control: Arc<dyn Control>) {
    let _ = CONTROL.set(control);
}

/// The agent's status, as the client reports it: what runs now.
pub(crate) fn status() -> AgentStatus {
    let now = RUNNING.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let Some((r, capture)) = now else {
        return AgentStatus {
            healthy: false,
            status: "stopped".to_owned(),
            last_error: String::new(),
            types: Vec::new(),
            effective: "cpu=off,wall=off,alloc=off,live=off,lock=off".to_owned(),
        };
    };
    let dur = |d: &Duration| format_duration(*d);
    let types = vec![
        ("cpu", type_state(&Ok(r.cpu), dur)),
        ("wall", type_state(&Ok(r.wall), dur)),
        (
            "alloc",
            type_state(&r.alloc, |b| format_size(u64::from(*b))),
        ),
        ("live", type_state(&r.live, |b| format_size(u64::from(*b)))),
        ("lock", type_state(&r.lock, dur)),
    ];
    let on: Vec<String> = types
        .iter()
        .filter_map(|(name, s)| match s {
            TypeState::Active(every) => Some(format!("{name} {every}")),
            _ => None,
        })
        .collect();
    let mut status = format!("profiling {}", on.join(", "));
    if let Some(id) = capture {
        status.push_str(&format!(" (capture {id})"));
    }
    AgentStatus {
        healthy: true,
        status,
        last_error: String::new(),
        types,
        effective: r.effective(),
    }
}

/// The options a server may see: profiling choices, no path, endpoint or header.
fn shown_options(o: &Options) -> String {
    format!(
        "period={},depth={},clock={},wall_threads={},alloc_rate={}",
        format_duration(o.period),
        o.max_depth,
        o.clock.name(),
        o.wall_threads,
        o.alloc_rate
    )
}

/// What runs, for the client's reports: read once, on the starting thread (the client's
/// thread never calls JVMTI). `alloc`, `live` and `lock` say whether those engines were set
/// up.
pub(crate) fn engaged(
    jvmti: &crate::jvm::jvmti::Jvmti,
    cpu: Option<Duration>,
    (alloc, live, lock): (bool, bool, bool),
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
        live: if live {
            Ok(options.live_interval)
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

/// Starts the OpAMP client, unless it runs already (it lives as long as the JVM). Called on
/// a session's start, with the resource its profiles carry; a failure is one log line and
/// the agent goes on.
pub(crate) fn ensure_started(
    config: &OpampConfig,
    resource: &opentelemetry_sdk::Resource,
    options: &Options,
) {
    let mut client = CLIENT.lock().unwrap_or_else(|p| p.into_inner());
    if client.is_some() {
        return;
    }
    let Some(control) = CONTROL.get().cloned() else {
        log_warn!("the OpAMP client has nothing to carry out requests; remote control is off");
        return;
    };
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
    match OpampClient::start(config.clone(), uid, description, control, log) {
        Ok(c) => {
            log_info!(
                "managed over OpAMP by {} (polling every {:?})",
                otelprof_exporter::config::shown_endpoint(&config.endpoint),
                config.interval
            );
            *client = Some(c);
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
        let r = Running {
            cpu: Some(Duration::from_millis(10)),
            wall: None,
            alloc: Ok(Some(512 << 10)),
            live: Ok(Some(1 << 20)),
            lock: Err("this JVM cannot post monitor events"),
        };
        assert_eq!(
            r.effective(),
            "cpu=10ms,wall=off,alloc=512k,live=1m,lock=off"
        );
        update(Some(r), Some("c1".to_owned()));
        let s = status();
        assert!(s.healthy);
        assert_eq!(
            s.status,
            "profiling cpu 10ms, alloc 512k, live 1m (capture c1)"
        );
        assert_eq!(s.types[0], ("cpu", TypeState::Active("10ms".into())));
        assert_eq!(s.types[1], ("wall", TypeState::Available));
        assert!(matches!(s.types[4].1, TypeState::Unavailable(_)));
        update(None, None);
        assert!(!status().healthy);
    }

    #[test]
    fn shown_options_hold_no_path_or_endpoint() {
        let o = Options::parse("cpu=1ms,endpoint=http://secret:4318,period=10s").unwrap();
        let s = shown_options(&o);
        assert_eq!(
            s,
            "period=10s,depth=2048,clock=auto,wall_threads=16,alloc_rate=500"
        );
    }
}
