//! Who the agent says it is over OpAMP: its `AgentDescription`, from the same resource its
//! profiles carry, and its instance uid.
//!
//! Identifying: `service.name`, `service.namespace`, `service.version`, `service.instance.id`
//! (what tells one JVM's telemetry from another's). Non-identifying: where it runs (host,
//! process id, runtime, OS, deployment environment, the telemetry SDK) and what the caller
//! adds (the agent's profiling options). Never the command line, even when the resource has it
//! (`process.command_args`): the management server is not where profiles go, and nothing
//! leaves the process that the user did not ask for.

use crate::proto::AgentDescription;
use crate::proto::{any_value, AnyValue, KeyValue};
use opentelemetry::Value;

const IDENTIFYING: [&str; 4] = [
    "service.name",
    "service.namespace",
    "service.version",
    "service.instance.id",
];

const NON_IDENTIFYING: [&str; 10] = [
    "host.name",
    "process.pid",
    "process.executable.name",
    "process.runtime.name",
    "process.runtime.version",
    "process.runtime.description",
    "deployment.environment.name",
    "telemetry.sdk.name",
    "telemetry.sdk.language",
    "telemetry.sdk.version",
];

fn value(v: &Value) -> AnyValue {
    use any_value::Value as V;
    AnyValue {
        value: Some(match v {
            Value::Bool(b) => V::BoolValue(*b),
            Value::I64(i) => V::IntValue(*i),
            Value::F64(f) => V::DoubleValue(*f),
            other => V::StringValue(other.to_string()),
        }),
    }
}

/// The description of the agent whose profiles carry `resource`, with `extra`
/// non-identifying attributes after the resource's.
pub fn describe(
    resource: &opentelemetry_sdk::Resource,
    extra: &[(&str, String)],
) -> AgentDescription {
    let pick = |keys: &[&'static str]| -> Vec<KeyValue> {
        keys.iter()
            .filter_map(|k| {
                resource
                    .get(&opentelemetry::Key::from_static_str(k))
                    .map(|v| KeyValue {
                        key: (*k).to_owned(),
                        value: Some(value(&v)),
                    })
            })
            .collect()
    };
    let mut non_identifying = pick(&NON_IDENTIFYING);
    non_identifying.push(KeyValue::string("os.type", std::env::consts::OS));
    for (k, v) in extra {
        non_identifying.push(KeyValue::string(k, v));
    }
    AgentDescription {
        identifying_attributes: pick(&IDENTIFYING),
        non_identifying_attributes: non_identifying,
    }
}

/// The OpAMP instance uid: the `service.instance.id` itself when it is a UUID (otelprof makes
/// it one), so that the Instances view and the profiles name a JVM the same way; else a
/// UUID v7 from `now_millis` and `random`.
pub fn instance_uid(
    service_instance_id: Option<&str>,
    now_millis: u64,
    random: [u8; 16],
) -> [u8; 16] {
    if let Some(u) = service_instance_id.and_then(|s| uuid::Uuid::try_parse(s.trim()).ok()) {
        if !u.is_nil() {
            return *u.as_bytes();
        }
    }
    let mut b = random;
    b[..6].copy_from_slice(&now_millis.to_be_bytes()[2..]);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::KeyValue as Kv;

    #[test]
    fn identity_comes_from_the_resource_without_the_command_line() {
        let r = opentelemetry_sdk::Resource::builder_empty()
            .with_attributes([
                Kv::new("service.name", "shop"),
                Kv::new(
                    "service.instance.id",
                    "0b8c6f2e-0000-4000-8000-000000000001",
                ),
                Kv::new("process.pid", 42i64),
                Kv::new("host.name", "h1"),
                Kv::new("process.command_args", "java -Dsecret=1 -jar app.jar"),
            ])
            .build();
        let d = describe(&r, &[("otelprof.options", "period=60s".into())]);
        let keys = |kvs: &[KeyValue]| kvs.iter().map(|k| k.key.clone()).collect::<Vec<_>>();
        assert_eq!(
            keys(&d.identifying_attributes),
            ["service.name", "service.instance.id"]
        );
        assert_eq!(
            keys(&d.non_identifying_attributes),
            ["host.name", "process.pid", "os.type", "otelprof.options"]
        );
        assert_eq!(d.non_identifying_attributes[1].text(), "42");
    }

    #[test]
    fn the_uid_is_the_instance_id_when_it_can_be() {
        let uid = instance_uid(Some("0b8c6f2e-0000-4000-8000-000000000001"), 0, [0; 16]);
        assert_eq!(uid[..4], [0x0b, 0x8c, 0x6f, 0x2e]);
        let v7 = instance_uid(Some("not-a-uuid"), 0x0102_0304_0506, [0xff; 16]);
        assert_eq!(v7[..6], [1, 2, 3, 4, 5, 6]);
        assert_eq!(v7[6] >> 4, 7);
        assert_eq!(v7[8] >> 6, 2);
    }
}
