//! otelprof's hand-written OpAMP messages (opamp/src/proto.rs) against the generated
//! classes of PyPI `opentelemetry-opamp-client` (tests/python/opamp_messages.py): what we
//! encode, they read field for field; what they encode with every field we read set (and
//! some we do not read), we decode to the same values.

use otelprof_tests::Tied as _;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use otelprof_opamp::proto::{
    agent_capabilities as caps, any_value::Value, AgentConfigFile, AgentConfigMap,
    AgentDescription, AgentDisconnect, AgentIdentification, AgentRemoteConfig, AgentToServer,
    AnyValue, ComponentHealth, CustomCapabilities, CustomMessage, EffectiveConfig, KeyValue,
    RemoteConfigStatus, RemoteConfigStatuses, RetryInfo, ServerErrorResponse,
    ServerErrorResponseType, ServerToAgent,
};
use otelprof_tests::{python, repo_root, scratch_dir};
use prost::Message as _;
use serde_json::{json, Value as Json};

fn script() -> std::path::PathBuf {
    repo_root().join("tests/python/opamp_messages.py")
}

/// The message in `path` as the Python classes read it, in proto3 JSON.
fn python_reads(path: &Path, name: &str) -> Json {
    let out = Command::new(python())
        .arg(script())
        .args(["read"])
        .arg(path)
        .arg(name)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn file(body: &[u8], content_type: &str) -> AgentConfigMap {
    AgentConfigMap {
        config_map: BTreeMap::from([(
            "otelprof".to_owned(),
            AgentConfigFile {
                body: body.to_vec(),
                content_type: content_type.to_owned(),
            },
        )]),
    }
}

fn b64(bytes: &[u8]) -> String {
    // proto3 JSON writes bytes as standard base64; a tiny encoder keeps the test dependency-free.
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[test]
fn what_we_encode_the_official_classes_read() {
    let dir = scratch_dir("opamp-messages-ours");
    let uid: Vec<u8> = (0..16).collect();
    let agent = AgentToServer {
        instance_uid: uid.clone(),
        sequence_num: 3,
        agent_description: Some(AgentDescription {
            identifying_attributes: vec![
                KeyValue::string("service.name", "shop"),
                KeyValue::string("service.instance.id", "i-1"),
            ],
            non_identifying_attributes: vec![KeyValue::int("process.pid", 4242)],
        }),
        capabilities: caps::REPORTS_STATUS | caps::ACCEPTS_REMOTE_CONFIG | caps::REPORTS_HEALTH,
        health: Some(ComponentHealth {
            healthy: true,
            start_time_unix_nano: 1_700_000_000_000_000_000,
            status: "profiling cpu".into(),
            component_health_map: BTreeMap::from([(
                "wall".to_owned(),
                ComponentHealth {
                    healthy: true,
                    status: "active 20ms".into(),
                    ..Default::default()
                },
            )]),
            ..Default::default()
        }),
        effective_config: Some(EffectiveConfig {
            config_map: Some(file(b"cpu=10ms", "text/plain; charset=utf-8")),
        }),
        remote_config_status: Some(RemoteConfigStatus {
            last_remote_config_hash: vec![0xaa, 0xbb],
            status: RemoteConfigStatuses::Failed as i32,
            error_message: "out is a path".into(),
        }),
        agent_disconnect: Some(AgentDisconnect {}),
        flags: 1,
        custom_capabilities: Some(CustomCapabilities {
            capabilities: vec!["io.opentelemetry.otelprof.capture".into()],
        }),
        custom_message: Some(CustomMessage {
            capability: "io.opentelemetry.otelprof.capture".into(),
            r#type: "status".into(),
            data: b"id=c-1,state=done".to_vec(),
        }),
    };
    let path = dir.join("agent.bin");
    std::fs::write(&path, agent.encode_to_vec()).unwrap();
    let read = python_reads(&path, "AgentToServer");
    let want = json!({
        "instance_uid": b64(&uid),
        "sequence_num": "3",
        "agent_description": {
            "identifying_attributes": [
                {"key": "service.name", "value": {"string_value": "shop"}},
                {"key": "service.instance.id", "value": {"string_value": "i-1"}}
            ],
            "non_identifying_attributes": [{"key": "process.pid", "value": {"int_value": "4242"}}]
        },
        "capabilities": "2051",
        "health": {
            "healthy": true,
            "start_time_unix_nano": "1700000000000000000",
            "status": "profiling cpu",
            "component_health_map": {"wall": {"healthy": true, "status": "active 20ms"}}
        },
        "effective_config": {"config_map": {"config_map": {"otelprof": {
            "body": b64(b"cpu=10ms"), "content_type": "text/plain; charset=utf-8"}}}},
        "remote_config_status": {
            "last_remote_config_hash": b64(&[0xaa, 0xbb]),
            "status": "RemoteConfigStatuses_FAILED",
            "error_message": "out is a path"
        },
        "agent_disconnect": {},
        "flags": "1",
        "custom_capabilities": {"capabilities": ["io.opentelemetry.otelprof.capture"]},
        "custom_message": {
            "capability": "io.opentelemetry.otelprof.capture",
            "type": "status",
            "data": b64(b"id=c-1,state=done")
        }
    });
    assert_eq!(read, want);

    let server = ServerToAgent {
        instance_uid: uid.clone(),
        error_response: None,
        remote_config: Some(AgentRemoteConfig {
            config: Some(file(b"wall=50ms", "text/plain; charset=utf-8")),
            config_hash: vec![1, 2, 3],
        }),
        flags: 1,
        capabilities: 7,
        agent_identification: Some(AgentIdentification {
            new_instance_uid: (16..32).collect(),
        }),
        custom_capabilities: Some(CustomCapabilities {
            capabilities: vec!["io.opentelemetry.otelprof.capture".into()],
        }),
        custom_message: Some(CustomMessage {
            capability: "io.opentelemetry.otelprof.capture".into(),
            r#type: "start".into(),
            data: b"id=c-1,wall=20ms,seconds=60".to_vec(),
        }),
    };
    let path = dir.join("server.bin");
    std::fs::write(&path, server.encode_to_vec()).unwrap();
    let read = python_reads(&path, "ServerToAgent");
    let new_uid: Vec<u8> = (16..32).collect();
    let want = json!({
        "instance_uid": b64(&uid),
        "remote_config": {
            "config": {"config_map": {"otelprof": {"body": b64(b"wall=50ms"), "content_type": "text/plain; charset=utf-8"}}},
            "config_hash": b64(&[1, 2, 3])
        },
        "flags": "1",
        "capabilities": "7",
        "agent_identification": {"new_instance_uid": b64(&new_uid)},
        "custom_capabilities": {"capabilities": ["io.opentelemetry.otelprof.capture"]},
        "custom_message": {
            "capability": "io.opentelemetry.otelprof.capture",
            "type": "start",
            "data": b64(b"id=c-1,wall=20ms,seconds=60")
        }
    });
    assert_eq!(read, want);

    let error = ServerToAgent {
        instance_uid: uid.clone(),
        error_response: Some(ServerErrorResponse {
            r#type: ServerErrorResponseType::BadRequest as i32,
            error_message: "malformed".into(),
            retry_info: Some(RetryInfo {
                retry_after_nanoseconds: 30_000_000_000,
            }),
        }),
        ..Default::default()
    };
    let path = dir.join("error.bin");
    std::fs::write(&path, error.encode_to_vec()).unwrap();
    assert_eq!(
        python_reads(&path, "ServerToAgent"),
        json!({
            "instance_uid": b64(&uid),
            "error_response": {
                "type": "ServerErrorResponseType_BadRequest",
                "error_message": "malformed",
                "retry_info": {"retry_after_nanoseconds": "30000000000"}
            }
        })
    );
}

#[test]
fn what_the_official_classes_encode_we_read() {
    let dir = scratch_dir("opamp-messages-theirs");
    let out = Command::new(python())
        .arg(script())
        .arg("write")
        .arg(&dir)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let uid: Vec<u8> = (0..16).collect();

    let agent = AgentToServer::decode(&std::fs::read(dir.join("agent_to_server.bin")).unwrap()[..])
        .unwrap();
    assert_eq!(agent.instance_uid, uid);
    assert_eq!(agent.sequence_num, 7);
    assert_eq!(
        agent.capabilities,
        caps::REPORTS_STATUS | caps::ACCEPTS_REMOTE_CONFIG | caps::REPORTS_HEALTH
    );
    assert_eq!(agent.flags, 1);
    let d = agent.agent_description.unwrap();
    assert_eq!(d.identifying_attributes[0].key, "service.name");
    assert_eq!(d.identifying_attributes[0].text(), "shop");
    let values: Vec<(String, Option<Value>)> = d
        .non_identifying_attributes
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().and_then(|v| v.value)))
        .collect();
    assert_eq!(
        values,
        vec![
            ("process.pid".into(), Some(Value::IntValue(4242))),
            ("sampled".into(), Some(Value::BoolValue(true))),
            ("ratio".into(), Some(Value::DoubleValue(0.5))),
            ("raw".into(), Some(Value::BytesValue(vec![1, 0xff]))),
            (
                "list".into(),
                Some(Value::ArrayValue(otelprof_opamp::proto::ArrayValue {
                    values: vec![AnyValue {
                        value: Some(Value::StringValue("a".into()))
                    }]
                }))
            ),
        ]
    );
    assert_eq!(d.non_identifying_attributes[3].text(), "01ff");
    let h = agent.health.unwrap();
    assert!(h.healthy);
    assert_eq!(h.start_time_unix_nano, 1_700_000_000_000_000_000);
    assert_eq!(h.status_time_unix_nano, 1_700_000_001_000_000_000);
    assert_eq!(h.status, "profiling");
    assert_eq!(h.component_health_map["wall"].last_error, "unavailable");
    assert!(!h.component_health_map["wall"].healthy);
    let eff = agent.effective_config.unwrap().config_map.unwrap();
    assert_eq!(eff.config_map["otelprof"].body, b"cpu=10ms");
    assert_eq!(eff.config_map["otelprof"].content_type, "text/plain");
    let rcs = agent.remote_config_status.unwrap();
    assert_eq!(rcs.last_remote_config_hash, [0xaa, 0xbb]);
    assert_eq!(rcs.status, RemoteConfigStatuses::Failed as i32);
    assert_eq!(rcs.error_message, "out is a path");
    assert!(agent.agent_disconnect.is_some());
    assert_eq!(
        agent.custom_capabilities.unwrap().capabilities,
        ["io.opentelemetry.otelprof.capture"]
    );
    let m = agent.custom_message.unwrap();
    assert_eq!(
        (m.capability.as_str(), m.r#type.as_str(), &m.data[..]),
        (
            "io.opentelemetry.otelprof.capture",
            "status",
            &b"id=c-1,state=done"[..]
        )
    );

    let server =
        ServerToAgent::decode(&std::fs::read(dir.join("server_to_agent.bin")).unwrap()[..])
            .unwrap();
    assert_eq!(server.instance_uid, uid);
    assert!(server.error_response.is_none());
    let rc = server.remote_config.unwrap();
    assert_eq!(rc.config_hash, [1, 2, 3]);
    let f = &rc.config.unwrap().config_map["otelprof"];
    assert_eq!(
        (&f.body[..], f.content_type.as_str()),
        (&b"wall=50ms"[..], "text/plain; charset=utf-8")
    );
    assert_eq!(server.flags, 1);
    assert_eq!(server.capabilities, 3);
    assert_eq!(
        server.agent_identification.unwrap().new_instance_uid,
        (16..32).collect::<Vec<u8>>()
    );
    assert_eq!(
        server.custom_capabilities.unwrap().capabilities,
        ["io.opentelemetry.otelprof.capture"]
    );
    assert_eq!(
        server.custom_message.unwrap().data,
        b"id=c-1,wall=20ms,seconds=60"
    );

    let error =
        ServerToAgent::decode(&std::fs::read(dir.join("server_error.bin")).unwrap()[..]).unwrap();
    let e = error.error_response.unwrap();
    assert_eq!(e.r#type, ServerErrorResponseType::Unavailable as i32);
    assert_eq!(e.error_message, "busy");
    assert_eq!(e.retry_info.unwrap().retry_after_nanoseconds, 5_000_000_000);
}
