//! The OTel resource describing the profiled process.
//!
//! Built from inputs the caller gathers and passes in (this crate reads no environment):
//! the agent's `service=` option, the raw `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`
//! values, and facts about the host, the process and the JVM. Precedence, lowest first, as in
//! the OTel SDKs: facts the agent detected, then `OTEL_RESOURCE_ATTRIBUTES`, then
//! `OTEL_SERVICE_NAME`, then `service=` (the most specific setting wins). The
//! `telemetry.sdk.*` attributes describe otelprof itself and cannot be overridden.
//!
//! Nothing is exported that the user did not ask for: no command line, no environment, no
//! system properties, unless [`ProcessFacts::command_args`] is filled in (which the caller does
//! only when asked to).

use std::collections::BTreeMap;

use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::Resource;

/// What the caller learned about the process it runs in. `None` fields are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessFacts {
    pub pid: u32,
    pub host_name: Option<String>,
    /// e.g. `java` (basename of the executable), also used for `unknown_service:<name>`.
    pub executable_name: Option<String>,
    /// `java.runtime.name`, e.g. `OpenJDK Runtime Environment`.
    pub runtime_name: Option<String>,
    /// `java.runtime.version`, e.g. `17.0.12+7`.
    pub runtime_version: Option<String>,
    /// `java.vm.vendor java.vm.name java.vm.version`, as the OTel Java agent reports it.
    pub runtime_description: Option<String>,
    /// The command line; only when the user asked for it.
    pub command_args: Option<Vec<String>>,
}

/// Everything the resource is built from.
#[derive(Clone, Copy, Debug)]
pub struct ResourceInputs<'a> {
    /// The agent's `service=` option.
    pub service_option: Option<&'a str>,
    /// The value of `OTEL_SERVICE_NAME`.
    pub otel_service_name: Option<&'a str>,
    /// The raw value of `OTEL_RESOURCE_ATTRIBUTES`.
    pub otel_resource_attributes: Option<&'a str>,
    /// `service.instance.id` unless `OTEL_RESOURCE_ATTRIBUTES` sets one; see [`uuid_v4`].
    pub instance_id: &'a str,
    pub process: &'a ProcessFacts,
}

/// Resource attribute keys (OTel semantic conventions).
pub mod keys {
    pub const SERVICE_NAME: &str = "service.name";
    pub const SERVICE_VERSION: &str = "service.version";
    pub const SERVICE_NAMESPACE: &str = "service.namespace";
    pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
    pub const DEPLOYMENT_ENVIRONMENT_NAME: &str = "deployment.environment.name";
    pub const HOST_NAME: &str = "host.name";
    pub const PROCESS_PID: &str = "process.pid";
    pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
    pub const PROCESS_COMMAND_ARGS: &str = "process.command_args";
    pub const PROCESS_RUNTIME_NAME: &str = "process.runtime.name";
    pub const PROCESS_RUNTIME_VERSION: &str = "process.runtime.version";
    pub const PROCESS_RUNTIME_DESCRIPTION: &str = "process.runtime.description";
    pub const TELEMETRY_SDK_NAME: &str = "telemetry.sdk.name";
    pub const TELEMETRY_SDK_LANGUAGE: &str = "telemetry.sdk.language";
    pub const TELEMETRY_SDK_VERSION: &str = "telemetry.sdk.version";
}

/// `OTEL_RESOURCE_ATTRIBUTES` could not be read; the OTel spec says to discard the whole value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceAttributesError {
    #[error("OTEL_RESOURCE_ATTRIBUTES entry {0:?} is not key=value")]
    NotKeyValue(String),
    #[error("OTEL_RESOURCE_ATTRIBUTES entry {0:?} has an empty key")]
    EmptyKey(String),
    #[error("OTEL_RESOURCE_ATTRIBUTES entry {0:?} has a bad percent-encoding")]
    BadPercentEncoding(String),
}

/// Parses `key1=value1,key2=value2` (W3C-baggage-like: keys and values percent-decoded,
/// surrounding whitespace trimmed, empty entries skipped). Later duplicates win.
pub fn parse_resource_attributes(
    raw: &str,
) -> Result<Vec<(String, String)>, ResourceAttributesError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (k, v) = entry
            .split_once('=')
            .ok_or_else(|| ResourceAttributesError::NotKeyValue(entry.to_owned()))?;
        let bad = || ResourceAttributesError::BadPercentEncoding(entry.to_owned());
        let key = percent_decode(k.trim()).ok_or_else(bad)?;
        let value = percent_decode(v.trim()).ok_or_else(bad)?;
        if key.is_empty() {
            return Err(ResourceAttributesError::EmptyKey(entry.to_owned()));
        }
        out.retain(|(existing, _)| *existing != key);
        out.push((key, value));
    }
    Ok(out)
}

/// `s` percent-decoded, `None` if an escape is malformed or the result is not UTF-8: the rule
/// for the OTel variables that carry `key=value` lists (`OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_EXPORTER_OTLP_HEADERS`). The
/// `percent-encoding` crate passes a malformed escape (`%zz`, a trailing `%`) through as text,
/// but the OTel specification treats it as a decoding error, which discards the whole value
/// (Resource SDK, "Specifying resource information via an environment variable").
pub fn percent_decode(s: &str) -> Option<String> {
    let well_formed = s.split('%').skip(1).all(|escape| {
        escape
            .as_bytes()
            .get(..2)
            .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return None;
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

/// A random (version 4) UUID in its text form, from 16 random bytes the caller provides.
pub fn uuid_v4(random: [u8; 16]) -> String {
    uuid::Builder::from_random_bytes(random)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// Builds the resource. A malformed `OTEL_RESOURCE_ATTRIBUTES` is ignored as a whole and
/// returned as the error beside the resource, for the caller to report once.
pub fn build_resource(inputs: &ResourceInputs<'_>) -> (Resource, Option<ResourceAttributesError>) {
    let facts = inputs.process;
    let mut attrs: BTreeMap<String, Value> = BTreeMap::new();
    let mut set = |k: &str, v: Value| {
        attrs.insert(k.to_owned(), v);
    };
    let unknown = format!(
        "unknown_service:{}",
        facts.executable_name.as_deref().unwrap_or("java")
    );
    set(keys::SERVICE_NAME, unknown.into());
    set(
        keys::SERVICE_INSTANCE_ID,
        inputs.instance_id.to_owned().into(),
    );
    set(keys::PROCESS_PID, i64::from(facts.pid).into());
    let optional = [
        (keys::HOST_NAME, &facts.host_name),
        (keys::PROCESS_EXECUTABLE_NAME, &facts.executable_name),
        (keys::PROCESS_RUNTIME_NAME, &facts.runtime_name),
        (keys::PROCESS_RUNTIME_VERSION, &facts.runtime_version),
        (
            keys::PROCESS_RUNTIME_DESCRIPTION,
            &facts.runtime_description,
        ),
    ];
    for (k, v) in optional {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            set(k, v.to_owned().into());
        }
    }
    if let Some(args) = &facts.command_args {
        let args: Vec<opentelemetry::StringValue> = args.iter().map(|a| a.clone().into()).collect();
        set(keys::PROCESS_COMMAND_ARGS, Value::Array(args.into()));
    }
    let mut error = None;
    if let Some(raw) = inputs.otel_resource_attributes {
        match parse_resource_attributes(raw) {
            Ok(kvs) => {
                for (k, v) in kvs {
                    set(&k, v.into());
                }
            }
            Err(e) => error = Some(e),
        }
    }
    for name in [inputs.otel_service_name, inputs.service_option] {
        if let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) {
            set(keys::SERVICE_NAME, name.to_owned().into());
        }
    }
    set(keys::TELEMETRY_SDK_NAME, "otelprof".into());
    set(keys::TELEMETRY_SDK_LANGUAGE, "rust".into());
    set(
        keys::TELEMETRY_SDK_VERSION,
        env!("CARGO_PKG_VERSION").into(),
    );
    let resource = Resource::builder_empty()
        .with_attributes(attrs.into_iter().map(|(k, v)| KeyValue::new(k, v)))
        .build();
    (resource, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::Key;

    fn get(r: &Resource, k: &str) -> Option<String> {
        r.get(&Key::from(k.to_owned())).map(|v| v.to_string())
    }

    fn facts() -> ProcessFacts {
        ProcessFacts {
            pid: 4242,
            host_name: Some("box-1".into()),
            executable_name: Some("java".into()),
            runtime_name: Some("OpenJDK Runtime Environment".into()),
            runtime_version: Some("17.0.12+7".into()),
            runtime_description: Some("Eclipse Adoptium OpenJDK 64-Bit Server VM 17.0.12+7".into()),
            command_args: None,
        }
    }

    #[test]
    fn parses_and_percent_decodes() {
        let kv = parse_resource_attributes(
            " service.version = 1.5 ,deployment.environment.name=prod%2Ceu,,k=a%3Db, k=c",
        )
        .unwrap();
        assert_eq!(
            kv,
            vec![
                ("service.version".into(), "1.5".into()),
                ("deployment.environment.name".into(), "prod,eu".into()),
                ("k".into(), "c".into()),
            ]
        );
        assert!(matches!(
            parse_resource_attributes("a=1,novalue"),
            Err(ResourceAttributesError::NotKeyValue(_))
        ));
        assert!(matches!(
            parse_resource_attributes("a=%zz"),
            Err(ResourceAttributesError::BadPercentEncoding(_))
        ));
        for bad in ["a=b%", "a=%4", "a%=b", "a=%ff", "a=%C3%28"] {
            assert!(
                matches!(
                    parse_resource_attributes(bad),
                    Err(ResourceAttributesError::BadPercentEncoding(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            parse_resource_attributes("k%C3%A9y=%E2%82%AC%25").unwrap(),
            vec![("k\u{e9}y".into(), "\u{20ac}%".into())]
        );
        assert!(matches!(
            parse_resource_attributes("=1"),
            Err(ResourceAttributesError::EmptyKey(_))
        ));
        assert_eq!(parse_resource_attributes("").unwrap(), vec![]);
    }

    #[test]
    fn precedence_and_no_surprises() {
        let f = facts();
        let inputs = ResourceInputs {
            service_option: None,
            otel_service_name: None,
            otel_resource_attributes: Some(
                "service.name=from-attrs,service.version=1.5,service.namespace=shop,deployment.environment.name=prod,host.name=override",
            ),
            instance_id: "0b8c6f2e-0000-4000-8000-000000000001",
            process: &f,
        };
        let (r, err) = build_resource(&inputs);
        assert!(err.is_none());
        assert_eq!(get(&r, "service.name").as_deref(), Some("from-attrs"));
        assert_eq!(get(&r, "service.version").as_deref(), Some("1.5"));
        assert_eq!(get(&r, "service.namespace").as_deref(), Some("shop"));
        assert_eq!(
            get(&r, "deployment.environment.name").as_deref(),
            Some("prod")
        );
        assert_eq!(get(&r, "host.name").as_deref(), Some("override"));
        assert_eq!(get(&r, "process.pid").as_deref(), Some("4242"));
        assert_eq!(
            get(&r, "service.instance.id").as_deref(),
            Some("0b8c6f2e-0000-4000-8000-000000000001")
        );
        assert_eq!(
            get(&r, "process.runtime.version").as_deref(),
            Some("17.0.12+7")
        );
        assert_eq!(get(&r, "telemetry.sdk.name").as_deref(), Some("otelprof"));
        assert_eq!(get(&r, "process.command_args"), None);
        assert!(r.iter().all(
            |(k, _)| !k.as_str().contains("env") || k.as_str() == "deployment.environment.name"
        ));

        let with_env_name = ResourceInputs {
            otel_service_name: Some("from-env"),
            ..inputs
        };
        assert_eq!(
            get(&build_resource(&with_env_name).0, "service.name").as_deref(),
            Some("from-env")
        );
        let with_option = ResourceInputs {
            service_option: Some("from-option"),
            ..with_env_name
        };
        assert_eq!(
            get(&build_resource(&with_option).0, "service.name").as_deref(),
            Some("from-option")
        );
    }

    #[test]
    fn defaults_and_bad_attributes() {
        let f = facts();
        let inputs = ResourceInputs {
            service_option: None,
            otel_service_name: Some("  "),
            otel_resource_attributes: Some("service.version=1,broken"),
            instance_id: "id",
            process: &f,
        };
        let (r, err) = build_resource(&inputs);
        assert!(matches!(err, Some(ResourceAttributesError::NotKeyValue(_))));
        assert_eq!(
            get(&r, "service.name").as_deref(),
            Some("unknown_service:java")
        );
        // The whole malformed value is discarded, including its valid entries.
        assert_eq!(get(&r, "service.version"), None);
    }

    #[test]
    fn uuid_v4_sets_version_and_variant() {
        let u = uuid_v4([0xff; 16]);
        assert_eq!(u, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
    }
}
