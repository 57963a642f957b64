//! The OpAMP messages otelprof sends and reads, declared by hand with the field numbers of the
//! specification's `proto/opamp/v1/opamp.proto` and `anyvalue.proto` (package
//! `opamp.proto.v1`), as otel-bridge's `pprof/proto.rs` declares pprof's: no `build.rs`, no `protoc`, one
//! prost version in the workspace.
//!
//! What is left out: packages, connection settings, commands, available components and their
//! statuses. otelprof neither offers nor accepts any of them (they download code, change
//! where data goes, or restart the process); prost skips their fields when decoding, so a
//! server that sends them is read as if it had not.
//!
//! Maps are `BTreeMap`s so that an encoding is the same bytes every time (the remote config's
//! hash is computed over them). Decoding depth is bounded by prost (100 nested messages):
//! `ComponentHealth` nests in itself, and a hostile peer cannot recurse deeper than that.

use std::collections::BTreeMap;

/// `AgentToServer`: every request of the plain-HTTP transport.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AgentToServer {
    /// 16 bytes (a UUID, v7 recommended).
    #[prost(bytes = "vec", tag = "1")]
    pub instance_uid: Vec<u8>,
    #[prost(uint64, tag = "2")]
    pub sequence_num: u64,
    #[prost(message, optional, tag = "3")]
    pub agent_description: Option<AgentDescription>,
    /// [`agent_capabilities`] bits.
    #[prost(uint64, tag = "4")]
    pub capabilities: u64,
    #[prost(message, optional, tag = "5")]
    pub health: Option<ComponentHealth>,
    #[prost(message, optional, tag = "6")]
    pub effective_config: Option<EffectiveConfig>,
    #[prost(message, optional, tag = "7")]
    pub remote_config_status: Option<RemoteConfigStatus>,
    /// Set (empty) in the last message an agent sends.
    #[prost(message, optional, tag = "9")]
    pub agent_disconnect: Option<AgentDisconnect>,
    /// [`agent_to_server_flags`] bits.
    #[prost(uint64, tag = "10")]
    pub flags: u64,
    #[prost(message, optional, tag = "12")]
    pub custom_capabilities: Option<CustomCapabilities>,
    #[prost(message, optional, tag = "13")]
    pub custom_message: Option<CustomMessage>,
}

/// `ServerToAgent`: every response of the plain-HTTP transport.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerToAgent {
    #[prost(bytes = "vec", tag = "1")]
    pub instance_uid: Vec<u8>,
    /// When set, every other field but `instance_uid` is unset.
    #[prost(message, optional, tag = "2")]
    pub error_response: Option<ServerErrorResponse>,
    #[prost(message, optional, tag = "3")]
    pub remote_config: Option<AgentRemoteConfig>,
    /// [`server_to_agent_flags`] bits.
    #[prost(uint64, tag = "6")]
    pub flags: u64,
    /// [`server_capabilities`] bits.
    #[prost(uint64, tag = "7")]
    pub capabilities: u64,
    #[prost(message, optional, tag = "8")]
    pub agent_identification: Option<AgentIdentification>,
    #[prost(message, optional, tag = "10")]
    pub custom_capabilities: Option<CustomCapabilities>,
    #[prost(message, optional, tag = "11")]
    pub custom_message: Option<CustomMessage>,
}

impl ServerToAgent {
    /// An answer that only reports an error: of `kind`, saying `message`, to the agent `uid`
    /// (empty when the request named none that could be read).
    pub fn error(uid: Vec<u8>, kind: ServerErrorResponseType, message: String) -> ServerToAgent {
        ServerToAgent {
            instance_uid: uid,
            error_response: Some(ServerErrorResponse {
                r#type: kind as i32,
                error_message: message,
                retry_info: None,
            }),
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct AgentDisconnect {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AgentIdentification {
    #[prost(bytes = "vec", tag = "1")]
    pub new_instance_uid: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AgentDescription {
    /// Resource attributes that identify the agent (`service.name`, `service.instance.id`, …).
    #[prost(message, repeated, tag = "1")]
    pub identifying_attributes: Vec<KeyValue>,
    /// Where it runs (`host.name`, `process.pid`, `os.type`, …).
    #[prost(message, repeated, tag = "2")]
    pub non_identifying_attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ComponentHealth {
    #[prost(bool, tag = "1")]
    pub healthy: bool,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(string, tag = "3")]
    pub last_error: String,
    #[prost(string, tag = "4")]
    pub status: String,
    #[prost(fixed64, tag = "5")]
    pub status_time_unix_nano: u64,
    #[prost(btree_map = "string, message", tag = "6")]
    pub component_health_map: BTreeMap<String, ComponentHealth>,
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EffectiveConfig {
    #[prost(message, optional, tag = "1")]
    pub config_map: Option<AgentConfigMap>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AgentConfigMap {
    /// File name → file.
    #[prost(btree_map = "string, message", tag = "1")]
    pub config_map: BTreeMap<String, AgentConfigFile>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AgentConfigFile {
    #[prost(bytes = "vec", tag = "1")]
    pub body: Vec<u8>,
    #[prost(string, tag = "2")]
    pub content_type: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AgentRemoteConfig {
    #[prost(message, optional, tag = "1")]
    pub config: Option<AgentConfigMap>,
    #[prost(bytes = "vec", tag = "2")]
    pub config_hash: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RemoteConfigStatus {
    #[prost(bytes = "vec", tag = "1")]
    pub last_remote_config_hash: Vec<u8>,
    /// [`RemoteConfigStatuses`] as an `i32`.
    #[prost(enumeration = "RemoteConfigStatuses", tag = "2")]
    pub status: i32,
    #[prost(string, tag = "3")]
    pub error_message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum RemoteConfigStatuses {
    Unset = 0,
    Applied = 1,
    Applying = 2,
    Failed = 3,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CustomCapabilities {
    /// Reverse-FQDN names, optionally `/version`.
    #[prost(string, repeated, tag = "1")]
    pub capabilities: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CustomMessage {
    #[prost(string, tag = "1")]
    pub capability: String,
    #[prost(string, tag = "2")]
    pub r#type: String,
    #[prost(bytes = "vec", tag = "3")]
    pub data: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerErrorResponse {
    /// [`ServerErrorResponseType`] as an `i32`.
    #[prost(enumeration = "ServerErrorResponseType", tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub error_message: String,
    /// The `Details` oneof has one member, so it is declared as the field itself.
    #[prost(message, optional, tag = "3")]
    pub retry_info: Option<RetryInfo>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServerErrorResponseType {
    Unknown = 0,
    BadRequest = 1,
    Unavailable = 2,
}

#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct RetryInfo {
    #[prost(uint64, tag = "1")]
    pub retry_after_nanoseconds: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<any_value::Value>,
}

pub mod any_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        #[prost(int64, tag = "3")]
        IntValue(i64),
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
        #[prost(message, tag = "6")]
        KvlistValue(super::KeyValueList),
        #[prost(bytes = "vec", tag = "7")]
        BytesValue(Vec<u8>),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

/// `AgentCapabilities` bits.
pub mod agent_capabilities {
    pub const REPORTS_STATUS: u64 = 0x1;
    pub const ACCEPTS_REMOTE_CONFIG: u64 = 0x2;
    pub const REPORTS_EFFECTIVE_CONFIG: u64 = 0x4;
    pub const REPORTS_HEALTH: u64 = 0x800;
    pub const REPORTS_REMOTE_CONFIG: u64 = 0x1000;
    pub const REPORTS_HEARTBEAT: u64 = 0x2000;
}

/// `ServerCapabilities` bits.
pub mod server_capabilities {
    pub const ACCEPTS_STATUS: u64 = 0x1;
    pub const OFFERS_REMOTE_CONFIG: u64 = 0x2;
    pub const ACCEPTS_EFFECTIVE_CONFIG: u64 = 0x4;
}

/// `AgentToServerFlags` bits.
pub mod agent_to_server_flags {
    pub const REQUEST_INSTANCE_UID: u64 = 0x1;
}

/// `ServerToAgentFlags` bits.
pub mod server_to_agent_flags {
    pub const REPORT_FULL_STATE: u64 = 0x1;
}

impl KeyValue {
    pub fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.to_owned())),
            }),
        }
    }

    pub fn int(key: &str, value: i64) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::IntValue(value)),
            }),
        }
    }

    /// The value as text, as a UI shows it: strings as they are, numbers and booleans in
    /// decimal, bytes in hex, arrays and lists as `[a, b]` and `{k=v}`.
    pub fn text(&self) -> String {
        self.value.as_ref().map_or_else(String::new, AnyValue::text)
    }
}

impl AnyValue {
    pub fn text(&self) -> String {
        use any_value::Value;
        match &self.value {
            None => String::new(),
            Some(Value::StringValue(s)) => s.clone(),
            Some(Value::BoolValue(b)) => b.to_string(),
            Some(Value::IntValue(i)) => i.to_string(),
            Some(Value::DoubleValue(d)) => d.to_string(),
            Some(Value::BytesValue(b)) => hex::encode(b),
            Some(Value::ArrayValue(a)) => format!(
                "[{}]",
                a.values
                    .iter()
                    .map(AnyValue::text)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some(Value::KvlistValue(l)) => format!(
                "{{{}}}",
                l.values
                    .iter()
                    .map(|kv| format!("{}={}", kv.key, kv.text()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}
