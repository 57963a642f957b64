//! The agent's side of an OpAMP conversation, without I/O: which `AgentToServer` to send
//! next ([`Session::next_message`]) and what to do with the `ServerToAgent` that answers it
//! ([`Session::handle`]). The client thread ([`super::poll`]) only moves bytes and waits.
//!
//! Status is reported in full in the first message, after the server asks for it
//! (ReportFullState), after a failed exchange (the server may have missed a report), and
//! whenever what the agent reports changed; every other poll carries only the instance uid,
//! the sequence number and the capabilities (the spec's compression). One capture status
//! rides in each message (a `CustomMessage` is singular); while any wait, the next message
//! goes at once.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::capture::{self, Capture, State, Status};
use crate::engines::shown;
use crate::proto::{
    agent_capabilities as caps, server_to_agent_flags, AgentConfigFile, AgentConfigMap,
    AgentDescription, AgentDisconnect, AgentToServer, ComponentHealth, CustomCapabilities,
    CustomMessage, EffectiveConfig, RemoteConfigStatus, RemoteConfigStatuses,
    ServerErrorResponseType, ServerToAgent,
};
use crate::settings::{self, Settings};

use super::control::{AgentStatus, Control, TypeState};

/// What otelprof's agent can do, as OpAMP capability bits.
pub const CAPABILITIES: u64 = caps::REPORTS_STATUS
    | caps::ACCEPTS_REMOTE_CONFIG
    | caps::REPORTS_EFFECTIVE_CONFIG
    | caps::REPORTS_HEALTH
    | caps::REPORTS_REMOTE_CONFIG
    | caps::REPORTS_HEARTBEAT;

/// Captures whose ids are remembered (a repeated offer is answered, never run twice).
const KNOWN_CAPTURES: usize = 64;

/// What an answer asks of the client loop.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Send the next message now rather than after the poll interval.
    pub send_now: bool,
    /// The server asked to wait this long (UNAVAILABLE with retry info).
    pub retry_after: Option<Duration>,
    /// The server reported an error, to log.
    pub error: Option<String>,
}

pub struct Session {
    uid: [u8; 16],
    sequence: u64,
    description: AgentDescription,
    control: Arc<dyn Control>,
    start_time: u64,
    full_state_due: bool,
    reported: Option<AgentStatus>,
    status_time: u64,
    /// The last remote config's hash and what became of it; sent until an exchange succeeds.
    remote_status: Option<RemoteConfigStatus>,
    remote_status_due: bool,
    captures: VecDeque<(String, State)>,
    outbox: VecDeque<Status>,
}

impl Session {
    pub fn new(
        uid: [u8; 16],
        description: AgentDescription,
        control: Arc<dyn Control>,
        now: u64,
    ) -> Session {
        Session {
            uid,
            sequence: 0,
            description,
            control,
            start_time: now,
            full_state_due: true,
            reported: None,
            status_time: now,
            remote_status: None,
            remote_status_due: false,
            captures: VecDeque::new(),
            outbox: VecDeque::new(),
        }
    }

    pub fn uid(&self) -> [u8; 16] {
        self.uid
    }

    /// Captures that ran out by `now` (Unix nanoseconds) are reported done.
    pub fn tick(&mut self, now: u64) {
        let secs = now / 1_000_000_000;
        for (id, state) in self.captures.iter_mut() {
            if matches!(state, State::Running { ends } if *ends <= secs) {
                *state = State::Done;
                self.outbox.push_back(Status {
                    id: id.clone(),
                    state: State::Done,
                });
            }
        }
    }

    fn health(&self, s: &AgentStatus) -> ComponentHealth {
        let components: BTreeMap<String, ComponentHealth> = s
            .types
            .iter()
            .map(|(name, state)| {
                let (healthy, status, last_error) = match state {
                    TypeState::Active(every) => (true, format!("active {every}"), String::new()),
                    TypeState::Available => (true, "available".to_owned(), String::new()),
                    TypeState::Unavailable(why) => (false, "unavailable".to_owned(), why.clone()),
                };
                (
                    (*name).to_owned(),
                    ComponentHealth {
                        healthy,
                        status,
                        last_error,
                        start_time_unix_nano: self.start_time,
                        status_time_unix_nano: self.status_time,
                        ..Default::default()
                    },
                )
            })
            .collect();
        ComponentHealth {
            healthy: s.healthy,
            start_time_unix_nano: self.start_time,
            last_error: s.last_error.clone(),
            status: s.status.clone(),
            status_time_unix_nano: self.status_time,
            component_health_map: components,
            attributes: Vec::new(),
        }
    }

    /// The next message: a heartbeat, or what changed, or everything.
    pub fn next_message(&mut self, now: u64) -> AgentToServer {
        let status = self.control.status();
        let changed = self.reported.as_ref() != Some(&status);
        if changed {
            self.status_time = now;
        }
        let full = self.full_state_due;
        let mut m = AgentToServer {
            instance_uid: self.uid.to_vec(),
            sequence_num: self.sequence,
            capabilities: CAPABILITIES,
            ..Default::default()
        };
        if full {
            m.agent_description = Some(self.description.clone());
            m.custom_capabilities = Some(CustomCapabilities {
                capabilities: vec![capture::CAPABILITY.to_owned()],
            });
        }
        if full || changed {
            m.health = Some(self.health(&status));
            m.effective_config = Some(EffectiveConfig {
                config_map: Some(AgentConfigMap {
                    config_map: BTreeMap::from([(
                        settings::FILE.to_owned(),
                        AgentConfigFile {
                            body: status.effective.clone().into_bytes(),
                            content_type: settings::CONTENT_TYPE.to_owned(),
                        },
                    )]),
                }),
            });
        }
        if full || self.remote_status_due {
            m.remote_config_status = self.remote_status.clone();
        }
        if let Some(s) = self.outbox.front() {
            m.custom_message = Some(CustomMessage {
                capability: capture::CAPABILITY.to_owned(),
                r#type: capture::STATUS.to_owned(),
                data: s.text().into_bytes(),
            });
        }
        self.sequence = self.sequence.wrapping_add(1);
        self.reported = Some(status);
        m
    }

    /// The exchange failed (no answer, or one that could not be read): the server may have
    /// missed what was sent, so the next message carries everything again. A capture status
    /// stays at the head of the outbox.
    pub fn failed(&mut self) {
        self.full_state_due = true;
    }

    /// The last agent message, sent when the agent stops.
    pub fn disconnect_message(&mut self) -> AgentToServer {
        let m = AgentToServer {
            instance_uid: self.uid.to_vec(),
            sequence_num: self.sequence,
            capabilities: CAPABILITIES,
            agent_disconnect: Some(AgentDisconnect {}),
            ..Default::default()
        };
        self.sequence = self.sequence.wrapping_add(1);
        m
    }

    /// Acts on the server's answer to the message last sent.
    pub fn handle(&mut self, answer: ServerToAgent, now: u64) -> Outcome {
        let mut out = Outcome::default();
        if let Some(e) = answer.error_response {
            self.full_state_due = true;
            out.error = Some(format!(
                "the OpAMP server answered an error: {}",
                shown(&e.error_message)
            ));
            if e.r#type == ServerErrorResponseType::Unavailable as i32 {
                out.retry_after = e
                    .retry_info
                    .map(|r| Duration::from_nanos(r.retry_after_nanoseconds))
                    .filter(|d| !d.is_zero())
                    .map(|d| d.min(Duration::from_secs(3600)));
            }
            return out;
        }
        // The exchange went through: what it carried was delivered.
        self.full_state_due = false;
        self.remote_status_due = false;
        self.outbox.pop_front();
        if let Some(new) = answer
            .agent_identification
            .and_then(|i| <[u8; 16]>::try_from(i.new_instance_uid.as_slice()).ok())
        {
            self.uid = new;
        }
        if answer.flags & server_to_agent_flags::REPORT_FULL_STATE != 0 {
            self.full_state_due = true;
        }
        if let Some(rc) = answer.remote_config {
            self.remote_config(rc.config.unwrap_or_default(), rc.config_hash);
        }
        if let Some(m) = answer.custom_message {
            if m.capability == capture::CAPABILITY && m.r#type == capture::START {
                self.capture(&m.data, now);
            }
        }
        out.send_now = self.full_state_due || self.remote_status_due || !self.outbox.is_empty();
        out
    }

    fn remote_config(&mut self, config: AgentConfigMap, hash: Vec<u8>) {
        if self
            .remote_status
            .as_ref()
            .is_some_and(|s| s.last_remote_config_hash == hash)
        {
            // Offered again (our report crossed it): applied or refused already.
            self.remote_status_due = true;
            return;
        }
        let result = (|| {
            let mut text = "";
            for (name, file) in &config.config_map {
                if name != settings::FILE {
                    return Err(format!(
                        "config file {} is not otelprof's (only {:?} is read)",
                        shown(name),
                        settings::FILE
                    ));
                }
                text = std::str::from_utf8(&file.body)
                    .map_err(|_| "the settings are not UTF-8 text".to_owned())?;
            }
            let parsed = Settings::parse(text).map_err(|r| r.0)?;
            self.control.settings(&parsed)
        })();
        let (status, error) = match result {
            Ok(()) => (RemoteConfigStatuses::Applied, String::new()),
            Err(e) => (RemoteConfigStatuses::Failed, e),
        };
        self.remote_status = Some(RemoteConfigStatus {
            last_remote_config_hash: hash,
            status: status as i32,
            error_message: error,
        });
        self.remote_status_due = true;
    }

    fn capture(&mut self, data: &[u8], now: u64) {
        let text = String::from_utf8_lossy(data);
        let parsed = Capture::parse(&text);
        // The id, even of a capture that is refused, so that the server learns why.
        let id = match &parsed {
            Ok(c) => c.id.clone(),
            Err(_) => match text
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("id="))
                .and_then(|id| capture::check_id(id).ok())
            {
                Some(id) => id,
                // No usable id: nobody to tell.
                None => return,
            },
        };
        if let Some((_, state)) = self.captures.iter().find(|(known, _)| *known == id) {
            let state = state.clone();
            self.outbox.push_back(Status { id, state });
            return;
        }
        let state = match parsed {
            Err(r) => State::Refused { reason: r.0 },
            Ok(c) => match self.control.capture(&c) {
                Ok(()) => State::Running {
                    ends: now / 1_000_000_000 + c.duration.as_secs(),
                },
                Err(reason) => State::Refused { reason },
            },
        };
        if self.captures.len() >= KNOWN_CAPTURES {
            self.captures.pop_front();
        }
        self.captures.push_back((id.clone(), state.clone()));
        self.outbox.push_back(Status { id, state });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AgentRemoteConfig, KeyValue, ServerErrorResponse};
    use std::sync::Mutex;

    /// A stand-in for the JVM agent: records what it was asked, refuses lock captures.
    #[derive(Default)]
    struct Recorder {
        captures: Mutex<Vec<String>>,
        settings: Mutex<Vec<String>>,
    }

    impl Control for Recorder {
        fn capture(&self, c: &Capture) -> Result<(), String> {
            if c.engines.lock.is_some() {
                return Err("lock profiling is unavailable".into());
            }
            self.captures.lock().unwrap().push(c.text());
            Ok(())
        }
        fn settings(&self, s: &Settings) -> Result<(), String> {
            self.settings.lock().unwrap().push(s.text());
            Ok(())
        }
        fn status(&self) -> AgentStatus {
            AgentStatus {
                healthy: true,
                status: "profiling".into(),
                last_error: String::new(),
                types: vec![("cpu", TypeState::Active("10ms".into()))],
                effective: self
                    .settings
                    .lock()
                    .unwrap()
                    .last()
                    .cloned()
                    .unwrap_or_default(),
            }
        }
    }

    const NOW: u64 = 1_700_000_000_000_000_000;

    fn session() -> (Session, Arc<Recorder>) {
        let r = Arc::new(Recorder::default());
        let d = AgentDescription {
            identifying_attributes: vec![KeyValue::string("service.name", "s")],
            non_identifying_attributes: vec![],
        };
        (Session::new([9; 16], d, r.clone(), NOW), r)
    }

    fn start(data: &str) -> ServerToAgent {
        ServerToAgent {
            instance_uid: vec![9; 16],
            custom_message: Some(CustomMessage {
                capability: capture::CAPABILITY.into(),
                r#type: capture::START.into(),
                data: data.as_bytes().to_vec(),
            }),
            ..Default::default()
        }
    }

    fn status_of(m: &AgentToServer) -> Option<Status> {
        m.custom_message
            .as_ref()
            .map(|c| Status::parse(std::str::from_utf8(&c.data).unwrap()).unwrap())
    }

    #[test]
    fn full_state_first_then_heartbeats() {
        let (mut s, _) = session();
        let first = s.next_message(NOW);
        assert!(first.agent_description.is_some() && first.health.is_some());
        assert_eq!(first.sequence_num, 0);
        assert_eq!(
            first.capabilities & caps::ACCEPTS_REMOTE_CONFIG,
            caps::ACCEPTS_REMOTE_CONFIG
        );
        assert_eq!(
            first.custom_capabilities.unwrap().capabilities,
            [capture::CAPABILITY]
        );
        assert_eq!(s.handle(ServerToAgent::default(), NOW), Outcome::default());
        let beat = s.next_message(NOW);
        assert_eq!(beat.sequence_num, 1);
        assert!(beat.agent_description.is_none() && beat.health.is_none());
        // A failed exchange, or a server that lost state: everything again.
        s.failed();
        assert!(s.next_message(NOW).agent_description.is_some());
        s.handle(
            ServerToAgent {
                flags: server_to_agent_flags::REPORT_FULL_STATE,
                ..Default::default()
            },
            NOW,
        );
        assert!(s.next_message(NOW).agent_description.is_some());
    }

    #[test]
    fn a_capture_runs_once_and_is_reported_until_done() {
        let (mut s, r) = session();
        s.next_message(NOW);
        let o = s.handle(start("id=c-1,wall=20ms,seconds=2"), NOW);
        assert!(o.send_now);
        let m = s.next_message(NOW);
        assert_eq!(
            status_of(&m).unwrap().state,
            State::Running {
                ends: NOW / 1_000_000_000 + 2
            }
        );
        // The offer comes again (the server had not seen our answer): not run twice.
        s.handle(start("id=c-1,wall=20ms,seconds=2"), NOW);
        assert_eq!(r.captures.lock().unwrap().len(), 1);
        assert!(matches!(
            status_of(&s.next_message(NOW)).unwrap().state,
            State::Running { .. }
        ));
        s.handle(ServerToAgent::default(), NOW);
        assert!(status_of(&s.next_message(NOW)).is_none());
        s.handle(ServerToAgent::default(), NOW);
        s.tick(NOW + 2_000_000_000);
        assert_eq!(status_of(&s.next_message(NOW)).unwrap().state, State::Done);
    }

    #[test]
    fn refusals_carry_the_reason_and_start_nothing() {
        let (mut s, r) = session();
        s.next_message(NOW);
        for (data, says) in [
            (
                "id=c-2,lock=10ms,seconds=5",
                "lock profiling is unavailable",
            ),
            ("id=c-3,wall=20ms,seconds=5,out=/etc", "path"),
            ("id=c-4,wall=1ms,seconds=5", "5ms"),
            ("id=c-5,wall=20ms,seconds=6000", "600"),
        ] {
            s.handle(start(data), NOW);
            let st = status_of(&s.next_message(NOW)).unwrap();
            match st.state {
                State::Refused { reason } => assert!(reason.contains(says), "{data}: {reason}"),
                other => panic!("{data}: {other:?}"),
            }
            s.handle(ServerToAgent::default(), NOW);
        }
        assert!(r.captures.lock().unwrap().is_empty());
    }

    #[test]
    fn settings_are_applied_once_per_hash_and_reported() {
        let (mut s, r) = session();
        s.next_message(NOW);
        let offer = |body: &str, hash: u8| ServerToAgent {
            remote_config: Some(AgentRemoteConfig {
                config: Some(AgentConfigMap {
                    config_map: BTreeMap::from([(
                        settings::FILE.to_owned(),
                        AgentConfigFile {
                            body: body.as_bytes().to_vec(),
                            content_type: settings::CONTENT_TYPE.into(),
                        },
                    )]),
                }),
                config_hash: vec![hash],
            }),
            ..Default::default()
        };
        assert!(s.handle(offer("wall=50ms", 1), NOW).send_now);
        let m = s.next_message(NOW);
        let st = m.remote_config_status.unwrap();
        assert_eq!(
            (st.status, st.last_remote_config_hash),
            (RemoteConfigStatuses::Applied as i32, vec![1])
        );
        let eff = m.effective_config.unwrap().config_map.unwrap();
        assert_eq!(eff.config_map[settings::FILE].body, b"wall=50ms");
        s.handle(offer("wall=50ms", 1), NOW);
        assert_eq!(
            r.settings.lock().unwrap().len(),
            1,
            "same hash: not applied again"
        );
        s.next_message(NOW);
        s.handle(offer("endpoint=http://evil", 2), NOW);
        let st = s.next_message(NOW).remote_config_status.unwrap();
        assert_eq!(st.status, RemoteConfigStatuses::Failed as i32);
        assert!(
            st.error_message.contains("where the agent sends data"),
            "{}",
            st.error_message
        );
        assert_eq!(r.settings.lock().unwrap().len(), 1);
    }

    #[test]
    fn server_errors_are_told_and_throttle() {
        let (mut s, _) = session();
        s.next_message(NOW);
        let o = s.handle(
            ServerToAgent {
                error_response: Some(ServerErrorResponse {
                    r#type: ServerErrorResponseType::Unavailable as i32,
                    error_message: "busy\x1b[2J".into(),
                    retry_info: Some(crate::proto::RetryInfo {
                        retry_after_nanoseconds: 7_000_000_000,
                    }),
                }),
                ..Default::default()
            },
            NOW,
        );
        assert_eq!(o.retry_after, Some(Duration::from_secs(7)));
        assert!(o.error.unwrap().contains("busy\\u{1b}[2J"));
        assert!(s.next_message(NOW).agent_description.is_some());
    }

    proptest::proptest! {
        /// Whatever a server answers, the session acts or refuses, and never panics.
        #[test]
        fn any_answer_is_handled_without_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            use prost::Message as _;
            let (mut s, r) = session();
            s.next_message(NOW);
            if let Ok(answer) = ServerToAgent::decode(&bytes[..]) {
                s.handle(answer, NOW);
                let _ = s.next_message(NOW);
            }
            proptest::prop_assert!(r.captures.lock().unwrap().len() <= 1);
        }
    }
}
