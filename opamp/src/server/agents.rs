//! The agents connected to `serve`'s OpAMP server, what each reported, and what is waiting for
//! it: the table behind `POST /v1/opamp` ([`Agents::exchange`]) and the JSON API
//! ([`Agents::list`], [`Agents::capture`], [`Agents::settings`]). No I/O: the caller passes
//! the time in.
//!
//! Bounds, since agents are outside input: at most [`MAX_AGENTS`] agents (those silent for
//! [`AGE_OUT`] are forgotten first), [`MAX_ATTRIBUTES`] attributes each with values cut to
//! [`MAX_VALUE`] characters, health components one level deep, an effective config of at
//! most [`MAX_CONFIG`] bytes kept, and the last [`MAX_CAPTURES`] captures per agent.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash as _, Hasher as _};
use std::sync::Mutex;
use std::time::Duration;

use crate::capture::{self, Capture, State, Status};
use crate::engines::{shown, Engines, Refused};
use crate::proto::{
    agent_capabilities as caps, agent_to_server_flags, server_capabilities, server_to_agent_flags,
    AgentConfigFile, AgentConfigMap, AgentIdentification, AgentRemoteConfig, AgentToServer,
    ComponentHealth, CustomCapabilities, CustomMessage, EffectiveConfig, KeyValue,
    RemoteConfigStatuses, RetryInfo, ServerErrorResponseType, ServerToAgent,
};
use crate::settings::{self, Settings};

/// An agent that has not polled for this long is forgotten (its captures with it). Agents
/// poll every 5 s by default (otelprof's) or 30 s (the spec's).
pub const AGE_OUT: Duration = Duration::from_secs(300);
/// Agents one server tracks.
pub const MAX_AGENTS: usize = 10_000;
pub const MAX_ATTRIBUTES: usize = 128;
pub const MAX_VALUE: usize = 256;
pub const MAX_CONFIG: usize = 16 << 10;
pub const MAX_CAPTURES: usize = 20;

/// The server's capabilities, sent in every answer.
const CAPABILITIES: u64 = server_capabilities::ACCEPTS_STATUS
    | server_capabilities::OFFERS_REMOTE_CONFIG
    | server_capabilities::ACCEPTS_EFFECTIVE_CONFIG;

/// A capture as the server tracks it.
#[derive(Clone, Debug)]
pub struct CaptureEntry {
    pub capture: Capture,
    pub created: i64,
    /// Offered in an answer at least once.
    pub sent: bool,
    /// What the agent said last; `None` until it answered.
    pub state: Option<State>,
}

impl CaptureEntry {
    /// `pending` (not yet offered), `sent`, or the agent's state.
    pub fn state_name(&self) -> &'static str {
        match (&self.state, self.sent) {
            (None, false) => "pending",
            (None, true) => "sent",
            (Some(State::Running { .. }), _) => "running",
            (Some(State::Done), _) => "done",
            (Some(State::Refused { .. }), _) => "refused",
            (Some(State::Failed { .. }), _) => "failed",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Health {
    pub healthy: bool,
    pub status: String,
    pub last_error: String,
    pub start_time: u64,
    /// Component → (healthy, status, last error).
    pub components: BTreeMap<String, (bool, String, String)>,
}

/// One agent, as it reported itself.
#[derive(Clone, Debug, Default)]
pub struct Agent {
    pub uid: [u8; 16],
    pub identifying: Vec<(String, String)>,
    pub non_identifying: Vec<(String, String)>,
    pub capabilities: u64,
    pub custom_capabilities: Vec<String>,
    pub health: Option<Health>,
    pub effective_config: BTreeMap<String, String>,
    pub first_seen: i64,
    pub last_seen: i64,
    last_sequence: Option<u64>,
    /// Settings the server wants in force (`None`: never set here), and their hash.
    pub desired: Option<(String, Vec<u8>)>,
    /// What the agent said of the last remote config: hash, status, error.
    pub remote_status: Option<(Vec<u8>, RemoteConfigStatuses, String)>,
    pub captures: Vec<CaptureEntry>,
}

impl Agent {
    pub fn accepts_captures(&self) -> bool {
        self.custom_capabilities
            .iter()
            .any(|c| c == capture::CAPABILITY)
    }

    pub fn accepts_settings(&self) -> bool {
        self.capabilities & caps::ACCEPTS_REMOTE_CONFIG != 0
    }

    /// An identifying (else non-identifying) attribute.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.identifying
            .iter()
            .chain(&self.non_identifying)
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The canonical text of an instance uid: `f81d4fae-7dec-11d0-a765-00a0c91e6bf6`.
pub fn uid_text(uid: &[u8; 16]) -> String {
    let h = hex::encode(uid);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[derive(Default)]
pub struct Agents {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    agents: HashMap<[u8; 16], Agent>,
    /// Makes capture ids and assigned uids unique within this server's life.
    counter: u64,
    /// When silent agents were last forgotten: at most once a second, not on every poll of
    /// every agent.
    last_sweep: i64,
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        s.chars().take(n).collect::<String>() + "…"
    }
}

fn attributes(kvs: &[KeyValue]) -> Vec<(String, String)> {
    kvs.iter()
        .take(MAX_ATTRIBUTES)
        .map(|kv| (cut(&kv.key, MAX_VALUE), cut(&kv.text(), MAX_VALUE)))
        .collect()
}

fn health(h: &ComponentHealth) -> Health {
    Health {
        healthy: h.healthy,
        status: cut(&h.status, MAX_VALUE),
        last_error: cut(&h.last_error, MAX_VALUE),
        start_time: h.start_time_unix_nano,
        components: h
            .component_health_map
            .iter()
            .take(MAX_ATTRIBUTES)
            .map(|(k, c)| {
                (
                    cut(k, MAX_VALUE),
                    (
                        c.healthy,
                        cut(&c.status, MAX_VALUE),
                        cut(&c.last_error, MAX_VALUE),
                    ),
                )
            })
            .collect(),
    }
}

/// The hash a remote config is known by: of its text, so the same settings are the same
/// config across server restarts.
fn config_hash(text: &str) -> Vec<u8> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish().to_be_bytes().to_vec()
}

/// The answer when the table is full: come back in a minute.
fn busy(uid: [u8; 16]) -> ServerToAgent {
    let mut busy = ServerToAgent::error(
        uid.to_vec(),
        ServerErrorResponseType::Unavailable,
        format!("this server tracks {MAX_AGENTS} agents already"),
    );
    if let Some(e) = busy.error_response.as_mut() {
        e.retry_info = Some(RetryInfo {
            retry_after_nanoseconds: 60_000_000_000,
        });
    }
    busy
}

impl Inner {
    /// Forgets the agents silent for [`AGE_OUT`]: at most once a second, or when the table
    /// is full.
    fn forget_silent(&mut self, now: i64) {
        let age_out = i64::try_from(AGE_OUT.as_nanos()).unwrap_or(i64::MAX);
        if now.saturating_sub(self.last_sweep) >= 1_000_000_000 || self.agents.len() >= MAX_AGENTS {
            self.last_sweep = now;
            self.agents
                .retain(|_, a| now.saturating_sub(a.last_seen) < age_out);
        }
    }

    /// A new instance uid for an agent that asked for one (`REQUEST_INSTANCE_UID`): unique
    /// within this server's life, well-formed as a random UUID.
    fn new_uid(&mut self, uid: [u8; 16], now: i64) -> [u8; 16] {
        self.counter += 1;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (now, self.counter, uid).hash(&mut h);
        let a = h.finish().to_be_bytes();
        (now as u64 ^ self.counter).hash(&mut h);
        let b = h.finish().to_be_bytes();
        let mut new = [0u8; 16];
        new[..8].copy_from_slice(&a);
        new[8..].copy_from_slice(&b);
        // Version 4 and RFC 4122 variant bits: a well-formed random UUID.
        new[6] = (new[6] & 0x0f) | 0x40;
        new[8] = (new[8] & 0x3f) | 0x80;
        new
    }
}

impl Agent {
    /// Takes in what `message` reports, at `now`; whether this server missed status the agent
    /// will not repeat unless asked (a gap in the sequence, or a first message without a
    /// description).
    fn record(&mut self, message: &AgentToServer, now: i64) -> bool {
        self.last_seen = now;
        let gap = match self.last_sequence {
            Some(last) => message.sequence_num != last.wrapping_add(1),
            None => message.agent_description.is_none(),
        };
        self.last_sequence = Some(message.sequence_num);
        self.capabilities = message.capabilities;
        if let Some(d) = &message.agent_description {
            self.identifying = attributes(&d.identifying_attributes);
            self.non_identifying = attributes(&d.non_identifying_attributes);
        }
        if let Some(h) = &message.health {
            self.health = Some(health(h));
        }
        if let Some(e) = &message.effective_config {
            self.effective_config = effective_config(e);
        }
        if let Some(s) = &message.remote_config_status {
            let status =
                RemoteConfigStatuses::try_from(s.status).unwrap_or(RemoteConfigStatuses::Unset);
            self.remote_status = Some((
                s.last_remote_config_hash.clone(),
                status,
                cut(&s.error_message, 4 * MAX_VALUE),
            ));
        }
        if let Some(c) = &message.custom_capabilities {
            self.custom_capabilities = c
                .capabilities
                .iter()
                .take(MAX_ATTRIBUTES)
                .map(|s| cut(s, MAX_VALUE))
                .collect();
        }
        if let Some(m) = &message.custom_message {
            self.record_capture_status(m);
        }
        gap
    }

    /// A capture's status from the agent. One that does not parse, or names a capture this
    /// server did not start, changes nothing: the agent is outside input.
    fn record_capture_status(&mut self, m: &CustomMessage) {
        if m.capability != capture::CAPABILITY || m.r#type != capture::STATUS {
            return;
        }
        let status = std::str::from_utf8(&m.data)
            .ok()
            .and_then(|t| Status::parse(t).ok());
        if let Some(status) = status {
            if let Some(c) = self.captures.iter_mut().find(|c| c.capture.id == status.id) {
                c.state = Some(status.state);
            }
        }
    }

    /// Puts into `answer` what waits for this agent: the settings wanted here until it
    /// reports their hash, and the oldest capture it has not answered for.
    fn offer(&mut self, answer: &mut ServerToAgent) {
        if let (true, Some((text, hash))) = (self.accepts_settings(), &self.desired) {
            let applied = self
                .remote_status
                .as_ref()
                .is_some_and(|(h, _, _)| h == hash);
            if !applied {
                answer.remote_config = Some(AgentRemoteConfig {
                    config: Some(AgentConfigMap {
                        config_map: BTreeMap::from([(
                            settings::FILE.to_owned(),
                            AgentConfigFile {
                                body: text.clone().into_bytes(),
                                content_type: settings::CONTENT_TYPE.to_owned(),
                            },
                        )]),
                    }),
                    config_hash: hash.clone(),
                });
            }
        }
        if self.accepts_captures() {
            if let Some(c) = self.captures.iter_mut().find(|c| c.state.is_none()) {
                c.sent = true;
                answer.custom_message = Some(CustomMessage {
                    capability: capture::CAPABILITY.to_owned(),
                    r#type: capture::START.to_owned(),
                    data: c.capture.text().into_bytes(),
                });
            }
        }
    }
}

/// The files of an effective config, bounded: [`MAX_ATTRIBUTES`] files of at most
/// [`MAX_CONFIG`] bytes each.
fn effective_config(e: &EffectiveConfig) -> BTreeMap<String, String> {
    e.config_map
        .as_ref()
        .map(|m| {
            m.config_map
                .iter()
                .take(MAX_ATTRIBUTES)
                .map(|(name, f)| {
                    let body = &f.body[..f.body.len().min(MAX_CONFIG)];
                    (
                        cut(name, MAX_VALUE),
                        String::from_utf8_lossy(body).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Why a request of the API was not done.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> ApiError {
        ApiError::Refused(r.0)
    }
}

impl Agents {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One exchange of the plain-HTTP transport: the agent's message in, the answer out.
    pub fn exchange(&self, message: AgentToServer, now: i64) -> ServerToAgent {
        let Ok(uid) = <[u8; 16]>::try_from(message.instance_uid.as_slice()) else {
            let why = format!(
                "instance_uid is {} bytes long; OpAMP requires 16",
                message.instance_uid.len()
            );
            return ServerToAgent::error(
                message.instance_uid,
                ServerErrorResponseType::BadRequest,
                why,
            );
        };
        let mut inner = self.lock();
        inner.forget_silent(now);
        let (uid, identification) =
            if message.flags & agent_to_server_flags::REQUEST_INSTANCE_UID != 0 {
                let new = inner.new_uid(uid, now);
                let given = AgentIdentification {
                    new_instance_uid: new.to_vec(),
                };
                (new, Some(given))
            } else {
                (uid, None)
            };
        if message.agent_disconnect.is_some() {
            inner.agents.remove(&uid);
            return ServerToAgent {
                instance_uid: uid.to_vec(),
                capabilities: CAPABILITIES,
                ..Default::default()
            };
        }
        let known = inner.agents.contains_key(&uid);
        if !known && inner.agents.len() >= MAX_AGENTS {
            return busy(uid);
        }
        let agent = inner.agents.entry(uid).or_insert_with(|| Agent {
            uid,
            first_seen: now,
            ..Default::default()
        });
        let gap = agent.record(&message, now);
        let mut answer = ServerToAgent {
            instance_uid: uid.to_vec(),
            capabilities: CAPABILITIES,
            agent_identification: identification,
            flags: if gap {
                server_to_agent_flags::REPORT_FULL_STATE
            } else {
                0
            },
            custom_capabilities: (!known).then(|| CustomCapabilities {
                capabilities: vec![capture::CAPABILITY.to_owned()],
            }),
            ..Default::default()
        };
        agent.offer(&mut answer);
        answer
    }

    /// The agents, most recently seen first.
    pub fn list(&self) -> Vec<Agent> {
        let inner = self.lock();
        let mut v: Vec<Agent> = inner.agents.values().cloned().collect();
        v.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then(a.uid.cmp(&b.uid)));
        v
    }

    /// The agent an id names: its instance uid (canonical or 32 hex digits) or its
    /// `service.instance.id`, when exactly one agent has it.
    fn find<'a>(inner: &'a mut Inner, id: &str) -> Result<&'a mut Agent, ApiError> {
        let hex: String = id.chars().filter(|c| *c != '-').collect();
        let by_uid = hex::decode(&hex)
            .ok()
            .and_then(|b| <[u8; 16]>::try_from(b.as_slice()).ok())
            .filter(|uid| inner.agents.contains_key(uid));
        let uid = match by_uid {
            Some(uid) => uid,
            None => {
                let matching: Vec<[u8; 16]> = inner
                    .agents
                    .values()
                    .filter(|a| a.attribute("service.instance.id") == Some(id))
                    .map(|a| a.uid)
                    .collect();
                match matching.as_slice() {
                    [one] => *one,
                    [] => {
                        return Err(ApiError::NotFound(format!(
                            "no connected agent has the instance uid or service.instance.id {}",
                            shown(id)
                        )))
                    }
                    _ => {
                        return Err(ApiError::Refused(format!(
                            "{} agents have service.instance.id {}: give the instance uid",
                            matching.len(),
                            shown(id)
                        )))
                    }
                }
            }
        };
        inner
            .agents
            .get_mut(&uid)
            .ok_or_else(|| ApiError::NotFound("the agent went away".into()))
    }

    /// Queues a capture for the agent `id` names, checked as the agent will check it; returns
    /// the capture's id and the agent's instance uid.
    pub fn capture(
        &self,
        id: &str,
        engines: Engines,
        seconds: u64,
        now: i64,
    ) -> Result<(String, [u8; 16]), ApiError> {
        let mut inner = self.lock();
        inner.counter += 1;
        let capture_id = format!("c{:x}-{}", now / 1_000_000_000, inner.counter);
        let text = format!("id={capture_id},{},seconds={seconds}", engines.text());
        let capture = Capture::parse(&text)?;
        let agent = Self::find(&mut inner, id)?;
        if !agent.accepts_captures() {
            return Err(ApiError::Refused(format!(
                "this agent does not accept captures (it does not announce {})",
                capture::CAPABILITY
            )));
        }
        if agent.captures.len() >= MAX_CAPTURES {
            agent.captures.remove(0);
        }
        agent.captures.push(CaptureEntry {
            capture,
            created: now,
            sent: false,
            state: None,
        });
        Ok((capture_id, agent.uid))
    }

    /// Sets the continuous settings the agent `id` names should run with, checked as the
    /// agent will check them; offered on its next poll until it reports their hash.
    pub fn settings(&self, id: &str, text: &str) -> Result<[u8; 16], ApiError> {
        let parsed = Settings::parse(text)?;
        let mut inner = self.lock();
        let agent = Self::find(&mut inner, id)?;
        if !agent.accepts_settings() {
            return Err(ApiError::Refused(
                "this agent does not accept remote configuration".into(),
            ));
        }
        let text = parsed.text();
        let hash = config_hash(&text);
        agent.desired = Some((text, hash));
        Ok(agent.uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AgentDescription, RemoteConfigStatus};

    const NOW: i64 = 1_700_000_000_000_000_000;

    fn hello(uid: u8, seq: u64) -> AgentToServer {
        AgentToServer {
            instance_uid: vec![uid; 16],
            sequence_num: seq,
            capabilities: caps::REPORTS_STATUS | caps::ACCEPTS_REMOTE_CONFIG,
            agent_description: Some(AgentDescription {
                identifying_attributes: vec![
                    KeyValue::string("service.name", "shop"),
                    KeyValue::string("service.instance.id", "i-1"),
                ],
                non_identifying_attributes: vec![KeyValue::int("process.pid", 42)],
            }),
            custom_capabilities: Some(CustomCapabilities {
                capabilities: vec![capture::CAPABILITY.into()],
            }),
            ..Default::default()
        }
    }

    fn wall(ms: u64) -> Engines {
        Engines {
            wall: Some(Duration::from_millis(ms)),
            ..Default::default()
        }
    }

    #[test]
    fn a_capture_is_offered_until_the_agent_answers_for_it() {
        let agents = Agents::default();
        let first = agents.exchange(hello(1, 0), NOW);
        assert_eq!(first.flags, 0);
        assert_eq!(first.capabilities & 1, 1);
        assert!(first.custom_capabilities.is_some());
        let (id, uid) = agents.capture("i-1", wall(20), 60, NOW).unwrap();
        assert_eq!(uid, [1; 16]);
        for seq in 1..3 {
            let poll = AgentToServer {
                instance_uid: vec![1; 16],
                sequence_num: seq,
                capabilities: caps::REPORTS_STATUS,
                ..Default::default()
            };
            let answer = agents.exchange(poll, NOW + 1);
            assert_eq!(answer.flags, 0, "no gap");
            let m = answer.custom_message.expect("offered again until answered");
            let c = Capture::parse(std::str::from_utf8(&m.data).unwrap()).unwrap();
            assert_eq!(c.id, id);
            assert_eq!(agents.list()[0].captures[0].state_name(), "sent");
        }
        let status = Status {
            id: id.clone(),
            state: State::Running {
                ends: 1_700_000_060,
            },
        };
        let answer = agents.exchange(
            AgentToServer {
                instance_uid: vec![1; 16],
                sequence_num: 3,
                capabilities: caps::REPORTS_STATUS,
                custom_message: Some(CustomMessage {
                    capability: capture::CAPABILITY.into(),
                    r#type: capture::STATUS.into(),
                    data: status.text().into_bytes(),
                }),
                ..Default::default()
            },
            NOW + 2,
        );
        assert!(answer.custom_message.is_none());
        assert_eq!(agents.list()[0].captures[0].state_name(), "running");
    }

    #[test]
    fn captures_and_settings_are_checked_before_they_are_queued() {
        let agents = Agents::default();
        agents.exchange(hello(1, 0), NOW);
        let e = agents.capture("i-1", wall(1), 60, NOW).unwrap_err();
        assert!(e.to_string().contains("5ms"), "{e}");
        let e = agents.capture("i-1", wall(20), 601, NOW).unwrap_err();
        assert!(e.to_string().contains("600"), "{e}");
        let e = agents.capture("nobody", wall(20), 60, NOW).unwrap_err();
        assert!(matches!(e, ApiError::NotFound(_)), "{e}");
        let e = agents.settings("i-1", "out=/etc").unwrap_err();
        assert!(e.to_string().contains("path"), "{e}");
        assert!(agents.list()[0].captures.is_empty());
        assert!(agents.list()[0].desired.is_none());
    }

    #[test]
    fn settings_are_offered_until_their_hash_is_reported() {
        let agents = Agents::default();
        agents.exchange(hello(2, 0), NOW);
        let uid_text = uid_text(&[2; 16]);
        agents.settings(&uid_text, "wall=50ms").unwrap();
        let poll = |seq, status: Option<RemoteConfigStatus>| AgentToServer {
            instance_uid: vec![2; 16],
            sequence_num: seq,
            capabilities: caps::REPORTS_STATUS | caps::ACCEPTS_REMOTE_CONFIG,
            remote_config_status: status,
            ..Default::default()
        };
        let offer = agents.exchange(poll(1, None), NOW).remote_config.unwrap();
        let file = &offer.config.unwrap().config_map[settings::FILE];
        assert_eq!(file.body, b"wall=50ms");
        let applied = RemoteConfigStatus {
            last_remote_config_hash: offer.config_hash.clone(),
            status: RemoteConfigStatuses::Applied as i32,
            error_message: String::new(),
        };
        assert!(agents
            .exchange(poll(2, Some(applied)), NOW)
            .remote_config
            .is_none());
    }

    #[test]
    fn bad_uids_gaps_and_disconnects() {
        let agents = Agents::default();
        let mut m = hello(3, 0);
        m.instance_uid = vec![1, 2, 3];
        let e = agents.exchange(m, NOW).error_response.unwrap();
        assert_eq!(e.r#type, ServerErrorResponseType::BadRequest as i32);
        assert!(agents.list().is_empty());
        // A poll from an agent this server never heard of: ask for everything.
        let poll = AgentToServer {
            instance_uid: vec![3; 16],
            sequence_num: 41,
            capabilities: 1,
            ..Default::default()
        };
        assert_eq!(agents.exchange(poll.clone(), NOW).flags, 1);
        let mut skipped = poll.clone();
        skipped.sequence_num = 45;
        assert_eq!(agents.exchange(skipped, NOW).flags, 1);
        let mut bye = poll;
        bye.sequence_num = 46;
        bye.agent_disconnect = Some(Default::default());
        agents.exchange(bye, NOW);
        assert!(agents.list().is_empty());
        // Silent agents age out.
        agents.exchange(hello(4, 0), NOW);
        agents.exchange(hello(5, 0), NOW + AGE_OUT.as_nanos() as i64);
        let left: Vec<[u8; 16]> = agents.list().iter().map(|a| a.uid).collect();
        assert_eq!(left, [[5; 16]]);
    }

    #[test]
    fn requested_uids_are_assigned() {
        let agents = Agents::default();
        let mut m = hello(6, 0);
        m.flags = agent_to_server_flags::REQUEST_INSTANCE_UID;
        let a = agents.exchange(m, NOW);
        let new = a.agent_identification.unwrap().new_instance_uid;
        assert_eq!(new.len(), 16);
        assert_eq!(a.instance_uid, new);
        assert_eq!(agents.list()[0].uid.to_vec(), new);
    }

    #[test]
    fn uids_print_canonically() {
        let uid: [u8; 16] = (0..16).collect::<Vec<u8>>().try_into().unwrap();
        assert_eq!(uid_text(&uid), "00010203-0405-0607-0809-0a0b0c0d0e0f");
    }

    proptest::proptest! {
        /// Whatever bytes an agent sends, the table answers and stays within its bounds.
        #[test]
        fn any_message_is_answered_without_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            use prost::Message as _;
            let agents = Agents::default();
            if let Ok(m) = AgentToServer::decode(&bytes[..]) {
                let answer = agents.exchange(m, NOW);
                proptest::prop_assert!(answer.error_response.is_some() || answer.instance_uid.len() == 16);
                for a in agents.list() {
                    proptest::prop_assert!(a.identifying.len() <= MAX_ATTRIBUTES);
                }
            }
        }
    }
}
