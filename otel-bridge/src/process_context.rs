//! The payload of the OpenTelemetry process context (OTEP 4719): what out-of-process readers
//! (the OpenTelemetry eBPF profiler) learn about this process without talking to it.
//!
//! It is an `opentelemetry.proto.resource.v1.Resource`: the process's resource attributes,
//! plus the thread-context reference data of OTEP 4947 that tells a reader how to interpret
//! the `otel_thread_ctx_v1` records (`threadlocal.schema_version`, and
//! `threadlocal.attribute_key_map`, the names of the attribute key indexes used in records).
//! Publishing it in memory (the mapping, the header) is the agent's job; this is only bytes.

use opentelemetry::{Array, KeyValue, StringValue, Value};
use prost::Message;

/// `threadlocal.schema_version` while OTEP 4947 is experimental (its text says `tls_v1` once
/// merged into the specification).
pub const SCHEMA_VERSION: &str = "tlsdesc_v1_dev";

/// Encodes the payload: `resource`'s attributes, then the thread-context reference data with
/// `attribute_keys[i]` the name of key index `i`.
pub fn payload(resource: &opentelemetry_sdk::Resource, attribute_keys: &[&str]) -> Vec<u8> {
    let keys: Vec<StringValue> = attribute_keys
        .iter()
        .map(|k| StringValue::from(k.to_string()))
        .collect();
    let with_thread_context = opentelemetry_sdk::Resource::builder_empty()
        .with_attributes(
            resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_attributes([
            KeyValue::new("threadlocal.schema_version", SCHEMA_VERSION),
            KeyValue::new(
                "threadlocal.attribute_key_map",
                Value::Array(Array::String(keys)),
            ),
        ])
        .build();
    crate::otlp::resource_to_pb(&with_thread_context).encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    use opentelemetry_proto::tonic::resource::v1::Resource as PbResource;

    #[test]
    fn payload_is_a_resource_with_the_thread_context_reference_data() {
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_attributes([
                KeyValue::new("service.name", "shop"),
                KeyValue::new("process.pid", 42i64),
            ])
            .build();
        let bytes = payload(&resource, &["local_root_span_id"]);
        let pb = PbResource::decode(bytes.as_slice()).unwrap();
        let get = |k: &str| {
            pb.attributes
                .iter()
                .find(|a| a.key == k)
                .and_then(|a| a.value.clone())
                .and_then(|v| v.value)
        };
        assert_eq!(get("service.name"), Some(V::StringValue("shop".into())));
        assert_eq!(get("process.pid"), Some(V::IntValue(42)));
        assert_eq!(
            get("threadlocal.schema_version"),
            Some(V::StringValue(SCHEMA_VERSION.into()))
        );
        match get("threadlocal.attribute_key_map") {
            Some(V::ArrayValue(a)) => {
                assert_eq!(a.values.len(), 1);
                assert_eq!(
                    a.values[0].value,
                    Some(V::StringValue("local_root_span_id".into()))
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
